/* Monotonic time and CPU accounting. */
#ifndef DRAGSTRIP_CLOCK_H
#define DRAGSTRIP_CLOCK_H

#include <stddef.h>
#include <stdint.h>

/* Nanoseconds on CLOCK_MONOTONIC; never goes backwards, unrelated to the wall clock. */
uint64_t ds_now_ns(void);

/* Seconds between two ds_now_ns() readings. */
double ds_seconds_between(uint64_t start_ns, uint64_t end_ns);

/* Nanoseconds since the Unix epoch on CLOCK_REALTIME: a date for reports, never a
 * measure of time (it jumps when the clock is set). */
uint64_t ds_unix_now_ns(void);

/* A date (ns since the Unix epoch) as ISO 8601 UTC to the millisecond,
 * "2026-01-31T12:00:00.000Z", into buf of len bytes (DS_UTC_TEXT is enough). Returns buf;
 * "" when len is too small. */
#define DS_UTC_TEXT 32
char *ds_utc_format(char *buf, size_t len, uint64_t unix_ns);

/* CPU time this process has used so far (all threads), from getrusage(RUSAGE_SELF). */
struct ds_cpu {
        double user_s;
        double sys_s;
        long voluntary_switches;
        long involuntary_switches;
};
void ds_cpu_now(struct ds_cpu *cpu);

/* later minus earlier, field by field. */
struct ds_cpu ds_cpu_since(const struct ds_cpu *earlier, const struct ds_cpu *later);

/* Sleeps until the monotonic clock reaches deadline_ns (returns 0 at once if past), or
 * until a stop is requested (stop.h): then -EINTR within DS_STOP_SLICE_MS. */
int ds_sleep_until(uint64_t deadline_ns);

/* The one conversion of a duration in seconds to milliseconds, for every timeout and
 * deadline: rounded up, 0 for nothing (or NaN), and saturated at INT_MAX (24.8 days; every
 * wait of that length or more is as good as forever, and poll() takes an int). */
int ds_duration_ms(double seconds);

#endif
