/* The one result reporter: text lines, one JSON object, interval reports. */
#include <dragstrip/report.h>

#include <dragstrip/size.h>

#include <math.h>
#include <string.h>

#define RATE_TEXT 64

static void read_counters(const struct ds_report *report, struct ds_counters *out)
{
        if (report->live)
                ds_live_read(report->live, out);
        else
                memset(out, 0, sizeof(*out));
}

static double per_second(double amount, double seconds)
{
        return seconds > 0 ? amount / seconds : 0;
}

void ds_report_init(struct ds_report *report, const struct ds_report_config *config,
                    const struct ds_live_segment *live)
{
        memset(report, 0, sizeof(*report));
        report->config = *config;
        if (!report->config.out)
                report->config.out = stdout;
        if (!report->config.unit)
                report->config.unit = 'a';
        report->live = live;
        report->next_ns = UINT64_MAX;
}

static uint64_t interval_ns(const struct ds_report *report)
{
        double ns = report->config.interval_s * 1e9;
        /* Below a millisecond the reports would be all the tool does. */
        return ns < 1e6 ? 1000000u : (uint64_t)ns;
}

void ds_report_start(struct ds_report *report)
{
        ds_report_start_at(report, ds_now_ns());
}

void ds_report_start_at(struct ds_report *report, uint64_t start_ns)
{
        report->start_ns = start_ns;
        report->start_unix_ns = ds_unix_now_ns() - (ds_now_ns() - start_ns);
        report->last_ns = report->start_ns;
        report->next_ns =
            report->config.interval_s > 0 ? report->start_ns + interval_ns(report) : UINT64_MAX;
        ds_cpu_now(&report->start_cpu);
        report->last_cpu = report->start_cpu;
        read_counters(report, &report->last);
}

uint64_t ds_report_next_due(const struct ds_report *report)
{
        return report->next_ns;
}

void ds_result_rates(struct ds_result *result)
{
        result->MB_per_s = per_second((double)result->counters.bytes / 1e6, result->seconds);
        result->Gbit_per_s = per_second((double)result->counters.bytes * 8 / 1e9, result->seconds);
}

void ds_report_json_figures(struct ds_json *json, const struct ds_result *result)
{
        ds_json_u64(json, "messages", result->counters.messages);
        ds_json_u64(json, "bytes", result->counters.bytes);
        ds_json_double(json, "seconds", result->seconds);
        ds_json_double(json, "MB_per_s", result->MB_per_s);
        ds_json_double(json, "Gbit_per_s", result->Gbit_per_s);
        ds_json_double(json, "cpu_user_s", result->cpu.user_s);
        ds_json_double(json, "cpu_sys_s", result->cpu.sys_s);
        ds_json_open(json, "errors");
        for (int i = 0; i < DS_FAULT_COUNT; i++)
                ds_json_u64(json, ds_fault_name(i), result->counters.faults[i]);
        ds_json_close(json);
}

/* What every object starts with, final or interval: who reports, from which build, and
 * when the run began. */
static void json_identity(struct ds_json *json, const struct ds_report *report)
{
        const struct ds_report_config *c = &report->config;
        char start[DS_UTC_TEXT];

        ds_json_str(json, "tool", c->tool);
        ds_json_str(json, "role", c->role);
        ds_json_str(json, "link", c->link);
        ds_json_str(json, "version", DS_VERSION);
        ds_json_str(json, "start", ds_utc_format(start, sizeof(start), report->start_unix_ns));
        ds_json_u64(json, "msg_size", c->msg_size);
}

/* An interval's figures: the counters, faults and CPU since the last report. */
static void print_interval(const struct ds_report *report, double start_s, double end_s,
                           const struct ds_counters *now, const struct ds_cpu *cpu_now)
{
        const struct ds_report_config *c = &report->config;
        struct ds_result r = {.seconds = end_s - start_s,
                              .cpu = ds_cpu_since(&report->last_cpu, cpu_now)};

        r.counters.messages = now->messages - report->last.messages;
        r.counters.bytes = now->bytes - report->last.bytes;
        for (int i = 0; i < DS_FAULT_COUNT; i++)
                r.counters.faults[i] = now->faults[i] - report->last.faults[i];
        ds_result_rates(&r);
        if (c->json) {
                struct ds_json json;
                ds_json_begin(&json, c->out);
                json_identity(&json, report);
                ds_json_open(&json, "interval");
                ds_json_double(&json, "start", start_s);
                ds_json_double(&json, "end", end_s);
                ds_json_close(&json);
                ds_report_json_figures(&json, &r);
                ds_json_end(&json);
                return;
        }
        char rate[RATE_TEXT];
        fprintf(c->out, "[%6.2f-%6.2f s] %12llu bytes  %s\n", start_s, end_s,
                (unsigned long long)r.counters.bytes,
                ds_rate_format(rate, sizeof(rate), r.counters.bytes, r.seconds, c->unit));
        fflush(c->out);
}

