/* Pacing to a rate (-R): one schedule that every thread moving a run's bytes books them
 * against, so that its streams, files and directions together keep to the rate. */
#ifndef DRAGSTRIP_PACE_H
#define DRAGSTRIP_PACE_H

#include <stdatomic.h>
#include <stdint.h>

/* The schedule starts at the first booking. A pause after it (between files, a slow disk)
 * carries over at most this much unused time, so it never buys a burst above the rate; a
 * thread that wakes late loses nothing. */
#define DS_PACE_CREDIT_MS 100

struct ds_pace {
        double ns_per_byte;
        _Atomic uint64_t free_ns; /* when the schedule is next free (CLOCK_MONOTONIC) */
};

/* A schedule at bits_per_s (> 0; from ds_rate_parse). */
void ds_pace_init(struct ds_pace *pace, double bits_per_s);

/* Books bytes just moved and returns when they are due (CLOCK_MONOTONIC ns): the caller
 * waits until then before it moves more. Lock-free, for any number of threads. */
uint64_t ds_pace_book(struct ds_pace *pace, uint64_t bytes);

/* The bytes the rate allows in ms milliseconds: how much to move between waits so that a
 * peer never sees a silence much longer than that. */
uint64_t ds_pace_bytes_in(const struct ds_pace *pace, unsigned ms);

/* ds_pace_book, then ds_sleep_until its time. Returns 0, or -EINTR when a stop (stop.h)
 * ended the wait. */
int ds_pace_wait(struct ds_pace *pace, uint64_t bytes);

#endif
