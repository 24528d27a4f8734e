/* The sessions tach watches: every /dev/shm/dragstrip.<pid> segment, read each look,
 * with the rates of its totals and of each stream or disk. Sessions whose segment went
 * away (or whose process is gone) stay, ended, for TACH_LINGER_S with their totals. */
#ifndef TACH_SESSIONS_H
#define TACH_SESSIONS_H

#include <stdbool.h>
#include <stdint.h>

#include <dragstrip/live.h>

#include "series.h"

#define TACH_MAX_SESSIONS 64
#define TACH_MAX_NOTES    16
#define TACH_LINGER_S     60

struct tach_slot {
        bool used;
        uint32_t generation;
        struct tach_series rate;
};

struct tach_session {
        char segment[64]; /* its file name in the directory */
        /* The segment stays mapped while the session is watched: once its tool unlinks it
         * at exit, the mapping still holds the final counts. */
        const void *mem;
        size_t len;
        uint64_t inode;
        struct ds_live_view view;
        bool ended; /* gone, or the tool said it was done */
        uint64_t ended_ns;
        uint64_t moved_ns; /* the last look that found the byte count grown */
        uint64_t idle_ns;  /* between looks that found it unchanged: left out of the average */
        struct tach_series rate;
        struct tach_slot slots[DS_LIVE_SLOTS]; /* by the slot's place in the segment */
        bool seen;                             /* found in the current look */
};

/* A segment that was found but could not be read, and why. */
struct tach_note {
        char segment[64];
        char why[128];
};

enum tach_sort { TACH_SORT_RATE, TACH_SORT_TOTAL, TACH_SORT_TOOL, TACH_SORT_PID, TACH_SORTS };

struct tach_sessions {
        const char *dir; /* "/dev/shm" unless a test points elsewhere */
        struct tach_session *list[TACH_MAX_SESSIONS];
        unsigned count;
        struct tach_note notes[TACH_MAX_NOTES];
        unsigned note_count;
};

void tach_sessions_init(struct tach_sessions *s, const char *dir);
void tach_sessions_free(struct tach_sessions *s);

/* Looks at every segment at time t_ns (monotonic): new sessions appear, rates move on,
 * ended ones are marked and, after TACH_LINGER_S, dropped. Unreadable segments become
 * notes; nothing in a segment can make this fail. */
void tach_sessions_look(struct tach_sessions *s, uint64_t t_ns);

/* Orders the list: rate now or total (highest first), tool name, or pid; ended
 * sessions after running ones. */
void tach_sessions_sort(struct tach_sessions *s, enum tach_sort by);
const char *tach_sort_name(enum tach_sort by);

/* The average of a session: its bytes over the time it has run (or ran), less the idle
 * stretches tach saw (a sink between runs), so that it holds still while nothing moves. */
double tach_session_average(const struct tach_session *session, uint64_t now_ns);
/* The highest look's rate, but never below the average: a look of a session that had
 * moved its bytes before tach watched (--once) has a true peak at least that high. */
double tach_session_peak(const struct tach_session *session, uint64_t now_ns);
/* How long it has run (or ran), in seconds; 0 before it began. */
double tach_session_seconds(const struct tach_session *session, uint64_t now_ns);

#endif