/* Prints the interval from the last report to end_ns, which becomes the last. */
static void close_interval(struct ds_report *report, uint64_t end_ns, const struct ds_counters *now,
                           const struct ds_cpu *cpu_now)
{
        print_interval(report, ds_seconds_between(report->start_ns, report->last_ns),
                       ds_seconds_between(report->start_ns, end_ns), now, cpu_now);
        report->last = *now;
        report->last_cpu = *cpu_now;
        report->last_ns = end_ns;
}

void ds_report_tick(struct ds_report *report)
{
        uint64_t now = ds_now_ns();
        if (now < report->next_ns)
                return;

        struct ds_counters now_counters;
        struct ds_cpu now_cpu;
        read_counters(report, &now_counters);
        ds_cpu_now(&now_cpu);
        close_interval(report, now, &now_counters, &now_cpu);
        /* A caller that was busy past several intervals gets one line covering them all,
         * and the schedule stays on its grid rather than drifting. */
        uint64_t step = interval_ns(report);
        while (report->next_ns <= now)
                report->next_ns += step;
}

void ds_report_finish(struct ds_report *report, struct ds_result *result)
{
        ds_report_finish_at(report, ds_now_ns(), result);
}

/* The interval that ends with the run: a run of -w 2 with -i 1 ends on the second
 * report's due time, before any tick could print it. A tail shorter than a tenth of an
 * interval is left to the final figures; its rate would mean little. */
static void print_last_interval(struct ds_report *report, uint64_t end_ns,
                                const struct ds_counters *final, const struct ds_cpu *cpu_now)
{
        if (report->next_ns == UINT64_MAX || end_ns <= report->last_ns ||
            end_ns - report->last_ns < interval_ns(report) / 10)
                return;
        close_interval(report, end_ns, final, cpu_now);
}

void ds_report_finish_at(struct ds_report *report, uint64_t end_ns, struct ds_result *result)
{
        struct ds_cpu cpu_now;

        ds_cpu_now(&cpu_now);
        memset(result, 0, sizeof(*result));
        read_counters(report, &result->counters);
        print_last_interval(report, end_ns, &result->counters, &cpu_now);
        result->seconds = ds_seconds_between(report->start_ns, end_ns);
        result->cpu = ds_cpu_since(&report->start_cpu, &cpu_now);
        ds_result_rates(result);
        report->next_ns = UINT64_MAX;
}

static void print_json(const struct ds_report *report, const struct ds_result *result,
                       ds_report_extra_fn extra, void *ctx)
{
        const struct ds_report_config *c = &report->config;
        struct ds_json json;

        ds_json_begin(&json, c->out);
        json_identity(&json, report);
        ds_report_json_figures(&json, result);
        if (result->interrupted) /* only then: the design's fields stay as they were */
                ds_json_bool(&json, "interrupted", true);
        ds_json_open(&json, "params");
        ds_json_double(&json, "interval_s", c->interval_s);
        if (c->params)
                c->params(&json, c->params_ctx);
        ds_json_close(&json);
        if (extra)
                extra(&json, ctx);
        ds_json_end(&json);
}

static void print_text(const struct ds_report *report, const struct ds_result *result)
{
        const struct ds_report_config *c = &report->config;
        const struct ds_counters *n = &result->counters;
        char rate[RATE_TEXT], size[32];

        fprintf(c->out, "%s-%s: %llu bytes in %.3f s = %s, %llu messages of %s, ", c->tool, c->role,
                (unsigned long long)n->bytes, result->seconds,
                ds_rate_format(rate, sizeof(rate), n->bytes, result->seconds, c->unit),
                (unsigned long long)n->messages, ds_size_format(size, sizeof(size), c->msg_size));
        if (isfinite(result->cpu.user_s) && isfinite(result->cpu.sys_s))
                fprintf(c->out, "cpu %.2fs user %.2fs sys", result->cpu.user_s, result->cpu.sys_s);
        else /* a peer that did not say (NaN, null in JSON) */
                fputs("cpu unknown", c->out);

        bool any_fault = false;
        for (int i = 0; i < DS_FAULT_COUNT; i++)
                any_fault |= n->faults[i] != 0;
        if (any_fault) {
                fputs(", errors:", c->out);
                for (int i = 0; i < DS_FAULT_COUNT; i++)
                        fprintf(c->out, " %s %llu", ds_fault_name(i),
                                (unsigned long long)n->faults[i]);
        }
        if (result->interrupted)
                fputs(", interrupted", c->out);
        fputc('\n', c->out);
        fflush(c->out);
}

void ds_report_print(const struct ds_report *report, const struct ds_result *result,
                     ds_report_extra_fn extra, void *ctx)
{
        /* Runs of a sink end on their own threads: one report is one unbroken line. */
        FILE *out = report->config.out;
        flockfile(out);
        if (report->config.json)
                print_json(report, result, extra, ctx);
        else
                print_text(report, result);
        funlockfile(out);
}
