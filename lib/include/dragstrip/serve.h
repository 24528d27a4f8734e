/* Serving peers that anyone can reach: the pieces every server of dragstrip shares (sink,
 * xftpd), so that each meets a hostile peer the same way.
 *
 *   - a memory budget: what peers may make the server commit, taken before it is
 *     allocated and given back after it is freed;
 *   - deadlines as absolute times, so that a peer trickling a byte at a time cannot
 *     stretch them (each wait is bounded by what is left, never restarted);
 *   - an accept loop's rule for failures: a shortage of descriptors, memory or threads
 *     is logged once, waited out for a moment and survived; only a broken listener ends
 *     the server;
 *   - peer threads that start detached with SIGINT and SIGTERM blocked.
 * Waits end on a stop (stop.h). */
#ifndef DRAGSTRIP_SERVE_H
#define DRAGSTRIP_SERVE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Bytes peers may make the server commit, all peers together. Thread-safe. */
struct ds_budget {
        uint64_t limit;
        _Atomic uint64_t used;
};

/* An eighth of this machine's memory: the default of a server's --max-mem. */
uint64_t ds_budget_default(void);
void ds_budget_init(struct ds_budget *budget, uint64_t limit);
/* Takes bytes if they fit within the limit (true), or takes nothing (false). */
bool ds_budget_take(struct ds_budget *budget, uint64_t bytes);
/* Gives back bytes taken earlier. */
void ds_budget_give(struct ds_budget *budget, uint64_t bytes);

/* A budget that processes share: a server that forks a process per peer (xftpd) makes it
 * before forking, in an anonymous shared mapping. Besides the total it keeps what each
 * process holds in a slot of its own, so that when a process dies without giving back its
 * share (kill -9, a crash) the parent that reaps it can: nothing leaks for good. A
 * process-shared robust lock guards it; a holder killed inside it leaves nothing wrong,
 * as the slots are the truth and the total is counted again from them. */
struct ds_shared_budget;

/* Maps a budget of limit bytes with slots slots, nothing held. Returns 0 or a negative
 * errno. */
int ds_shared_budget_create(struct ds_shared_budget **out, uint64_t limit, unsigned slots);
/* Unmaps it (in the process that made it, once no other uses it). NULL: nothing. */
void ds_shared_budget_destroy(struct ds_shared_budget *budget);
/* Takes bytes for slot if they fit within the limit (true), or takes nothing (false). */
bool ds_shared_budget_take(struct ds_shared_budget *budget, unsigned slot, uint64_t bytes);
/* Gives back bytes that slot took earlier (never more than it holds). */
void ds_shared_budget_give(struct ds_shared_budget *budget, unsigned slot, uint64_t bytes);
/* The process of slot is gone: gives back all it still held, and frees the slot. */
void ds_shared_budget_release(struct ds_shared_budget *budget, unsigned slot);
/* Bytes held now, all slots together. */
uint64_t ds_shared_budget_used(struct ds_shared_budget *budget);

/* The monotonic time ms from now (ms from ds_duration_ms, so it cannot wrap). */
uint64_t ds_deadline_in(int ms);
/* Milliseconds left until deadline_ns, 0 once it has passed (for poll and recv waits). */
int ds_deadline_left_ms(uint64_t deadline_ns);

/* An accept loop's memory of its troubles. Zero it before the loop. */
struct ds_accept_guard {
        bool short_of;      /* in a run of shortages */
        uint64_t logged_ns; /* when a shortage was last written to the log */
        uint64_t shortages;
};

/* After accept(), or starting the thread for an accepted peer, failed with rc (a negative
 * errno): true when the loop should go on. A shortage (EMFILE, ENFILE, ENOBUFS, ENOMEM,
 * EAGAIN) is written to log at the start of a run of them, and no more often than every
 * DS_ACCEPT_LOG_S (log may be NULL), then waited out for
 * DS_ACCEPT_BACKOFF_MS or until a stop; a peer gone before it was accepted, a timeout or
 * a signal is nothing. False: the listener itself is broken. */
#define DS_ACCEPT_BACKOFF_MS 100
#define DS_ACCEPT_LOG_S      60
bool ds_accept_survive(struct ds_accept_guard *guard, int rc, const char *what, FILE *log);
/* A peer was accepted and started: a run of shortages is over. */
void ds_accept_ok(struct ds_accept_guard *guard);

/* Starts body(arg) on a detached thread with SIGINT and SIGTERM blocked (the main thread
 * takes them; every thread sees the stop). Returns 0 or a negative errno. */
int ds_spawn_detached(void *(*body)(void *), void *arg);

#endif
