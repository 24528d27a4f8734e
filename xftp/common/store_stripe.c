/* The striped store: the same tree of directories under every root (one root per disk),
 * and each file a striped file (stripe.h) whose members sit at the same path under each
 * root. Directories are resolved beneath every root with openat2 and handed to stripe's
 * engine as /proc/self/fd/N, so its own path walks stay confined too. Uploads go through
 * the engine's own temporary names and commit; an interrupted one is discarded. */
#include "store_int.h"

#include <dragstrip/error.h>
#include <dragstrip/stripe.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct stripe_store {
        struct xftp_store base;
        int root_fds[DS_STRIPE_MAX_WIDTH];
};

/* One directory of the tree, open beneath every root. */
struct stripe_dir {
        unsigned n;
        int fds[DS_STRIPE_MAX_WIDTH];
        char names[DS_STRIPE_MAX_WIDTH][32];
        const char *dirs[DS_STRIPE_MAX_WIDTH];
};

struct stripe_file {
        struct xftp_store_file base;
        struct ds_stripe *stripe;
        struct stripe_dir dir; /* the engine names members through these until close */
        uint64_t size;
        bool committed;
};

static void dir_close(struct stripe_dir *dir)
{
        for (unsigned i = 0; i < dir->n; i++)
                close(dir->fds[i]);
        dir->n = 0;
}

/* Opens path (a directory) beneath every root. Returns 0 or a negative errno. */
static int dir_open(struct xftp_store *base, const char *path, struct stripe_dir *dir)
{
        struct stripe_store *store = (struct stripe_store *)base;

        dir->n = 0;
        for (unsigned i = 0; i < base->width; i++) {
                int fd = store_openat2(store->root_fds[i], path, O_RDONLY | O_DIRECTORY, 0);
                if (fd < 0) {
                        dir_close(dir);
                        return fd;
                }
                dir->fds[dir->n++] = fd;
                snprintf(dir->names[i], sizeof(dir->names[i]), "/proc/self/fd/%d", fd);
                dir->dirs[i] = dir->names[i];
        }
        return 0;
}

static int parent_open(struct xftp_store *store, const char *path, struct stripe_dir *dir,
                       const char **leaf)
{
        char parent[XFTP_STORE_PATH_MAX];

        *leaf = store_split(path, parent, sizeof(parent));
        if (ds_stripe_name_check(*leaf, NULL) < 0)
                return -EINVAL;
        return dir_open(store, parent, dir);
}

