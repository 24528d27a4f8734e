/* Monotonic time and CPU accounting. */
#include <dragstrip/clock.h>

#include <dragstrip/stop.h>

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>

uint64_t ds_now_ns(void)
{
        struct timespec ts;

        /* CLOCK_MONOTONIC cannot fail on Linux with a valid pointer. */
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double ds_seconds_between(uint64_t start_ns, uint64_t end_ns)
{
        if (end_ns >= start_ns)
                return (double)(end_ns - start_ns) / 1e9;
        return -(double)(start_ns - end_ns) / 1e9;
}

uint64_t ds_unix_now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

char *ds_utc_format(char *buf, size_t len, uint64_t unix_ns)
{
        time_t seconds = (time_t)(unix_ns / 1000000000u);
        unsigned ms = (unsigned)(unix_ns % 1000000000u / 1000000u);
        struct tm tm;

        if (len == 0)
                return buf;
        buf[0] = '\0';
        if (!gmtime_r(&seconds, &tm))
                return buf;
        size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
        if (n == 0 || snprintf(buf + n, len - n, ".%03uZ", ms) >= (int)(len - n))
                buf[0] = '\0';
        return buf;
}

static double timeval_seconds(const struct timeval *tv)
{
        return (double)tv->tv_sec + (double)tv->tv_usec / 1e6;
}

void ds_cpu_now(struct ds_cpu *cpu)
{
        struct rusage usage = {0};

        /* RUSAGE_SELF with a valid pointer cannot fail; zeros stand if it ever does. */
        getrusage(RUSAGE_SELF, &usage);
        cpu->user_s = timeval_seconds(&usage.ru_utime);
        cpu->sys_s = timeval_seconds(&usage.ru_stime);
        cpu->voluntary_switches = usage.ru_nvcsw;
        cpu->involuntary_switches = usage.ru_nivcsw;
}

struct ds_cpu ds_cpu_since(const struct ds_cpu *earlier, const struct ds_cpu *later)
{
        struct ds_cpu diff = {
            .user_s = later->user_s - earlier->user_s,
            .sys_s = later->sys_s - earlier->sys_s,
            .voluntary_switches = later->voluntary_switches - earlier->voluntary_switches,
            .involuntary_switches = later->involuntary_switches - earlier->involuntary_switches,
        };
        return diff;
}

int ds_sleep_until(uint64_t deadline_ns)
{
        /* Slices of at most DS_STOP_SLICE_MS, so that a stop ends even a long pacing sleep. */
        const uint64_t slice_ns = (uint64_t)DS_STOP_SLICE_MS * 1000000u;
        for (;;) {
                if (ds_stopping())
                        return -EINTR;
                uint64_t now = ds_now_ns();
                if (now >= deadline_ns)
                        return 0;
                uint64_t until = deadline_ns - now > slice_ns ? now + slice_ns : deadline_ns;
                struct timespec ts = {
                    .tv_sec = (time_t)(until / 1000000000u),
                    .tv_nsec = (long)(until % 1000000000u),
                };
                /* EINTR: a signal; the deadline is absolute, so look at the flag and go back. */
                (void)clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        }
}

int ds_duration_ms(double seconds)
{
        if (!(seconds > 0)) /* also NaN */
                return 0;
        double ms = ceil(seconds * 1000);
        return ms >= (double)INT_MAX ? INT_MAX : (int)ms;
}
