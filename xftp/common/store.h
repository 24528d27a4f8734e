/* The store xftpd serves: one directory, or a striped set of directories (one per disk)
 * through stripe/'s engine, behind one interface.
 *
 * Every path given to the store is relative to its root, already made canonical by
 * xftp_store_path() (no leading '/', no "." or ".." component, no empty component); the
 * store then resolves it beneath the root with openat2(RESOLVE_BENEATH), so neither ".."
 * nor a symbolic link can lead out of it.
 *
 * Uploads are written under a hidden temporary name beside the final one (".xftpd-part."
 * and a key made of the user and the name) and renamed into place only by
 * xftp_store_commit(), their data on the disk first. A plain-directory store keeps an
 * interrupted upload there, with the length of its whole prefix, so that REST + STOR
 * continues it; a striped store discards it. Names starting with ".xftpd-" are the store's
 * own: they are never listed and every operation on them is refused. */
#ifndef XFTP_STORE_H
#define XFTP_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ds_error;
struct xftp_xfile;

#define XFTP_STORE_PATH_MAX   1024u     /* bytes of a canonical path, NUL included */
#define XFTP_STORE_OWN_PREFIX ".xftpd-" /* names the store keeps for itself */

struct xftp_store;
struct xftp_store_file;

struct xftp_store_stat {
        bool dir;
        uint64_t size;
        int64_t mtime; /* seconds since the epoch */
        unsigned mode; /* permission bits */
};

enum xftp_store_flags {
        /* A plain directory's files are read with O_DIRECT where the file system takes it,
         * not through the page cache and its read-ahead. Uploads are always written with
         * O_DIRECT where taken; a striped set always goes as stripe's engine does. */
        XFTP_STORE_DIRECT_READS = 1u << 0,
};

/* Opens the store on roots, "DIR" or "DIR,DIR,..." (two or more: a striped set, the
 * directories on different disks), flags from enum xftp_store_flags. what names where
 * roots came from ("--root"), for err. Returns 0 or a negative errno with err filled. */
int xftp_store_open(struct xftp_store **out, const char *roots, unsigned flags, const char *what,
                    struct ds_error *err);
void xftp_store_close(struct xftp_store *store);
/* 1 for a plain directory, the stripe width for a striped set. */
unsigned xftp_store_width(const struct xftp_store *store);

/* Joins arg (a client's path: absolute from the root, or relative to cwd) to cwd (itself
 * canonical) and folds "." and ".." lexically, ".." stopping at the root as it does at
 * "/". Bytes below 0x20 and 0x7f are refused (-EINVAL), as is a result longer than len
 * (-ENAMETOOLONG) or one naming the store's own files (-EPERM). out is "" for the root. */
int xftp_store_path(const char *cwd, const char *arg, char *out, size_t len);

/* Facts about path. Returns 0, -ENOENT, or another negative errno. */
int xftp_store_stat(struct xftp_store *store, const char *path, struct xftp_store_stat *st);

/* Calls fn for each entry of the directory path (not ".", "..", nor the store's own
 * files), in directory order. A non-zero return from fn stops the walk and is returned. */
typedef int (*xftp_store_list_fn)(const char *name, const struct xftp_store_stat *st, void *ctx);
int xftp_store_list(struct xftp_store *store, const char *path, xftp_store_list_fn fn, void *ctx);

/* Sets the modification time of the file path (not a directory) to sec and nsec since
 * the epoch, where xftp_store_stat reads it. Returns 0, -ENOENT, -EISDIR, or a negative
 * errno. */
int xftp_store_set_mtime(struct xftp_store *store, const char *path, int64_t sec, long nsec);

int xftp_store_mkdir(struct xftp_store *store, const char *path);
int xftp_store_rmdir(struct xftp_store *store, const char *path);
int xftp_store_unlink(struct xftp_store *store, const char *path);
/* Renames from to to; to must not be the root. Replaces a file, not a directory. */
int xftp_store_rename(struct xftp_store *store, const char *from, const char *to);

