/* The client's side of an FTP control connection: connect, log in, learn the server's
 * features, send commands and read their replies, and open data connections. */
#ifndef XFTP_FTP_H
#define XFTP_FTP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "dataconn.h"
#include "hash.h"
#include "listing.h"
#include "modee.h"
#include "xconn.h"
#include "xverbs.h"

struct ds_error;
struct xftp_verbs_listener;

#define FTP_LINE_MAX  4096u       /* a longer reply line is a broken server */
#define FTP_REPLY_MAX (64u << 10) /* all lines of one reply, FEAT included */
#define FTP_BRIEF_MS  2000        /* the wait for a goodbye, or for why a transfer failed */

/* What FEAT advertised (RFC 2389), and what the client found out by trying. */
struct ftp_features {
        bool epsv, size, rest_stream, mlst, utf8;
        bool mdtm;
        bool parallel; /* MODE E with OPTS RETR Parallelism=N */
        bool hash;
        bool hash_algo[XFTP_HASH_COUNT];
        enum xftp_hash_algo hash_selected;
        bool rang;
        bool psiz;       /* PSIZ: the size of a partial upload (xftpd) */
        bool mfmt;       /* MFMT: set a file's modification time */
        bool keep;       /* MODE E KEEP: the server keeps MODE E data connections open across
                          * transfers (GridFTP's cached channels) */
        bool rpsv, rprt; /* the verbs data channel, for uploads and downloads (xverbs.h) */
};

/* FTPS (RFC 4217): when the control connection turns TLS. */
enum ftp_tls_mode {
        FTP_TLS_AUTO,    /* whenever the server takes AUTH TLS */
        FTP_TLS_REQUIRE, /* --tls: a server without it is an error, nothing sent in clear */
        FTP_TLS_NEVER,   /* --no-tls */
};

struct ftp_tls_opts {
        enum ftp_tls_mode mode;
        const char *ca_file; /* --cacert; NULL: the system's CAs */
        bool insecure;       /* -k: no certificate check */
};

struct ftp {
        struct xftp_conn ctl;       /* the control connection; every byte of it passes here */
        struct xftp_tls *tls;       /* the TLS context once AUTH TLS succeeded, else NULL */
        bool data_kernel;           /* the last TLS data connection was the kernel's (kTLS) */
        const char *data_sealed_by; /* who sealed its records (xftp_tls_sealed_by) */
        const char *data_opened_by; /* who opened them (xftp_tls_opened_by) */
        bool tls_data_clear;        /* PROT C sent: data connections in the clear */
        bool broken;                /* a command or reply failed on the way: no more commands */
        unsigned owed;              /* replies of commands sent ahead, not read yet */
        uint32_t owed_note;         /* bit i: a refusal of the i-th of them is noted */
        char refused_ahead[256];    /* the first refusal among them, "" for none */
        char host[256];
        uint16_t port;
        struct xftp_addr local, peer; /* the control connection's ends */
        int timeout_ms;               /* the deadline of a whole reply; negative: none */
        atomic_bool *stop;
        struct ftp_features feat;
        int code;                  /* the last reply's code */
        char reply[FTP_REPLY_MAX]; /* its text, lines joined by '\n' */
        char in[FTP_LINE_MAX * 2];
        size_t in_len;
        char mode;                                     /* 'S' or 'E', as last set on the server */
        bool type_i;                                   /* TYPE I sent */
        unsigned streams;                              /* Parallelism last set */
        struct xftp_conn kept[XFTP_MODEE_MAX_STREAMS]; /* MODE E connections kept open after a
                                                        * transfer, for the next one */
        unsigned kept_n;
        bool keep;       /* OPTS MODE E KEEP taken: connections are kept when a transfer ends */
        bool stored;     /* an upload was answered 2xx: QUIT's 221 says it is durable */
        char ended[256]; /* a 421 the server said: it ends the session; "" for none */
        struct xftp_verbs_buffers verbs_buffers; /* -x verbs: lent to each transfer's links */
};

