/* Monotonic time and CPU accounting. */
#ifndef DRAGSTRIP_CLOCK_H
#define DRAGSTRIP_CLOCK_H

#include <stdint.h>

/* Nanoseconds on CLOCK_MONOTONIC; never goes backwards, unrelated to the wall clock. */
uint64_t ds_now_ns(void);

/* Seconds between two ds_now_ns() readings. */
double ds_seconds_between(uint64_t start_ns, uint64_t end_ns);

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

/* Sleeps until the monotonic clock reaches deadline_ns (returns at once if past). */
void ds_sleep_until(uint64_t deadline_ns);

#endif
