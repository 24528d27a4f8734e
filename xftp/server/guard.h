/* What keeps xftpd standing against its clients and its own start as root: the table of
 * sessions with its limits, and the change to an unprivileged user. Accepting under
 * pressure is lib/'s (serve.h), failed logins per address are throttle.h's. */
#ifndef XFTPD_GUARD_H
#define XFTPD_GUARD_H

#include <stdbool.h>
#include <sys/types.h>

#include "dataconn.h"

struct ds_error;
struct ds_shared_budget;

/* The running sessions: one child process each, each with a slot of its own in the memory
 * budget (0 to max - 1) that is given back when it is reaped, however it ended. */
struct guard_sessions {
        unsigned max;          /* sessions at once */
        unsigned max_per_host; /* sessions from one client address (IPv6: one /64) */
        unsigned count;
        pid_t *pids;
        struct xftp_addr *hosts;
        unsigned *slots;                 /* each session's budget slot */
        bool *slot_taken;                /* max of them */
        struct ds_shared_budget *budget; /* may be NULL */
};

int guard_sessions_init(struct guard_sessions *table, unsigned max, unsigned max_per_host,
                        struct ds_shared_budget *budget);
/* Why a new session from peer may not start ("too many sessions", ...), or NULL. Sessions
 * count as from one address as failed logins do (throttle_key_of). */
const char *guard_sessions_refuse(const struct guard_sessions *table, const struct xftp_addr *peer);
/* The budget slot the next session gets (there is one: guard_sessions_refuse said so). */
unsigned guard_sessions_free_slot(const struct guard_sessions *table);
void guard_sessions_add(struct guard_sessions *table, pid_t pid, const struct xftp_addr *peer,
                        unsigned slot);
/* Reaps the sessions that have ended, without waiting. */
void guard_sessions_reap(struct guard_sessions *table);
/* Sends SIGTERM to every session and waits for them, at most grace_ms; then SIGKILL. */
void guard_sessions_end(struct guard_sessions *table, int grace_ms);

/* Started as root: becomes run_as (a user name), or the owner of root_dir when run_as is
 * NULL, with that user's groups, and no new privileges after. The file own_fd (-1: none),
 * the transfer log, is given to that user first, so that it can be reopened after a
 * rotation (logrotate's `create` makes the new file alike). Refuses to stay root
 * unless allow_root. Not root: does nothing (run_as must then be NULL or the same user).
 * Returns 0 or a negative errno with err saying what to do. */
int guard_drop_privileges(const char *run_as, const char *root_dir, bool allow_root, int own_fd,
                          struct ds_error *err);

#endif
