/* Internals shared by the store's backends. Not for callers of store.h. */
#ifndef XFTP_STORE_INT_H
#define XFTP_STORE_INT_H

#include "store.h"
#include "xfer.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct xftp_store_ops {
        void (*close)(struct xftp_store *store);
        int (*stat)(struct xftp_store *store, const char *path, struct xftp_store_stat *st);
        int (*list)(struct xftp_store *store, const char *path, xftp_store_list_fn fn, void *ctx);
        int (*set_mtime)(struct xftp_store *store, const char *path, int64_t sec, long nsec);
        int (*mkdir)(struct xftp_store *store, const char *path);
        int (*rmdir)(struct xftp_store *store, const char *path);
        int (*unlink)(struct xftp_store *store, const char *path);
        int (*rename)(struct xftp_store *store, const char *from, const char *to);
        int (*open_read)(struct xftp_store *store, const char *path, struct xftp_store_file **out);
        int (*create)(struct xftp_store *store, const char *path,
                      const struct xftp_store_upload *how, struct xftp_store_file **out);
        int (*prefix)(struct xftp_store_file *file, uint64_t prefix_end); /* may be NULL */
        int (*write_out)(struct xftp_store_file *file);                   /* may be NULL */
        int (*commit)(struct xftp_store_file *file);
        /* The committed upload's directory, for the caller to sync and close; -1 when the
         * commit made the name durable itself. May be NULL (always -1). */
        int (*commit_dir)(struct xftp_store_file *file);
        bool (*file_close)(struct xftp_store_file *file, bool keep);
        int (*partial_size)(struct xftp_store *store, const char *user, const char *path,
                            uint64_t *size); /* may be NULL */
};

struct xftp_store {
        const struct xftp_store_ops *ops;
        unsigned width;
};

/* What every backend's open file starts with. */
struct xftp_store_file {
        struct xftp_store *store;
        struct xftp_xfile xfile;
        uint64_t start;
};

int store_dir_open(struct xftp_store **out, const char *root, unsigned flags, const char *what,
                   struct ds_error *err);
int store_stripe_open(struct xftp_store **out, const char *roots, const char *what,
                      struct ds_error *err);

/* openat2 beneath dirfd, with no magic links ("" opens dirfd's own directory). Returns
 * the descriptor or a negative errno. */
int store_openat2(int dirfd, const char *path, int flags, unsigned mode);
/* Copies the directory part of path into parent ("" for the root) and returns the last
 * component. */
const char *store_split(const char *path, char *parent, size_t len);
/* Whether name (one component) is one of the store's own. */
bool store_own_name(const char *name);

#endif
