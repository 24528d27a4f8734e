/* The thread that starts a run watches it: interval reports, the -w deadline, Ctrl-C,
 * and the end of the last worker. */
#ifndef TTCP_SUPERVISE_H
#define TTCP_SUPERVISE_H

#include <stdbool.h>
#include <pthread.h>
#include <stdint.h>

struct ds_report;

/* Binds the reporter whose interval lines the supervisor prints. Call once. */
int supervise_init(struct ds_report *report);

/* Marks the start, for the reporter too; duration_s > 0 sets the deadline of -w. On a stop
 * (deadline or signal) interrupt(ctx) is called once, from the supervising thread, to unblock the
 * workers. */
void supervise_begin(uint64_t start_ns, double duration_s, void (*interrupt)(void *ctx), void *ctx);

/* Starts a worker thread with SIGINT and SIGTERM blocked, so signals reach the
 * supervising thread. Returns 0 or a negative errno. */
int supervise_spawn(pthread_t *thread, void *(*body)(void *), void *arg);

/* Each worker calls this once, last thing, when it ends. */
void supervise_worker_done(void);

/* Waits, reporting as it goes, until every worker has ended (returns false) or, when
 * listen_fd >= 0, until a connection is waiting on it (returns true). */
bool supervise_until_done(int listen_fd);

#endif
