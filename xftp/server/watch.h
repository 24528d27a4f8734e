/* The watcher: while data moves, a thread of the session reads the control connection, so
 * that ABOR, a hang-up or SIGTERM cut the transfer; other commands wait in s->in for
 * their turn. One thread per session, made at its first transfer and idle between
 * transfers: a tree of small files paid a thread's start and end for each of them. */
#ifndef XFTPD_WATCH_H
#define XFTPD_WATCH_H

struct session;

/* Starts watching for a transfer (the thread made the first time): s->xfer_stop and
 * s->aborted cleared, an ABOR already in s->in taken. Returns 0 or a negative errno. */
int watch_begin(struct session *s);
/* A transfer's start without the watcher, for one that runs in the session's thread and
 * glances at the control connection itself: s->xfer_stop and s->aborted cleared, an ABOR
 * already in s->in taken. Returns 0. */
int watch_skip(struct session *s);
/* What the watcher does in one pass, without waiting, from the session's own thread (the
 * session is session): xftp_xfer_opts's on_slice for a transfer started by watch_skip. */
void watch_glance(void *session);
/* Stops watching: returns once the thread no longer reads the control connection. */
void watch_end(struct session *s);
/* Ends the thread at the session's end. */
void watch_free(struct session *s);

#endif
