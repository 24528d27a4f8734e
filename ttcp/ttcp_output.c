/* What ttcp prints: the classic lines on stderr, exactly as classic ttcp laid them out,
 * so scripts that read them keep working. */
#include <stdarg.h>
#include <stdio.h>
#include <sys/resource.h>

#include <dragstrip/size.h>

#include "ttcp.h"

static const char *side(const struct ttcp_options *opt)
{
        return opt->transmit ? "ttcp-t" : "ttcp-r";
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
        fprintf(stderr, "%s: buflen=%zu, nbuf=%llu, align=%zu/%zu, port=%u", side(opt),
                opt->buf_len, (unsigned long long)opt->nbuf, opt->align, opt->offset, opt->port);
        if (opt->sockbuf)
                fprintf(stderr, ", sockbufsize=%d", opt->sockbuf);
        fprintf(stderr, "  %s", opt->udp ? "udp" : "tcp");
        if (opt->streams > 1)
                fprintf(stderr, "  streams=%u", opt->streams);
        if (opt->duration_s > 0)
                fprintf(stderr, "  for %.1fs", opt->duration_s);
        if (opt->transmit)
                fprintf(stderr, "  -> %s", opt->host);
        fputc('\n', stderr);
}

/* The classic rusage line: user, sys, real, CPU share, memory, faults, switches. */
static void print_rusage(const struct ttcp_options *opt, const struct ds_cpu *cpu, double real)
{
        struct rusage ru;
        int minutes = (int)(real / 60);

        getrusage(RUSAGE_SELF, &ru);
        fprintf(
            stderr,
            "%s: %.1fuser %.1fsys %d:%02dreal %.0f%% %ldi+%ldd %ldmaxrss %ld+%ldpf %ld+%ldcsw\n",
            side(opt), cpu->user_s, cpu->sys_s, minutes, (int)(real - minutes * 60),
            real > 0 ? 100 * (cpu->user_s + cpu->sys_s) / real : 0.0, ru.ru_ixrss, ru.ru_idrss,
            ru.ru_maxrss, ru.ru_majflt, ru.ru_minflt, ru.ru_nvcsw, ru.ru_nivcsw);
}

static void print_udp_accounting(const struct ttcp_options *opt, const struct ttcp_outcome *out,
                                 const struct ds_counters *counters)
{
        if (out->udp_ended_by_silence)
                fprintf(stderr,
                        "%s: no end sentinel arrived; the run ended after %.0f s of silence\n",
                        side(opt), opt->timeout_s);
        if (!out->udp_sequenced)
                return;
        fprintf(stderr, "%s: %llu datagrams, %llu lost, %llu duplicated, %llu reordered", side(opt),
                (unsigned long long)out->udp_datagrams,
                (unsigned long long)counters->faults[DS_FAULT_LOST],
                (unsigned long long)counters->faults[DS_FAULT_DUP],
                (unsigned long long)counters->faults[DS_FAULT_REORDERED]);
        if (out->udp_expected)
                fprintf(stderr, " (the sender sent %llu)", (unsigned long long)out->udp_expected);
        fputc('\n', stderr);
}

void ttcp_print_classic(const struct ttcp_options *opt, const struct ttcp_outcome *out,
                        const struct ds_counters *counters, const struct ds_cpu *cpu_used)
{
        double real = ds_seconds_between(out->start_ns, out->end_ns);
        char rate[96];

        ds_rate_format(rate, sizeof rate, out->bytes, real, opt->unit ? opt->unit : 'K');
        fprintf(stderr, "%s: %llu bytes in %.2f real seconds = %s +++\n", side(opt),
                (unsigned long long)out->bytes, real, rate);
        fprintf(stderr, "%s: %llu I/O calls, msec/call = %.2f, calls/sec = %.2f\n", side(opt),
                (unsigned long long)out->io_calls,
                out->io_calls ? 1000.0 * real / (double)out->io_calls : 0.0,
                real > 0 ? (double)out->io_calls / real : 0.0);
        print_rusage(opt, cpu_used, real);
        if (opt->udp && !opt->transmit)
                print_udp_accounting(opt, out, counters);
        if (opt->zerocopy) {
                fprintf(stderr,
                        "%s: zerocopy: %llu sends released, %llu of them copied by the kernel\n",
                        side(opt), (unsigned long long)out->zc_completions,
                        (unsigned long long)out->zc_copied);
                if (out->zc_copied)
                        fprintf(stderr,
                                "%s: zerocopy: this path copies anyway (as loopback and veth "
                                "do), so the sends after the kernel said so were plain\n",
                                side(opt));
        }
        if (opt->verbose) {
                double gb = out->bytes / 1e9;
                fprintf(stderr, "%s: %.3f CPU seconds per GB (%.3f user, %.3f sys)\n", side(opt),
                        gb > 0 ? (cpu_used->user_s + cpu_used->sys_s) / gb : 0.0,
                        gb > 0 ? cpu_used->user_s / gb : 0.0, gb > 0 ? cpu_used->sys_s / gb : 0.0);
                if (opt->touch)
                        fprintf(stderr, "%s: touched every byte, sum %llu\n", side(opt),
                                (unsigned long long)out->touch_sum);
        }
}