/* Opens a file to send. Returns 0 and *out, -EISDIR, -ENOENT, or a negative errno. */
int xftp_store_open_read(struct xftp_store *store, const char *path, struct xftp_store_file **out);

/* How an upload starts. */
struct xftp_store_upload {
        const char *user; /* keys the temporary name: users never share a partial */
        uint64_t offset;  /* REST: continue a partial of at least this many whole bytes,
                           * or keep this many bytes of the committed file */
        bool append;      /* APPE: start from the whole committed file */
};

/* Starts an upload to path under its temporary name; where the upload's first byte goes
 * is xftp_store_upload_start(). Returns 0 and *out; -ERANGE when offset is beyond what can
 * be continued; -EOPNOTSUPP for offset or append on a striped store; -EISDIR. */
int xftp_store_create(struct xftp_store *store, const char *path,
                      const struct xftp_store_upload *how, struct xftp_store_file **out);
/* The offset the upload's data starts at (offset, or the committed size for append). */
uint64_t xftp_store_upload_start(const struct xftp_store_file *file);
/* Records that bytes [0, prefix_end) of the upload are written, the resume point a later
 * REST may ask for (made durable first, at most every XFTP_RESUME_POINT_EVERY_NS). Cheap
 * enough to call for every block. Returns 0, or a negative errno when the upload's bytes
 * could not be made durable: it cannot be committed or kept, and should end. */
int xftp_store_upload_prefix(struct xftp_store_file *file, uint64_t prefix_end);
/* Writes the upload's data out to the disk and waits for it, once all of it is written,
 * ahead of its commit, where the store can do that apart (a plain directory; a striped set
 * syncs in its commit); the commit then does not write it out again. Returns 0 or a
 * negative errno; after a failure the upload cannot be committed (the commit returns the
 * same error). */
int xftp_store_write_out(struct xftp_store_file *file);
/* Writes the upload out and renames it to its final name: on a plain directory the data
 * is on the disk (perhaps in its cache) before the name is made, and both are durable
 * once the directory's sync is paid (xftp_store_owe). Returns 0 or a negative errno. */
int xftp_store_commit(struct xftp_store_file *file);

/* A directory whose sync is owed: uploads were renamed into it (their data written out,
 * not flushed from the disk's cache) and neither their names nor their data may be
 * durable yet. One fsync of the directory pays for every rename and every write before
 * it: it commits the file system's journal, which commits in order and flushes the disk's
 * cache first (ext4 with a journal, XFS; elsewhere each upload is fsynced). So a server
 * may answer first and pay once for a run of uploads into one directory, and a crash
 * before the payment leaves no name over missing data. */
struct xftp_store_owed {
        int dir_fd; /* -1: nothing owed */
        uint64_t dev, ino;
        uint64_t since_ns; /* ds_now_ns() at the first rename owed */
};
#define XFTP_STORE_OWED_NONE ((struct xftp_store_owed){.dir_fd = -1})

/* Adds a committed upload's name to owed, where the store makes names durable apart from
 * the commit (a plain directory; a striped set syncs in its commit). A directory other
 * than the one owed is paid for first. Returns 0, or that payment's negative errno. */
int xftp_store_owe(struct xftp_store_file *file, struct xftp_store_owed *owed);
/* Syncs the directory owed, if any, and empties owed. Returns 0 or a negative errno. */
int xftp_store_pay(struct xftp_store_owed *owed);
/* Ends the file. An upload not committed is removed, unless keep (a plain-directory store
 * then keeps it for REST, if its bytes could be made durable). Returns whether such a
 * partial upload was kept. */
bool xftp_store_file_close(struct xftp_store_file *file, bool keep);

/* The file for the transfer pipeline (xfer.h); owned by the store file. */
struct xftp_xfile *xftp_store_xfile(struct xftp_store_file *file);

/* How many whole bytes a partial upload of path by user holds: what REST may continue.
 * Returns 0, or -ENOENT when there is none. */
int xftp_store_partial_size(struct xftp_store *store, const char *user, const char *path,
                            uint64_t *size);

#endif
