/* The arithmetic of one counter watched over time: rate now, average, peak, and the last
 * minute in one-second buckets for the sparkline. Pure: time is handed in. */
#ifndef TACH_SERIES_H
#define TACH_SERIES_H

#include <stdbool.h>
#include <stdint.h>

#define TACH_HISTORY   60 /* seconds of the sparkline */
#define TACH_SPARK_TOP 8  /* the tallest sparkline level; 0 is an empty column */

struct tach_series {
        bool primed;                  /* one sample taken: the next gives a rate */
        uint64_t last_ns;             /* when the last sample was taken */
        uint64_t last_total;          /* the counter then */
        double now;                   /* per second over the last interval */
        double peak;                  /* the highest interval rate seen */
        uint64_t newest_sec;          /* the second the newest bucket covers */
        double buckets[TACH_HISTORY]; /* amount in each second, a ring indexed by second */
};

/* Takes a sample of a counter that only grows: total at time t_ns (monotonic). A counter
 * that went back (the tool started a new run) counts from zero again. A sample not later
 * than the previous one is ignored. */
void tach_series_sample(struct tach_series *s, uint64_t t_ns, uint64_t total);

/* The counter has stopped (its session ended): the rate now is 0 from here on. */
void tach_series_stop(struct tach_series *s);

/* Per second over [start_ns, end_ns]; 0 for an empty or backward interval. */
double tach_average(uint64_t total, uint64_t start_ns, uint64_t end_ns);

/* The last minute before the second of now_ns (whole seconds only), squeezed into width
 * columns (1..TACH_HISTORY), oldest first, each the mean per second of its seconds, as
 * levels 0..TACH_SPARK_TOP scaled to the tallest column. Returns that column's value. */
double tach_series_spark(const struct tach_series *s, uint64_t now_ns, unsigned width,
                         uint8_t *levels);

#endif
