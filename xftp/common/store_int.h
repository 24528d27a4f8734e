/* Internals shared by the store's backends. Not for callers of store.h. */
#ifndef DS_XFTP_STORE_INT_H
#define DS_XFTP_STORE_INT_H

#include "store.h"
#include "xfer.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ds_store_ops {
        void (*close)(struct ds_store *store);
        int (*stat)(struct ds_store *store, const char *path, struct ds_store_stat *st);
        int (*list)(struct ds_store *store, const char *path, ds_store_list_fn fn, void *ctx);
        int (*set_mtime)(struct ds_store *store, const char *path, int64_t sec, long nsec);
        int (*mkdir)(struct ds_store *store, const char *path);
        int (*rmdir)(struct ds_store *store, const char *path);
        int (*unlink)(struct ds_store *store, const char *path);
        int (*rename)(struct ds_store *store, const char *from, const char *to);
        int (*open_read)(struct ds_store *store, const char *path, struct ds_store_file **out);
        int (*create)(struct ds_store *store, const char *path, const struct ds_store_upload *how,
                      struct ds_store_file **out);
        void (*prefix)(struct ds_store_file *file, uint64_t prefix_end); /* may be NULL */
        int (*sync)(struct ds_store_file *file);                         /* may be NULL */
        int (*commit)(struct ds_store_file *file);
        void (*file_close)(struct ds_store_file *file, bool keep);
        int (*partial_size)(struct ds_store *store, const char *user, const char *path,
                            uint64_t *size); /* may be NULL */
};

struct ds_store {
        const struct ds_store_ops *ops;
        unsigned width;
};

/* What every backend's open file starts with. */
struct ds_store_file {
        struct ds_store *store;
        struct ds_xfile xfile;
        uint64_t start;
};

int store_dir_open(struct ds_store **out, const char *root, unsigned flags, struct ds_error *err);
int store_stripe_open(struct ds_store **out, const char *roots, struct ds_error *err);

/* openat2 beneath dirfd, with no magic links ("" opens dirfd's own directory). Returns
 * the descriptor or a negative errno. */
int store_openat2(int dirfd, const char *path, int flags, unsigned mode);
/* Copies the directory part of path into parent ("" for the root) and returns the last
 * component. */
const char *store_split(const char *path, char *parent, size_t len);
/* Whether name (one component) is one of the store's own. */
bool store_own_name(const char *name);

#endif