/* Connects to host:port, reads the greeting, logs in as user/pass, reads FEAT; meanwhile,
 * with verbs_streams above 0 (-x verbs), the buffers of that many verbs streams are made
 * in a thread. Returns 0, or a negative errno with err filled (-EACCES: login refused). */
int ftp_open(struct ftp *ftp, const char *host, uint16_t port, const char *user, const char *pass,
             int timeout_ms, atomic_bool *stop, const struct ftp_tls_opts *tls,
             unsigned verbs_streams, struct ds_error *err);

/* Under TLS, the handshakes of data connections just opened (after the 1xx reply to the
 * transfer command, as RFC 4217 orders it), resuming the control connection's session;
 * nothing without TLS. Returns 0 or a negative errno with err filled and conns closed. */
int ftp_secure_data(struct ftp *ftp, struct xftp_conn *conns, unsigned n, struct ds_error *err);
/* Under TLS, PROT C: the next data connections in the clear (a server-to-server copy).
 * Returns 0 or a negative errno. */
int ftp_data_clear(struct ftp *ftp, struct ds_error *err);
/* QUIT and close. After an upload (ftp->stored) the server's 221 says that what it stored
 * is durable (xftpd syncs before it), so it is waited for as long as any reply and anything
 * else fails; otherwise the goodbye is polite, 2 s at most, its answer ignored. Returns 0
 * or a negative errno with err filled. */
int ftp_close(struct ftp *ftp, struct ds_error *err);
/* Whether the server spoke or hung up with no command owed a reply: an idle session it
 * ended (421), so that no command can go on this connection. */
bool ftp_ended_unasked(const struct ftp *ftp);

/* Sends one command (formatted; CR and LF in arguments refused) and reads its reply.
 * Returns the reply code (100..599) or a negative errno with err filled. */
