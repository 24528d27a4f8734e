/* What xftp says when a job is over: a line of text or the JSON result object. */
#include "summary.h"

#include <stdio.h>
#include <string.h>

#include <dragstrip/clock.h>
#include <dragstrip/json.h>
#include <dragstrip/size.h>
#include <dragstrip/stop.h>

#include "ftptime.h"
#include "listing.h"
#include "url.h"

static void print_text(const struct summary *s)
{
        const struct job_totals *t = s->totals;
        char rate[64]; /* the closing lines' one unit: MB/s (10^6 bytes) and Gbit/s */

        if (strcmp(s->op, "ls") == 0) {
                /* Listings travel with CR LF line ends (RFC 959's ASCII type); print local
                 * ones. */
                if (s->rc == 0)
                        listing_show(stdout, t->listing, t->listing_len, true);
                return;
        }
        if (s->rc < 0 && t->failed == 0)
                return;
        printf("xftp %s: %u file%s, %llu bytes in %.2f s = %s (%u stream%s, "
               "%zu-byte blocks)%s",
               s->op, t->files, t->files == 1 ? "" : "s", (unsigned long long)t->bytes, t->seconds,
               ds_rate_format(rate, sizeof(rate), t->bytes, t->seconds, 'a'), t->streams_used,
               t->streams_used == 1 ? "" : "s", s->job->block, t->verified ? ", verified" : "");
        if (t->skipped)
                printf(", %u already the same", t->skipped);
        if (t->failed)
                printf(", %u failed", t->failed);
        putchar('\n');
}

/* The command line, defaults applied, for the report's "params". */
static void summary_params(struct ds_json *json, void *ctx)
{
        static const char *const tls_modes[] = {
            [FTP_TLS_AUTO] = "auto", [FTP_TLS_REQUIRE] = "require", [FTP_TLS_NEVER] = "never"};
        const struct summary *s = ctx;
        const struct job_opts *o = s->job;

        ds_json_open_array(json, "args");
        for (int i = 0; i < s->nargs; i++) {
                char shown[2 * URL_PART_MAX];
                url_show(s->args[i], shown, sizeof(shown));
                ds_json_str(json, NULL, url_is_ftp(s->args[i]) ? shown : s->args[i]);
        }
        ds_json_close(json);
        ds_json_u64(json, "parallel", o->streams);
        ds_json_double(json, "rate_bps", s->rate_bps);
        ds_json_u64(json, "jobs", o->jobs);
        ds_json_bool(json, "recursive", o->recursive);
        ds_json_bool(json, "update", o->update);
        ds_json_bool(json, "resume", o->resume);
        ds_json_bool(json, "verify", o->verify);
        ds_json_bool(json, "sendfile", !o->no_sendfile);
        ds_json_double(json, "timeout_s", o->timeout_ms / 1e3);
        ds_json_str(json, "tls", tls_modes[s->tls->mode]);
        ds_json_bool(json, "insecure", s->tls->insecure);
}

/* The files and directories of a listing (what a get could copy: no links, no "." or
 * ".."), each with what the server said of it. Cuts the listing's text in place. */
static void write_entries(struct ds_json *json, struct job_totals *t)
{
        char *save;

        ds_json_open_array(json, "entries");
        for (char *line = t->listing ? strtok_r(t->listing, "\n", &save) : NULL; line;
             line = strtok_r(NULL, "\n", &save)) {
                char *name, when_text[DS_UTC_TEXT];
                struct listing_facts facts;
                struct timespec when;
                if (!listing_entry(line, t->listing_facts, &name, &facts, NULL))
                        continue;
                ds_json_open(json, NULL);
                ds_json_str(json, "name", name);
                ds_json_str(json, "type", facts.is_dir ? "dir" : "file");
                if (facts.size != UINT64_MAX)
                        ds_json_u64(json, "size", facts.size);
                if (facts.modified[0] && xftp_time_parse(facts.modified, &when) > 0 &&
                    when.tv_sec >= 0)
                        ds_json_str(json, "modified",
                                    ds_utc_format(when_text, sizeof(when_text),
                                                  (uint64_t)when.tv_sec * 1000000000u +
                                                      (uint64_t)when.tv_nsec));
                ds_json_close(json);
        }
        ds_json_close(json);
}

static void summary_extra(struct ds_json *json, void *ctx)
{
        const struct summary *s = ctx;
        struct job_totals *t = s->totals;

        ds_json_bool(json, "ok", s->rc == 0);
        if (s->rc < 0)
                ds_json_str(json, "error", s->error);
        ds_json_u64(json, "files", t->files);
        ds_json_u64(json, "skipped", t->skipped);
        ds_json_u64(json, "failed", t->failed);
        ds_json_u64(json, "resumed_bytes", t->resumed_bytes);
        ds_json_double(json, "wall_seconds", s->wall_seconds);
        ds_json_u64(json, "streams", t->streams_used);
        ds_json_u64(json, "block", s->job->block);
        ds_json_u64(json, "verified", t->verified);
        if (t->verified) {
                ds_json_str(json, "hash_algo", xftp_hash_name(t->last_algo));
                ds_json_str(json, "hash", t->last_hash);
        }
        ds_json_bool(json, "tls", t->tls_version[0] != '\0');
        if (t->tls_version[0]) {
                ds_json_str(json, "tls_version", t->tls_version);
                ds_json_str(json, "tls_cipher", t->tls_cipher);
                ds_json_bool(json, "ktls", t->tls_kernel);
                if (t->tls_sealed_by) {
                        ds_json_str(json, "tls_sealed_by", t->tls_sealed_by);
                        ds_json_str(json, "tls_opened_by", t->tls_opened_by);
                }
        }
        if (strcmp(s->op, "ls") == 0 && s->rc == 0)
                write_entries(json, t);
}

void summary_print(struct ds_report *report, struct summary *s)
{
        struct ds_result result;

        if (!s->json) {
                print_text(s);
                return;
        }
        /* The live counters give the messages and faults; the job's own accounting the
         * bytes moved and the seconds spent moving them, logins not counted. */
        ds_report_finish(report, &result);
        result.counters.bytes = s->totals->bytes;
        result.seconds = s->totals->seconds;
        ds_result_rates(&result);
        result.interrupted = ds_stopping();
        report->config.params = summary_params;
        report->config.params_ctx = s;
        ds_report_print(report, &result, summary_extra, s);
}
