/* What xftp does with a logged-in control connection: get, put, list, copy between two
 * servers, and the recursive forms. */
#ifndef XFTP_TRANSFER_H
#define XFTP_TRANSFER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ftp.h"
#include "hash.h"

struct ds_error;
struct ds_live_segment;

struct job_opts {
        unsigned streams; /* -P: data connections wanted (MODE E when > 1 and offered) */
        size_t block;     /* -b */
        bool resume, verify, recursive;
        bool no_sendfile;
        bool quiet; /* -q: no notices on stderr */
        int timeout_ms;
        atomic_bool *stop;
        struct ds_live_segment *live;
};

/* What a job did, for the summary. */
struct job_totals {
        unsigned files;
        uint64_t bytes;         /* moved over the network this run */
        uint64_t resumed_bytes; /* already there before this run */
        double seconds;         /* moving data: from opening the data connections to the
                                 * server's reply and, for a download, the local file synced
                                 * and renamed (logins and listings not counted) */
        unsigned streams_used;  /* the most data connections one file used */
        unsigned verified;      /* files whose hash matched */
        char last_hash[DS_HASH_HEX_MAX];
        enum ds_hash_algo last_algo;
        uint64_t expected; /* bytes the job should move, when known (progress) */
        _Atomic uint64_t expected_live;
        char tls_version[16]; /* the control connection's TLS, "" in the clear */
        char tls_cipher[64];
        bool tls_kernel; /* the data went through kernel TLS */
};

/* Downloads remote (a file, or with recursive a directory) to local. */
int job_get(struct ftp *ftp, const char *remote, const char *local, const struct job_opts *o,
            struct job_totals *t, struct ds_error *err);
/* Uploads local (a file, or with recursive a directory) to remote. */
int job_put(struct ftp *ftp, const char *local, const char *remote, const struct job_opts *o,
            struct job_totals *t, struct ds_error *err);
/* Prints the listing of remote (MLSD where offered, else LIST) on stdout. */
int job_ls(struct ftp *ftp, const char *remote, const struct job_opts *o, struct ds_error *err);
/* Copies src_path on src to dst_path on dst, the data going from server to server. */
int job_cp(struct ftp *src, const char *src_path, struct ftp *dst, const char *dst_path,
           const struct job_opts *o, struct job_totals *t, struct ds_error *err);

#endif
