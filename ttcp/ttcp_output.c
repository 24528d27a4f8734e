/* What ttcp prints: the classic lines, laid out exactly as classic ttcp laid them out and
 * on the stream it used, so scripts that read them keep working. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include <dragstrip/size.h>

#include "ttcp.h"

static const char *side(const struct ttcp_options *opt)
{
        return opt->transmit ? "ttcp-t" : "ttcp-r";
}

/* Classic printed its banner and results on stdout (scripts do `ttcp ... | grep +++`);
 * ours do too, except when stdout carries the received data or the JSON object. */
static FILE *classic_stream(const struct ttcp_options *opt)
{
        if (opt->json || (!opt->transmit && !opt->sink_mode))
                return stderr;
        return stdout;
}

void ttcp_mark_start(struct ttcp_outcome *out, uint64_t now_ns)
{
        out->start_ns = now_ns;
        ds_cpu_now(&out->cpu_at_start);
}

void ttcp_say(const struct ttcp_options *opt, const char *fmt, ...)
{
        va_list ap;

        fprintf(stderr, "%s: ", side(opt));
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
}

void ttcp_print_banner(const struct ttcp_options *opt)
{
        FILE *to = classic_stream(opt);

        fprintf(to, "%s: buflen=%zu, nbuf=%llu, align=%zu/%zu, port=%u", side(opt), opt->buf_len,
                (unsigned long long)opt->nbuf, opt->align, opt->offset, opt->port);
        if (opt->sockbuf)
                fprintf(to, ", sockbufsize=%d", opt->sockbuf);
        fprintf(to, "  %s", opt->udp ? "udp" : "tcp");
        if (opt->streams > 1)
                fprintf(to, "  streams=%u", opt->streams);
        if (opt->duration_s > 0)
                fprintf(to, "  for %.1fs", opt->duration_s);
        if (opt->transmit)
                fprintf(to, "  -> %s", opt->host);
        fputc('\n', to);
        fflush(to);
}

/* The classic rusage line: user, sys, real, CPU share, memory, faults, switches. The
 * share is of the span the CPU time was measured over, so a tiny run reads sanely. */
static void print_rusage(const struct ttcp_options *opt, const struct ds_cpu *cpu, double real,
                         double cpu_span_s)
{
        struct rusage ru;
        int minutes = (int)(real / 60);

        getrusage(RUSAGE_SELF, &ru);
        fprintf(
            classic_stream(opt),
            "%s: %.1fuser %.1fsys %d:%02dreal %.0f%% %ldi+%ldd %ldmaxrss %ld+%ldpf %ld+%ldcsw\n",
            side(opt), cpu->user_s, cpu->sys_s, minutes, (int)(real - minutes * 60),
            100 * (cpu->user_s + cpu->sys_s) / cpu_span_s, ru.ru_ixrss, ru.ru_idrss, ru.ru_maxrss,
            ru.ru_majflt, ru.ru_minflt, ru.ru_nvcsw, ru.ru_nivcsw);
}

static void print_udp_accounting(const struct ttcp_options *opt, const struct ttcp_outcome *out,
                                 const struct ds_counters *counters)
{
        FILE *to = classic_stream(opt);

        if (out->udp_ended_by_silence)
                fprintf(to, "%s: no end sentinel arrived; the run ended after %.0f s of silence\n",
                        side(opt), opt->timeout_s);
        if (!out->udp_sequenced)
                return;
        fprintf(to, "%s: %llu datagrams, %llu lost, %llu duplicated, %llu reordered", side(opt),
                (unsigned long long)out->udp_datagrams,
                (unsigned long long)counters->faults[DS_FAULT_LOST],
                (unsigned long long)counters->faults[DS_FAULT_DUP],
                (unsigned long long)counters->faults[DS_FAULT_REORDERED]);
        if (out->udp_expected)
                fprintf(to, " (the sender sent %llu)", (unsigned long long)out->udp_expected);
        fputc('\n', to);
}

static void print_zerocopy(const struct ttcp_options *opt, const struct ttcp_outcome *out)
{
        FILE *to = classic_stream(opt);

        fprintf(to, "%s: zerocopy: %llu sends released, %llu of them copied by the kernel\n",
                side(opt), (unsigned long long)out->zc_completions,
                (unsigned long long)out->zc_copied);
        if (out->zc_copied)
                fprintf(to,
                        "%s: zerocopy: this path copies anyway (as loopback and veth do), so the "
                        "sends after the kernel said so were plain\n",
                        side(opt));
}

/* Classic's "... KB/cpu sec": the rate over CPU seconds, in the unit of -f. */
static void format_cpu_rate(char *buf, size_t len, uint64_t bytes, double cpu_s, char unit)
{
        size_t end;

        ds_rate_format(buf, len, bytes, cpu_s, unit);
        end = strlen(buf);
        if (end >= 4 && strcmp(buf + end - 4, "/sec") == 0)
                snprintf(buf + end - 4, len - (end - 4), "/cpu sec");
        else
                snprintf(buf + end, len - end, " per CPU second");
}

void ttcp_print_classic(const struct ttcp_options *opt, const struct ttcp_outcome *out,
                        const struct ds_counters *counters, const struct ds_cpu *cpu_used,
                        double cpu_span_s)
{
        FILE *to = classic_stream(opt);
        double real = ds_seconds_between(out->start_ns, out->end_ns);
        double cpu_s = cpu_used->user_s + cpu_used->sys_s;
        char unit = opt->unit ? opt->unit : 'K';
        char rate[96];

        /* As classic: a span too short to measure counts as a millisecond. */
        if (real <= 0)
                real = 0.001;
        if (cpu_s <= 0)
                cpu_s = 0.001;
        if (cpu_span_s < real)
                cpu_span_s = real;
        ds_rate_format(rate, sizeof rate, out->bytes, real, unit);
        fprintf(to, "%s: %llu bytes in %.2f real seconds = %s +++\n", side(opt),
                (unsigned long long)out->bytes, real, rate);
        if (opt->verbose) {
                format_cpu_rate(rate, sizeof rate, out->bytes, cpu_s, unit);
                fprintf(to, "%s: %llu bytes in %.2f CPU seconds = %s\n", side(opt),
                        (unsigned long long)out->bytes, cpu_s, rate);
        }
        fprintf(to, "%s: %llu I/O calls, msec/call = %.2f, calls/sec = %.2f\n", side(opt),
                (unsigned long long)out->io_calls,
                out->io_calls ? 1000.0 * real / (double)out->io_calls : 0.0,
                (double)out->io_calls / real);
        print_rusage(opt, cpu_used, real, cpu_span_s);
        if (opt->verbose)
                fprintf(to, "%s: buffer address %#lx\n", side(opt), (unsigned long)out->buf_addr);
        if (opt->udp && !opt->transmit)
                print_udp_accounting(opt, out, counters);
        if (opt->zerocopy)
                print_zerocopy(opt, out);
        if (opt->verbose) {
                double gb = out->bytes / 1e9;
                fprintf(to, "%s: %.3f CPU seconds per GB (%.3f user, %.3f sys)\n", side(opt),
                        gb > 0 ? (cpu_used->user_s + cpu_used->sys_s) / gb : 0.0,
                        gb > 0 ? cpu_used->user_s / gb : 0.0, gb > 0 ? cpu_used->sys_s / gb : 0.0);
                if (opt->touch)
                        fprintf(to, "%s: touched every byte, sum %llu\n", side(opt),
                                (unsigned long long)out->touch_sum);
        }
}