int ftp_cmd(struct ftp *ftp, struct ds_error *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Sends one command without reading its reply (a server-to-server copy sends to both
 * servers before reading either). Returns 0 or a negative errno. */
int ftp_send(struct ftp *ftp, struct ds_error *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Sends one command ahead: its reply is read, before any other, by the next ftp_reply
 * (RFC 959 lets a client send before the last reply; servers take commands in order).
 * For commands whose refusal changes nothing but a note (ALLO, MFMT): with note, a
 * refusal is kept in refused_ahead. Saves a round trip per file. Returns 0 or a negative
 * errno (-EBUSY: FTP_AHEAD_MAX replies are owed already). */
#define FTP_AHEAD_MAX 32u
int ftp_send_ahead(struct ftp *ftp, bool note, struct ds_error *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Reads the replies of the commands sent ahead. Returns 0 or a negative errno. */
int ftp_settle(struct ftp *ftp, struct ds_error *err);
/* Reads one more reply (after a 1xx preliminary one), those of commands sent ahead first.
 * Returns its code or a negative errno. */
int ftp_reply(struct ftp *ftp, struct ds_error *err);
/* ftp_reply waiting at most FTP_BRIEF_MS (less when the timeout is shorter): for a reply
 * that can only say why something already failed. */
int ftp_reply_brief(struct ftp *ftp, struct ds_error *err);

/* TYPE I and the MODE/Parallelism for streams (MODE E for more than one, or blocks; else
 * MODE S), sending only what changes; a change drops the kept connections. Returns 0 or a
 * negative errno with err filled. */
int ftp_prepare(struct ftp *ftp, unsigned streams, bool blocks, struct ds_error *err);

/* The data connections of the next transfer: those kept from the last one (*reused: no
 * PASV, no TLS handshake; the server uses them when no PASV or PORT came), else new ones
 * by ftp_passive. Returns 0 or a negative errno. */
int ftp_data_open(struct ftp *ftp, struct xftp_conn *conns, unsigned n,
                  const struct xftp_data_opts *opts, bool *reused, struct ds_error *err);
/* After a transfer: the connections kept for the next one when keep (a MODE E transfer that
 * ended well, the server keeping them too), else closed. */
void ftp_data_done(struct ftp *ftp, struct xftp_conn *conns, unsigned n, bool keep);
/* Closes the kept connections. */
void ftp_drop_kept(struct ftp *ftp);

/* Passive data connections: EPSV (or PASV where EPSV is refused), then n connections to
 * the control connection's host at the port the server gave. Returns 0 or a negative
 * errno; conns get the connections. */
int ftp_passive(struct ftp *ftp, struct xftp_conn *conns, unsigned n,
                const struct xftp_data_opts *opts, struct ds_error *err);
/* Asks for a passive address: EPSV or PASV; *addr gets the control connection's peer at
 * the port the server named, never a host the server named (that would make xftp, or a
 * server xftp points at it, connect to a third host). Returns 0 or a negative errno. */
int ftp_passive_addr(struct ftp *ftp, struct xftp_addr *addr, struct ds_error *err);
/* PORT (IPv4) or EPRT to addr. Returns 0 or a negative errno. */
int ftp_port(struct ftp *ftp, const struct xftp_addr *addr, struct ds_error *err);

/* -x verbs: where the next transfer's links meet (xverbs.h). */
struct ftp_verbs {
        struct xftp_verbs_listener *listener; /* a download: ours, named by RPRT */
        struct xftp_addr addr;                /* an upload: the server's, from RPSV */
};
/* Before the transfer command: a download listens on the control connection's own host
 * and names the port by RPRT; an upload asks RPSV for a port on the control connection's
 * peer (never a host the server names). Returns 0 or a negative errno with err filled. */
int ftp_verbs_ask(struct ftp *ftp, bool receive, struct ftp_verbs *v, struct ds_error *err);
/* Server to server: RPSV, and where its links are to go (its host, the port it names);
 * RPRT |af|host|port|, sending the next download's links to addr. Return 0 or a negative
 * errno with err filled. */
int ftp_verbs_passive(struct ftp *ftp, struct xftp_addr *addr, struct ds_error *err);
int ftp_verbs_port(struct ftp *ftp, const struct xftp_addr *addr, struct ds_error *err);
/* After the transfer command's 150: the n links, accepted from the server's host or
 * connected to it, within opts->timeout_ms. Returns 0 or a negative errno with err filled. */
int ftp_verbs_open(struct ftp *ftp, struct ftp_verbs *v, struct xftp_conn *conns, unsigned n,
                   const struct xftp_data_opts *opts, struct ds_error *err);
/* Closes what ftp_verbs_ask opened. */
void ftp_verbs_end(struct ftp_verbs *v);

/* verb ("SIZE", or xftpd's "PSIZ" for a partial upload) of path: 0 and *size, -ENOENT
 * (550), -ENOTSUP (refused), or another negative errno. */
int ftp_size(struct ftp *ftp, const char *verb, const char *path, uint64_t *size,
             struct ds_error *err);

/* The facts of MLST path: 0 and *facts, -ENOENT (550), -ENOTSUP (refused, or no facts
 * line naming a file or a directory), or another negative errno. */
int ftp_mlst(struct ftp *ftp, const char *path, struct listing_facts *facts, struct ds_error *err);

/* The size fact of MLST path (when SIZE is refused): 0 and *size, -ENOENT (550),
 * -ENOTSUP (refused, or no size fact), or another negative errno. */
int ftp_mlst_size(struct ftp *ftp, const char *path, uint64_t *size, struct ds_error *err);

/* When path was last modified, as MDTM (else MLST's modify fact) says it: out (room bytes)
 * gets "YYYYMMDDHHMMSS[.fraction]". 0, -ENOTSUP (the server names no time), or another
 * negative errno with err filled. */
int ftp_modified(struct ftp *ftp, const char *path, char *out, size_t room, struct ds_error *err);

/* MFMT: path's modification time set to when (whole seconds, UTC), sent ahead (a refusal
 * lands in refused_ahead). 0, -ENOTSUP (the server has no MFMT), or the send's negative
 * errno with err filled. */
int ftp_set_modified(struct ftp *ftp, const char *path, const struct timespec *when,
                     struct ds_error *err);

#endif
