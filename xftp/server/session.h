/* One client's session of xftpd, run in a process of its own (main.c forks one per
 * connection): the control connection, login, and every command. */
#ifndef XFTPD_SESSION_H
#define XFTPD_SESSION_H

#include "cmd.h"
#include "log.h"
#include "users.h"

#include "dataconn.h"
#include "hash.h"
#include "modee.h"
#include "store.h"
#include "xconn.h"
#include "xverbs.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ds_live;
struct ds_shared_budget;
struct ds_pool;
struct watch;
struct xftp_tls;
struct xftp_verbs_listener;
struct xftpd_users;

/* What every session of one server shares, read-only. */
struct xftpd_config {
        struct xftp_store *store;
        const struct xftpd_users *users; /* NULL: anonymous only */
        bool anonymous;                  /* USER anonymous / ftp allowed */
        const char *anon_root;           /* anonymous's store (--anon-root); NULL: store */
        bool anon_write;                 /* anonymous may write (--anon-write) */
        bool direct_reads;               /* how a session opens a user's own store */
        bool fxp;                        /* password users may use other hosts (--fxp) */
        size_t block;                    /* bytes per buffer and MODE E block (-b) */
        int idle_ms;                     /* a control connection silent this long ends */
        int login_ms;                    /* a session must log in within this */
        int data_ms;                     /* deadline of each data connection's set-up */
        unsigned max_fails;              /* failed logins before the session ends */
        int fail_report_fd;              /* tells the listener of each failed login */
        int xferlog_fd;                  /* --xferlog, opened by the listener; -1: none */
        uint16_t pasv_lo, pasv_hi;       /* --pasv-ports; 0: any port */
        struct xftp_addr pasv_addr;      /* --pasv-address, IPv4; len 0: our own */
        /* Transfer buffers of all sessions together (--max-mem): each takes its share
         * before a transfer and gives it back after, in its own slot, which the listener
         * sets in the session's copy of this config once forked. */
        struct ds_shared_budget *budget;
        unsigned budget_slot;
        struct xftp_tls *tls; /* NULL: no FTPS (no --tls-cert) */
        bool tls_required;    /* --tls-required */
        bool no_rdma;         /* --no-rdma: never offer the verbs data channel */
};

/* Called once in the listener, before any session starts: SIGUSR1, which the listener
 * sends a session when a ban on its client's address begins, makes the session's next
 * PASS before a login a 421 that ends it. */
void xftpd_session_catch_ban(void);

/* Serves the client on ctl until it quits, falls silent, or stop is set; closes ctl.
 * Returns the process's exit status (0, or 1 after a failure of the server's own). */
int xftpd_session_run(const struct xftpd_config *config, int ctl);

/* The session's state, shared by session.c (commands) and the data commands. */
struct session {
        const struct xftpd_config *config;
        struct xftp_conn ctl; /* the control connection; every byte of it passes here */
        struct xftp_addr local, peer;
        char peer_text[64];

        char user[XFTPD_USER_NAME_MAX + 1];
        bool user_given, logged_in, anonymous;
        bool read_only;               /* anonymous (without --anon-write), or the user's ro */
        struct xftp_store *store;     /* the user's: the server's, or own_store */
        struct xftp_store *own_store; /* opened at login: the user's root, --anon-root */
        unsigned fails;
        const char *verb; /* the command being served, for the log */
        char cwd[XFTP_STORE_PATH_MAX];
        char rename_from[XFTP_STORE_PATH_MAX];
        bool rename_pending;

