/* What tach shows, as lines of text with a style each: the curses screen draws them, and
 * --once prints them. Layout follows the width and height it is given. */
#ifndef TACH_RENDER_H
#define TACH_RENDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "machine.h"
#include "sessions.h"

#define TACH_LINE_BYTES 1024 /* a line of up to 250 columns of UTF-8 sparkline and all */
#define TACH_MAX_LINES  256

enum tach_style {
        TACH_STYLE_PLAIN,
        TACH_STYLE_TITLE,    /* the bar at the top */
        TACH_STYLE_HEADS,    /* column heads */
        TACH_STYLE_SELECTED, /* the session Enter opens */
        TACH_STYLE_ENDED,    /* dimmed */
        TACH_STYLE_ERRORS,   /* a session or stream counting errors */
        TACH_STYLE_NOTE,     /* a segment skipped */
        TACH_STYLE_KEYS,     /* the key help at the bottom */
};

struct tach_line {
        enum tach_style style;
        char text[TACH_LINE_BYTES];
};

struct tach_screen {
        struct tach_line lines[TACH_MAX_LINES];
        unsigned count;
        unsigned width; /* every line is cut to it */
};

/* What the viewer has chosen. */
struct tach_view {
        bool bits;         /* u: bits per second instead of bytes */
        bool paused;       /* p */
        bool help;         /* h */
        bool detail;       /* Enter: the selected session's streams or disks */
        unsigned selected; /* index into the sorted sessions */
        unsigned top;      /* first session row shown */
        enum tach_sort sort;
        bool utf8; /* block characters for the sparkline */
        double delay_s;
};

/* "2.85 GB/s" or "22.8 Gb/s" (powers of 1000, as the tools print MB/s), at most 10 bytes. */
const char *tach_format_rate(char *buf, size_t len, double bytes_per_s, bool bits);
/* "5.70 GB": amounts are bytes in either mode. */
const char *tach_format_amount(char *buf, size_t len, uint64_t bytes);
/* A count: "6560", or "1.23 M" from 100000 on; at most 6 bytes. */
const char *tach_format_count(char *buf, size_t len, uint64_t count);
/* levels (0..TACH_SPARK_TOP) as n characters: blocks with utf8, else ASCII. */
void tach_format_spark(char *buf, size_t len, const uint8_t *levels, unsigned n, bool utf8);

/* The time of day as HH:MM:SS. */
void tach_wall_clock(char *buf, size_t len);

/* Lays out the whole screen for width x height (at least 20 x 5 is assumed sensible;
 * smaller still gives lines, cut short). now_ns is CLOCK_MONOTONIC, wall the time of day. */
void tach_render(struct tach_screen *scr, const struct tach_sessions *sessions,
                 const struct tach_machine *machine, const struct tach_view *view, unsigned width,
                 unsigned height, uint64_t now_ns, const char *wall);

#endif
