/* Many files in one job: the sources of a get or a put (files, globs in their last part,
 * directories with -r) made into one list, then moved over several control connections at
 * once. A file that fails is named at the end and the others go on. */
#ifndef XFTP_TREE_H
#define XFTP_TREE_H

#include <stdint.h>

#include "ftp.h"
#include "transfer.h"

struct ds_error;

/* How to open one more control connection like the first. */
struct tree_login {
        const char *host;
        uint16_t port;
        const char *user, *pass;
        int timeout_ms;
        const struct ftp_tls_opts *tls;
};

/* Downloads sources (paths on ftp's server) to dest (NULL: here). One source that names
 * a file or, with -r, a directory gets dest as its name (or goes into dest when that is a
 * directory, for a file); several sources, or a glob in a source's last part ('*', '?',
 * '[...]'), go into the directory dest. Returns 0 when every file came; -EIO when some
 * did not (each named on stderr, t->failed counts them); or the negative errno that ended
 * the job, with err filled (one file alone: its own error). */
int tree_get(struct ftp *ftp, const struct tree_login *login, char *const *sources, int nsources,
             const char *dest, const struct job_opts *o, struct job_totals *t,
             struct ds_error *err);

/* Uploads local sources to dest (a path on ftp's server), as tree_get downloads: one
 * source to dest (into it when dest ends with '/'), several into the directory dest. */
int tree_put(struct ftp *ftp, const struct tree_login *login, char *const *sources, int nsources,
             const char *dest, const struct job_opts *o, struct job_totals *t,
             struct ds_error *err);

#endif
