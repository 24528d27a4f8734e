/* Stopping: SIGINT, SIGTERM and SIGHUP ask the whole process to stop, and every wait in lib/
 * notices within a fraction of a second, whichever thread the signal happened to hit.
 *
 * The rule for waits (poll, sleep, accept, connect): one that may last longer than
 * DS_STOP_SLICE_MS is taken in slices of at most that, and returns -EINTR as soon as a
 * stop is requested; a shorter one runs its course, so that a tool that was asked to stop
 * can still finish an exchange (blast's END and the sink's FINAL) and report. Loops that
 * wait in short steps (a session's retries, sink's link threads) check ds_stopping()
 * themselves. A second signal ends the process at once (status 128 + signal), removing its
 * live-counter segment first. */
#ifndef DRAGSTRIP_STOP_H
#define DRAGSTRIP_STOP_H

#include <poll.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define DS_STOP_SLICE_MS 100

struct ds_error;

/* Installs the SIGINT, SIGTERM and SIGHUP handlers (SIGHUP only where it is not ignored,
 * so nohup still works; and ignores SIGPIPE, so a vanished peer is EPIPE); a signal also sets *also
 * (may be NULL), for a tool that polls a flag of its own. Only main() calls it, through
 * ds_cli_catch_stop. Returns 0, or a negative errno with err saying which signal could
 * not be caught. */
int ds_stop_catch(atomic_bool *also, struct ds_error *err);

/* Asks for a stop as a signal would (signo 0: not a signal, e.g. a test). */
void ds_stop_request(int signo);

/* True once a stop was requested. One relaxed load: cheap enough for any loop. */
bool ds_stopping(void);

/* The signal that asked for the stop (SIGINT, SIGTERM or SIGHUP), or 0 when none did. */
int ds_stop_signal(void);

/* The exit status a shell expects of a process stopped by the signal that stopped this
 * one (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP), or 0 when no signal did. */
int ds_stop_status(void);

/* poll() on one descriptor for events, at most timeout_ms (negative: forever), resuming
 * after signals with the time left. Returns 1 when ready, 0 on timeout, -EINTR when a
 * stop ended a long wait (see above), or another negative errno. */
int ds_poll_one(int fd, short events, int timeout_ms);

/* As ds_poll_one, and also ended (-EINTR) by a flag of the caller's own, *also (may be
 * NULL), such as one transfer's abort; with a flag every wait is sliced, however short. */
int ds_poll_one_until(int fd, short events, int timeout_ms, atomic_bool *also);

#endif
