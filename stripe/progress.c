/* The progress line: bytes done, percent, rate and ETA, redrawn four times a second on a
 * terminal and never written anywhere else (a log or a pipe gets only the result). */
#include <stdio.h>
#include <unistd.h>

#include <dragstrip/clock.h>

#include "stripe_cmd.h"

#define REDRAW_NS 250000000ull
#define BAR_WIDTH 30

void progress_begin(struct progress *p, const char *label, uint64_t total,
                    const struct ds_live_segment *live)
{
        p->on = isatty(STDERR_FILENO) == 1;
        p->label = label;
        p->total = total;
        p->live = live;
        p->base = 0;
        if (live) {
                struct ds_counters n;
                ds_live_read(live, &n);
                p->base = n.bytes;
        }
        p->start_ns = ds_now_ns();
        p->next_ns = p->start_ns + REDRAW_NS;
}

static void draw(const struct progress *p, uint64_t now)
{
        struct ds_counters n;
        double seconds = ds_seconds_between(p->start_ns, now);
        double rate;

        ds_live_read(p->live, &n);
        n.bytes -= p->base;
        rate = seconds > 0 ? (double)n.bytes / seconds : 0;
        if (p->total == 0) {
                fprintf(stderr, "\r%s %10.1f MB  %8.1f MB/s\033[K", p->label, (double)n.bytes / 1e6,
                        rate / 1e6);
                return;
        }
        double frac = n.bytes >= p->total ? 1.0 : (double)n.bytes / (double)p->total;
        int filled = (int)(frac * BAR_WIDTH);
        double eta =
            rate > 0 ? (double)(p->total - (n.bytes < p->total ? n.bytes : p->total)) / rate : 0;
        char bar[BAR_WIDTH + 1];

        for (int i = 0; i < BAR_WIDTH; i++)
                bar[i] = i < filled ? '#' : '.';
        bar[BAR_WIDTH] = '\0';
        fprintf(stderr, "\r%s [%s] %3d%%  %8.1f MB/s  ETA %d:%02d\033[K", p->label, bar,
                (int)(frac * 100), rate / 1e6, (int)eta / 60, (int)eta % 60);
}

void progress_tick(struct progress *p)
{
        uint64_t now;

        if (!p->on)
                return;
        now = ds_now_ns();
        if (now < p->next_ns)
                return;
        p->next_ns = now + REDRAW_NS;
        draw(p, now);
}

void progress_end(struct progress *p)
{
        if (!p->on)
                return;
        fputs("\r\033[K", stderr);
        fflush(stderr);
}