/* Size and time of the striped file leaf in dir. */
static int file_stat(struct stripe_dir *dir, const char *leaf, struct xftp_store_stat *st)
{
        struct ds_stripe *stripe;
        struct ds_stripe_info info;
        struct stat sb;
        struct ds_stripe_options opts = {.flags = DS_STRIPE_NO_DIRECT};

        if (fstatat(dir->fds[0], leaf, &sb, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        if (!S_ISREG(sb.st_mode))
                return S_ISDIR(sb.st_mode) ? -EISDIR : -ENOENT;
        int rc = ds_stripe_open(&stripe, dir->dirs, dir->n, leaf, &opts, NULL);
        if (rc < 0)
                return rc;
        ds_stripe_stat(stripe, &info);
        ds_stripe_close(stripe, NULL);
        *st = (struct xftp_store_stat){
            .size = info.size, .mtime = sb.st_mtim.tv_sec, .mode = sb.st_mode & 07777};
        return 0;
}

static int dir_stat_one(int fd, struct xftp_store_stat *st)
{
        struct stat sb;

        if (fstat(fd, &sb) < 0)
                return -errno;
        *st = (struct xftp_store_stat){
            .dir = true, .mtime = sb.st_mtim.tv_sec, .mode = sb.st_mode & 07777};
        return 0;
}

static int sstat(struct xftp_store *store, const char *path, struct xftp_store_stat *st)
{
        struct stripe_dir dir;
        const char *leaf;

        if (dir_open(store, path, &dir) == 0) {
                int rc = dir_stat_one(dir.fds[0], st);
                dir_close(&dir);
                return rc;
        }
        int rc = parent_open(store, path, &dir, &leaf);
        if (rc < 0)
                return rc == -EINVAL ? -ENOENT : rc;
        rc = file_stat(&dir, leaf, st);
        dir_close(&dir);
        return rc;
}

/* A striped file's time is its member 0's (file_stat), so that is the one set. */
static int sset_mtime(struct xftp_store *store, const char *path, int64_t sec, long nsec)
{
        struct timespec times[2] = {{.tv_nsec = UTIME_OMIT},
                                    {.tv_sec = (time_t)sec, .tv_nsec = nsec}};
        struct xftp_store_stat st;
        struct stripe_dir dir;
        const char *leaf;

        if (dir_open(store, path, &dir) == 0) {
                dir_close(&dir);
                return -EISDIR;
        }
        int rc = parent_open(store, path, &dir, &leaf);
        if (rc < 0)
                return rc == -EINVAL ? -ENOENT : rc;
        rc = file_stat(&dir, leaf, &st);
        if (rc == 0 && utimensat(dir.fds[0], leaf, times, AT_SYMLINK_NOFOLLOW) < 0)
                rc = -errno;
        dir_close(&dir);
        return rc;
}

struct list_ctx {
        struct stripe_dir *dir;
        xftp_store_list_fn fn;
        void *ctx;
        bool leftovers; /* members of an upload cut short were seen */
};

static int list_file(const struct ds_stripe_entry *entry, void *arg)
{
        struct list_ctx *l = arg;
        const struct ds_stripe_info *info = entry->info;
        const char *name = entry->name;
        struct stat sb;

        l->leftovers |= entry->leftover;
        if (entry->state != DS_STRIPE_OK || store_own_name(name) ||
            fstatat(l->dir->fds[0], name, &sb, 0) < 0)
                return 0;
        struct xftp_store_stat st = {
            .size = info->size, .mtime = sb.st_mtim.tv_sec, .mode = sb.st_mode & 07777};
        return l->fn(name, &st, l->ctx);
}

static int slist(struct xftp_store *store, const char *path, xftp_store_list_fn fn, void *ctx)
{
        struct stripe_dir dir;
        int rc = dir_open(store, path, &dir);
        if (rc < 0)
                return rc;
        /* Subdirectories from the first root, then the striped files. */
        int fd = dup(dir.fds[0]);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        if (!d) {
                rc = -errno;
                if (fd >= 0)
                        close(fd);
        }
        struct dirent *entry;
        while (rc == 0 && d && (entry = readdir(d))) {
                struct xftp_store_stat st;
                struct stat sb;
                const char *name = entry->d_name;
                if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || store_own_name(name) ||
                    fstatat(dir.fds[0], name, &sb, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(sb.st_mode))
                        continue;
                st = (struct xftp_store_stat){
                    .dir = true, .mtime = sb.st_mtim.tv_sec, .mode = sb.st_mode & 07777};
                rc = fn(name, &st, ctx);
        }
        if (d)
                closedir(d);
        struct list_ctx l = {.dir = &dir, .fn = fn, .ctx = ctx};
        if (rc == 0)
                rc = ds_stripe_scan(dir.dirs, dir.n, 0, list_file, &l, NULL);
        /* A session killed mid-upload leaves members no one will commit. The listing has
         * already told them from running uploads (which hold their members locked); only
         * then does the directory get a sweep, which removes just the unlocked ones. */
        if (l.leftovers)
                ds_stripe_fsck(dir.dirs, dir.n, NULL, NULL, NULL);
        dir_close(&dir);
        return rc;
}

/* Runs op on leaf in every root's parent directory; mkdir undoes itself on failure. */
static int each_root(struct xftp_store *store, const char *path,
                     int (*op)(int fd, const char *leaf), int (*undo)(int fd, const char *leaf))
{
        struct stripe_dir dir;
        const char *leaf;
        int rc = parent_open(store, path, &dir, &leaf);
        if (rc < 0)
                return rc;
        unsigned done = 0;
        while (rc == 0 && done < dir.n) {
                rc = op(dir.fds[done], leaf);
                done += rc == 0;
        }
        while (rc < 0 && undo && done > 0)
                undo(dir.fds[--done], leaf);
        dir_close(&dir);
        return rc;
}

static int op_mkdir(int fd, const char *leaf)
{
        return mkdirat(fd, leaf, 0755) < 0 ? -errno : 0;
}

static int op_rmdir(int fd, const char *leaf)
{
        return unlinkat(fd, leaf, AT_REMOVEDIR) < 0 ? -errno : 0;
}

static int smkdir(struct xftp_store *store, const char *path)
{
        return each_root(store, path, op_mkdir, op_rmdir);
}

/* Removes what uploads cut short left in path (members no running upload holds): they
 * are the store's own and would keep the directory from being removed. */
static void sweep_dir(struct xftp_store *store, const char *path)
{
        struct stripe_dir dir;

        if (dir_open(store, path, &dir) == 0) {
                ds_stripe_fsck(dir.dirs, dir.n, NULL, NULL, NULL);
                dir_close(&dir);
        }
}

static int srmdir(struct xftp_store *store, const char *path)
{
        sweep_dir(store, path);
        return each_root(store, path, op_rmdir, NULL);
}

/* sweep_dir over the whole tree, confined beneath the roots like every other walk, at
 * most SWEEP_DEPTH directories deep. */
#define SWEEP_DEPTH 64
static void sweep_tree(struct xftp_store *store, const char *path, unsigned depth)
{
        struct stripe_store *stripe_store = (struct stripe_store *)store;
        char child[XFTP_STORE_PATH_MAX];
        struct dirent *entry;
        struct stat sb;

        sweep_dir(store, path);
        int fd = store_openat2(stripe_store->root_fds[0], path, O_RDONLY | O_DIRECTORY, 0);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        if (!d) {
                if (fd >= 0)
                        close(fd);
                return;
        }
        while (depth < SWEEP_DEPTH && (entry = readdir(d))) {
                const char *name = entry->d_name;
                if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || store_own_name(name) ||
                    fstatat(fd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(sb.st_mode))
                        continue;
                int len = snprintf(child, sizeof(child), "%s%s%s", path, *path ? "/" : "", name);
                if (len > 0 && (size_t)len < sizeof(child))
                        sweep_tree(store, child, depth + 1);
        }
        closedir(d);
}

static int sunlink(struct xftp_store *store, const char *path)
{
        struct stripe_dir dir;
        const char *leaf;
        int rc = parent_open(store, path, &dir, &leaf);
        if (rc < 0)
                return rc;
        struct stat sb;
        if (fstatat(dir.fds[0], leaf, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(sb.st_mode))
                rc = -EISDIR;
        else
                rc = ds_stripe_unlink(dir.dirs, dir.n, leaf, NULL);
        dir_close(&dir);
        return rc < 0 ? rc : 0;
}

/* The commit locks of both directories (one when they are the same), exclusive, taken in
 * inode order so that two renames the opposite way round cannot each hold one. */
static int lock_pair(const struct stripe_dir *src, const struct stripe_dir *dst, int locks[2],
                     bool *same_dir)
{
        const struct stripe_dir *order[2] = {src, dst};
        struct stat a, b;

        locks[0] = locks[1] = -1;
        if (fstat(src->fds[0], &a) < 0 || fstat(dst->fds[0], &b) < 0)
                return -errno;
        bool same = a.st_dev == b.st_dev && a.st_ino == b.st_ino;
        *same_dir = same;
        if (!same && (a.st_dev > b.st_dev || (a.st_dev == b.st_dev && a.st_ino > b.st_ino))) {
                order[0] = dst;
                order[1] = src;
        }
        for (unsigned i = 0; i < (same ? 1u : 2u); i++)
                if ((locks[i] = ds_stripe_lock(order[i]->dirs[0], true, NULL)) < 0)
                        return locks[i];
        return 0;
}

/* A directory is renamed under every root, one by one; a failure part-way is undone. */
static int rename_dir(struct stripe_dir *src, const char *from_leaf, struct stripe_dir *dst,
                      const char *to_leaf)
{
        unsigned done = 0;
        int rc = 0;

        while (rc == 0 && done < src->n) {
                rc = renameat(src->fds[done], from_leaf, dst->fds[done], to_leaf) < 0 ? -errno : 0;
                done += rc == 0;
        }
        while (rc < 0 && done > 0) {
                done--;
                renameat(dst->fds[done], to_leaf, src->fds[done], from_leaf);
        }
        return rc;
}

static int srename(struct xftp_store *store, const char *from, const char *to)
{
        struct stripe_dir src, dst;
        const char *from_leaf, *to_leaf;
        struct stat sb;
        int locks[2] = {-1, -1};
        bool same_dir = false;
        int rc = parent_open(store, from, &src, &from_leaf);
        if (rc < 0)
                return rc;
        rc = parent_open(store, to, &dst, &to_leaf);
        if (rc < 0) {
                dir_close(&src);
                return rc;
        }
        /* Readers and commits of either name see the rename whole or not at all. */
        rc = lock_pair(&src, &dst, locks, &same_dir);
        bool exists = rc == 0 && fstatat(src.fds[0], from_leaf, &sb, AT_SYMLINK_NOFOLLOW) == 0;
        bool is_dir = exists && S_ISDIR(sb.st_mode);
        if (rc == 0 && same_dir && strcmp(from_leaf, to_leaf) == 0)
                rc = exists ? 0 : -ENOENT; /* onto itself: nothing to do, as rename(2) */
        else if (rc == 0 && is_dir)
                rc = rename_dir(&src, from_leaf, &dst, to_leaf);
        else if (rc == 0 && fstatat(dst.fds[0], to_leaf, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
                 S_ISDIR(sb.st_mode))
                rc = -EEXIST;
        /* A file through the engine: with a put's commit point (member 0), so a kill at any
         * instant leaves the old or the new name whole, after it has finished a commit of
         * either name that a kill cut short. */
        else if (rc == 0)
                rc = ds_stripe_rename_held(src.dirs, from_leaf, dst.dirs, to_leaf, src.n, true,
                                           NULL);
        ds_stripe_unlock(locks[0]);
        ds_stripe_unlock(locks[1]);
        dir_close(&src);
        dir_close(&dst);
        return rc;
}

static struct ds_stripe *stripe_of(struct xftp_xfile *xfile)
{
        return ((struct stripe_file *)xfile->impl)->stripe;
}

static ssize_t sx_read_at(struct xftp_xfile *xfile, void *buf, size_t len, uint64_t offset)
{
        size_t done = 0;
        int rc = ds_stripe_pread(stripe_of(xfile), buf, len, offset, &done, NULL);
        return rc < 0 ? rc : (ssize_t)done;
}

static int sx_write_at(struct xftp_xfile *xfile, const void *buf, size_t len, uint64_t offset)
{
        struct stripe_file *file = xfile->impl;
        int rc = ds_stripe_pwrite(file->stripe, buf, len, offset, NULL);
        if (rc == 0 && offset + len > file->size)
                file->size = offset + len;
        return rc;
}

static int sx_size(struct xftp_xfile *xfile, uint64_t *size)
{
        *size = ((struct stripe_file *)xfile->impl)->size;
        return 0;
}

static int sx_sync(struct xftp_xfile *xfile)
{
        return ds_stripe_fsync(stripe_of(xfile), NULL);
}

/* The engine's own submits: the pipeline keeps two in flight, so each member's worker has
 * the next piece queued while the one before is checksummed and handed on. The size grows
 * at the start, as the engine's does; a write that then fails fails the upload, which a
 * striped store never keeps. */
static int sx_start_io(struct xftp_xfile *xfile, bool write, void *buf, size_t len, uint64_t offset)
{
        struct stripe_file *file = xfile->impl;
        int ticket = write ? ds_stripe_submit_write(file->stripe, buf, len, offset, NULL)
                           : ds_stripe_submit_read(file->stripe, buf, len, offset, NULL);
        if (ticket >= 0 && write && offset + len > file->size)
                file->size = offset + len;
        return ticket;
}

static ssize_t sx_finish_io(struct xftp_xfile *xfile, int ticket)
{
        size_t done = 0;
        int rc = ds_stripe_wait(stripe_of(xfile), ticket, &done, NULL);
        return rc < 0 ? rc : (ssize_t)done;
}

static const struct xftp_xfile_ops stripe_xfile_ops = {.read_at = sx_read_at,
                                                       .write_at = sx_write_at,
                                                       .size = sx_size,
                                                       .sync = sx_sync,
                                                       .start_io = sx_start_io,
                                                       .finish_io = sx_finish_io};

/* Opens (create false) or creates the striped file path, its directories kept open
 * with it. */
static int file_open(struct xftp_store *store, const char *path, bool create,
                     struct xftp_store_file **out)
{
        struct stripe_dir dir;
        struct stat sb;
        const char *leaf;
        int rc = parent_open(store, path, &dir, &leaf);
        if (rc < 0)
                return rc == -EINVAL && !create ? -ENOENT : rc;
        if (fstatat(dir.fds[0], leaf, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(sb.st_mode))
                rc = -EISDIR;
        struct stripe_file *file = rc == 0 ? calloc(1, sizeof(*file)) : NULL;
        if (rc == 0 && !file)
                rc = -ENOMEM;
        if (rc == 0) {
                struct ds_stripe_options opts = {.flags = DS_STRIPE_WRITE | DS_STRIPE_REPLACE};
                rc = create ? ds_stripe_create(&file->stripe, dir.dirs, dir.n, leaf, &opts, NULL)
                            : ds_stripe_open(&file->stripe, dir.dirs, dir.n, leaf, NULL, NULL);
        }
        if (rc < 0) {
                free(file);
                dir_close(&dir);
                return rc;
        }
        /* The engine names members by path through these directories until close. */
        file->dir = dir;
        for (unsigned i = 0; i < dir.n; i++)
                file->dir.dirs[i] = file->dir.names[i];
        struct ds_stripe_info info;
        ds_stripe_stat(file->stripe, &info);
        file->size = info.size;
        file->base.store = store;
        file->base.xfile =
            (struct xftp_xfile){.ops = &stripe_xfile_ops, .impl = file, .fd = -1, .direct_fd = -1};
        *out = &file->base;
        return 0;
}

static int sopen_read(struct xftp_store *store, const char *path, struct xftp_store_file **out)
{
        return file_open(store, path, false, out);
}

static int screate(struct xftp_store *store, const char *path, const struct xftp_store_upload *how,
                   struct xftp_store_file **out)
{
        if (how->offset || how->append)
                return -EOPNOTSUPP;
        return file_open(store, path, true, out);
}

static int scommit(struct xftp_store_file *base)
{
        struct stripe_file *file = (struct stripe_file *)base;
        int rc = ds_stripe_commit(file->stripe, NULL);

        file->committed = rc == 0;
        return rc;
}

static bool sfile_close(struct xftp_store_file *base, bool keep)
{
        struct stripe_file *file = (struct stripe_file *)base;

        (void)keep; /* an uncommitted striped upload is always discarded */
        ds_stripe_close(file->stripe, NULL);
        dir_close(&file->dir);
        free(file);
        return false;
}

static void sclose(struct xftp_store *base)
{
        struct stripe_store *store = (struct stripe_store *)base;

        for (unsigned i = 0; i < base->width; i++)
                close(store->root_fds[i]);
        free(store);
}

static const struct xftp_store_ops stripe_ops = {
    .close = sclose,
    .stat = sstat,
    .list = slist,
    .set_mtime = sset_mtime,
    .mkdir = smkdir,
    .rmdir = srmdir,
    .unlink = sunlink,
    .rename = srename,
    .open_read = sopen_read,
    .create = screate,
    .commit = scommit,
    .file_close = sfile_close,
};

int store_stripe_open(struct xftp_store **out, const char *roots, const char *what,
                      struct ds_error *err)
{
        struct ds_error why; /* the stripe library's, which knows not where roots came from */
        char **dirs;
        unsigned n;
        int rc = ds_stripe_dirs_parse(roots, &dirs, &n, &why);
        if (rc == 0 && (rc = ds_stripe_check_dirs((const char *const *)dirs, n, &why)) < 0)
                free(dirs);
        if (rc < 0) {
                ds_fail(err, 0, "%s: %s", what, why.text);
                return rc;
        }
        struct stripe_store *store = calloc(1, sizeof(*store));
        if (!store) {
                free(dirs);
                return ds_fail(err, -ENOMEM, "store");
        }
        store->base.ops = &stripe_ops;
        for (unsigned i = 0; i < n && rc == 0; i++) {
                store->root_fds[i] = open(dirs[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (store->root_fds[i] < 0)
                        rc = ds_fail(err, -errno, "%s %s", what, dirs[i]);
                else
                        store->base.width++;
        }
        free(dirs);
        if (rc < 0) {
                sclose(&store->base);
                return rc;
        }
        /* Uploads cut short by a crash or a kill of the server go at start; later ones when
         * their directory is next listed, or removed. */
        sweep_tree(&store->base, "", 0);
        *out = &store->base;
        return 0;
}
