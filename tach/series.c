/* Rates from samples of a growing counter. */
#include "series.h"

#include <math.h>
#include <string.h>

#define NS_PER_S 1000000000ull

static double *bucket(struct tach_series *s, uint64_t sec)
{
        return &s->buckets[sec % TACH_HISTORY];
}

/* Makes sec the newest bucket, emptying the ones skipped over (and ones a minute old). */
static void advance_to(struct tach_series *s, uint64_t sec)
{
        if (sec <= s->newest_sec)
                return;
        uint64_t gap = sec - s->newest_sec;
        if (gap >= TACH_HISTORY) {
                memset(s->buckets, 0, sizeof(s->buckets));
        } else {
                for (uint64_t t = s->newest_sec + 1; t <= sec; t++)
                        *bucket(s, t) = 0;
        }
        s->newest_sec = sec;
}

/* Spreads amount evenly over [t0, t1), each second getting its share. */
static void spread(struct tach_series *s, uint64_t t0, uint64_t t1, double amount)
{
        advance_to(s, (t1 - 1) / NS_PER_S);
        double per_ns = amount / (double)(t1 - t0);
        uint64_t oldest =
            s->newest_sec >= TACH_HISTORY - 1 ? s->newest_sec - (TACH_HISTORY - 1) : 0;
        for (uint64_t sec = t0 / NS_PER_S; sec <= (t1 - 1) / NS_PER_S; sec++) {
                uint64_t from = sec * NS_PER_S > t0 ? sec * NS_PER_S : t0;
                uint64_t to = (sec + 1) * NS_PER_S < t1 ? (sec + 1) * NS_PER_S : t1;
                if (sec >= oldest)
                        *bucket(s, sec) += per_ns * (double)(to - from);
        }
}

void tach_series_sample(struct tach_series *s, uint64_t t_ns, uint64_t total)
{
        if (!s->primed) {
                s->primed = true;
                s->last_ns = t_ns;
                s->last_total = total;
                s->newest_sec = t_ns / NS_PER_S;
                return;
        }
        if (t_ns <= s->last_ns)
                return;
        uint64_t delta = total >= s->last_total ? total - s->last_total : total;
        double seconds = (double)(t_ns - s->last_ns) / 1e9;
        s->now = (double)delta / seconds;
        if (s->now > s->peak)
                s->peak = s->now;
        spread(s, s->last_ns, t_ns, (double)delta);
        s->last_ns = t_ns;
        s->last_total = total;
}

void tach_series_stop(struct tach_series *s)
{
        s->now = 0;
}

double tach_average(uint64_t total, uint64_t start_ns, uint64_t end_ns)
{
        if (end_ns <= start_ns)
                return 0;
        return (double)total / ((double)(end_ns - start_ns) / 1e9);
}

double tach_series_spark(const struct tach_series *s, uint64_t now_ns, unsigned width,
                         uint8_t *levels)
{
        if (width == 0)
                return 0;
        if (width > TACH_HISTORY)
                width = TACH_HISTORY;
        /* The minute of whole seconds ending before the current one, which is still
         * filling; seconds the series has not reached yet are empty. */
        uint64_t end = now_ns / NS_PER_S;
        double column[TACH_HISTORY];
        double top = 0;
        for (unsigned c = 0; c < width; c++) {
                unsigned from = c * TACH_HISTORY / width, to = (c + 1) * TACH_HISTORY / width;
                double sum = 0;
                for (unsigned i = from; i < to; i++) {
                        uint64_t sec = end - TACH_HISTORY + i;
                        if (end >= TACH_HISTORY - i && sec <= s->newest_sec &&
                            s->newest_sec - sec < TACH_HISTORY)
                                sum += s->buckets[sec % TACH_HISTORY];
                }
                column[c] = sum / (double)(to - from);
                if (column[c] > top)
                        top = column[c];
        }
        for (unsigned c = 0; c < width; c++)
                levels[c] =
                    top > 0 && column[c] > 0 ? (uint8_t)ceil(column[c] / top * TACH_SPARK_TOP) : 0;
        return top;
}