        char mode;        /* 'S' or 'E' */
        unsigned streams; /* OPTS RETR Parallelism=N, for MODE E */
        enum xftp_hash_algo hash_algo;
        uint64_t rest;                                 /* REST: the next transfer's offset */
        uint64_t range_start;                          /* RANG, for the next RETR or HASH */
        uint64_t range_end;                            /* exclusive; 0: no RANG */
        uint64_t allocate;                             /* ALLO: the next upload's announced size */
        int pasv_fd;                                   /* PASV/EPSV listener, -1 */
        struct xftp_conn kept[XFTP_MODEE_MAX_STREAMS]; /* MODE E connections a transfer left
                                                        * open (EOD without CLOSE): the next
                                                        * transfer without PASV or PORT uses them */
        unsigned kept_n;
        bool keep;            /* OPTS MODE E KEEP: the client wants them kept */
        bool kept_prot_p;     /* they are TLS */
        struct ds_pool *lend; /* buffers lent to each transfer they fit, taken from the
                               * memory budget once: a small file maps none of its own */
        bool lend_tried;
        struct watch *watch;     /* the watcher thread, made at the first transfer (watch.h) */
        struct xftp_addr active; /* PORT/EPRT address; len 0: none */
        /* The verbs data channel (verbs.c): RPSV's listener for the next upload, or where
         * RPRT sends the next download (len 0: nowhere). */
        struct xftp_verbs_listener *verbs_listener;
        struct xftp_addr verbs_to;
        int verbs_offer; /* 0: not looked up yet, 1: offered, -1: not */
        /* Its buffers for the next transfer, made after RPSV or RPRT and freed with the
         * set-up, and the bytes taken from the memory budget for them. */
        struct xftp_verbs_buffers verbs_buffers;
        uint64_t verbs_held;
        bool epsv_all;
        bool pbsz;   /* PBSZ 0 came after AUTH TLS */
        bool prot_p; /* PROT P: data connections are TLS */

        /* The control connection's input: filled by the session, and during a transfer by
         * its watcher (one at a time). */
        char in[2 * XFTPD_LINE_MAX];
        size_t in_used;
        bool discarding; /* skipping the rest of an over-long line */

        /* The directory of the uploads committed last, while its sync is owed: paid before
         * any reply that could show their names, and when the client falls quiet. */
        struct xftp_store_owed owed;
        int sync_failed; /* the first failed payment's negative errno: the session ends */

        atomic_bool xfer_stop; /* ends the transfer in flight: ABOR, hang-up, SIGTERM */
        atomic_bool aborted;   /* ABOR came during the transfer */
        atomic_bool ctl_gone;  /* the client closed the control connection, or stopped reading it */
        struct ds_live *live;
};

/* Sends len bytes on the control connection, the one way anything is written to it: by
 * deadline_ns (monotonic) or not at all, and no wait once stopping (SIGTERM). A client
 * that does not take them in time is gone (ctl_gone): -EPIPE, now and for every later
 * write, so a peer that never reads holds a session no longer than one deadline. */
int session_send(struct session *s, const void *data, size_t len, uint64_t deadline_ns);
/* The deadline of a reply begun now: the login deadline before the login, then --idle. */
uint64_t session_reply_deadline(const struct session *s);
/* Sends one reply line ("code text"), adding CRLF, by session_reply_deadline. Returns 0 or
 * a negative errno. */
int session_reply(struct session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Replies for a store error on the path the client named. */
void session_reply_errno(struct session *s, int neg_errno, const char *what);

/* Reads the control connection until a complete line is in s->in (returns its length,
 * the LF included), by deadline_ns (monotonic; then -ETIMEDOUT), or -EPIPE when the client
 * is gone, -EINTR on SIGTERM. An over-long line is returned cut at XFTPD_LINE_MAX + 1
 * bytes, so the parser refuses it, and its rest is skipped. */
long session_read_line(struct session *s, uint64_t deadline_ns);
/* Drops the first len bytes of s->in (the line just handled). */
void session_consume(struct session *s, size_t len);

/* Makes the uploads committed so far durable, names and data: the owed directory sync. */
void session_pay_owed(struct session *s);
/* Logs a failed directory sync (rc a negative errno) and keeps it for the next command's
 * reply, which ends the session (421): the 226 has gone already. */
void session_check_paid(struct session *s, int rc);

/* Data commands (channel.c, transfer.c, list.c, hash.c). */
void xfer_cmd_pasv(struct session *s, bool extended, const char *arg);
void xfer_cmd_port(struct session *s, bool extended, const char *arg);
void xfer_cmd_retr(struct session *s, const char *path);
void xfer_cmd_stor(struct session *s, const char *path, bool append);
void xfer_cmd_list(struct session *s, enum xftpd_verb verb, const char *arg);
void xfer_cmd_hash(struct session *s, const char *path);
/* Lists path on the control connection (STAT path, MLST path). */
void xfer_cmd_stat_path(struct session *s, enum xftpd_verb verb, const char *arg);
/* Forgets the data connection set up for the next transfer, and REST, RANG, ALLO. */
void xfer_reset(struct session *s);
/* Closes the MODE E connections kept from the last transfer. */
void xfer_drop_kept(struct session *s);
/* Frees the session's lent buffers and gives their bytes back to the budget. */
void xfer_free_lent(struct session *s);

#endif
