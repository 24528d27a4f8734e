/* What xftp does with a logged-in control connection: one file's get or put, a listing,
 * a copy between two servers. Many files at once are tree.h's. */
#ifndef XFTP_TRANSFER_H
#define XFTP_TRANSFER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ftp.h"
#include "hash.h"
#include "listing.h"

struct ds_error;
struct ds_live_segment;
struct part_batch;
struct ds_pace;
struct ds_pool;

/* What one listing may cost: its bytes and its lines. */
#define LISTING_MAX         (64u << 20)
#define LISTING_ENTRIES_MAX 1000000u

#define TREE_JOBS_MAX 64 /* -j: control connections at most */

struct job_opts {
        unsigned streams; /* -P: data connections wanted (MODE E when > 1 and offered) */
        size_t block;     /* -b */
        unsigned jobs;    /* -j: files at once, each over a control connection of its own;
                           * 0: tree.c's default for the direction */
        bool resume, verify, recursive;
        bool update; /* skip files whose size and time already match */
        bool reuse;  /* one of many files: small ones go over a kept MODE E connection */
        bool no_sendfile;
        bool verbs; /* -x verbs: the data over RDMA verbs (RPRT, RPSV), never TCP */
        bool quiet; /* -q: no notices on stderr */
        int timeout_ms;
        atomic_bool *stop;
        struct ds_live_segment *live;
        struct ds_pool *pool; /* may be NULL: buffers lent to each transfer (xftp_xfer_opts) */
        struct ds_pace *pace; /* -R, may be NULL: one schedule for every file and stream */
};

/* What a job did, for the summary. */
struct job_totals {
        unsigned files;
        unsigned skipped;       /* --update: already the same */
        unsigned failed;        /* files (and directories) a tree copy could not copy */
        uint64_t bytes;         /* moved over the network this run */
        uint64_t resumed_bytes; /* already there before this run */
        double seconds;         /* moving data: from opening the data connections to the
                                 * server's reply and, for a download, the local file synced
                                 * and renamed (logins and listings not counted); many
                                 * files: from the first file's start to the last's end */
        unsigned streams_used;  /* the most data connections one file used */
        unsigned verified;      /* files whose hash matched */
        char last_hash[XFTP_HASH_HEX_MAX];
        enum xftp_hash_algo last_algo;
        uint64_t expected; /* bytes the job should move, when known (progress) */
        _Atomic uint64_t expected_live;
        _Atomic unsigned files_live, files_expected; /* done and to do, for the progress */
        pthread_mutex_t current_lock;                /* current: the file last begun */
        char current[128];
        char tls_version[16]; /* the control connection's TLS, "" in the clear */
        char tls_cipher[64];
        bool tls_kernel;           /* the data went through kernel TLS */
        const char *tls_sealed_by; /* xftp_tls_sealed_by of the last data connection; NULL: none */
        const char *tls_opened_by; /* and its xftp_tls_opened_by */
        char *listing;             /* ls: the server's listing (malloc'd, NUL-terminated) */
        size_t listing_len;        /* its bytes, without the NUL */
        bool listing_facts;        /* it is MLSD's (exact facts), not LIST's (for people) */
};

/* Downloads remote to local. known is what a listing said of remote (NULL: ask the
 * server); with batch, the file takes its name when the batch is flushed (part.h). With
 * o->update a local file of the same size and time is left as it is (t->skipped). */
int transfer_get_file(struct ftp *ftp, const char *remote, const char *local,
                      const struct listing_facts *known, struct part_batch *batch,
                      const struct job_opts *o, struct job_totals *t, struct ds_error *err);
/* Uploads local to remote and gives it local's time where the server can (MFMT). there
 * is what a listing said of remote (size UINT64_MAX: not there), NULL to ask when
 * o->update needs it. */
int transfer_put_file(struct ftp *ftp, const char *local, const char *remote,
                      const struct listing_facts *there, const struct job_opts *o,
                      struct job_totals *t, struct ds_error *err);
/* Reads the replies of commands sent ahead (MFMT) and says a refusal among them on
 * stderr unless o->quiet. */
void transfer_settle(struct ftp *ftp, const struct job_opts *o);
/* Reads a listing (verb LIST or MLSD of path) over a data connection, at most max bytes
 * and LISTING_ENTRIES_MAX lines: *text (malloc'd, NUL-terminated), *len and its *lines.
 * Returns 0 or a negative errno with err filled (-EFBIG: too long). */
int transfer_listing(struct ftp *ftp, const char *verb, const char *path, size_t max,
                     const struct job_opts *o, char **text, size_t *len, size_t *lines,
                     struct ds_error *err);
/* Reads the listing of remote into t (listing, listing_len, listing_facts; bytes and
 * seconds): with facts MLSD where the server offers it, else LIST. */
int job_ls(struct ftp *ftp, const char *remote, bool facts, const struct job_opts *o,
           struct job_totals *t, struct ds_error *err);
/* Copies src_path on src to dst_path on dst, the data going from server to server. */
int job_cp(struct ftp *src, const char *src_path, struct ftp *dst, const char *dst_path,
           const struct job_opts *o, struct job_totals *t, struct ds_error *err);

#endif
