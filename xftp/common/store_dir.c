/* The plain-directory store: every path opened beneath one root descriptor. An upload
 * lives in ".xftpd-part.KEY" beside its final name, locked while it is written, with
 * ".xftpd-part.KEY.len" holding the length of its whole prefix (the resume point) as
 * decimal text once an upload has run a second; KEY is a hash of the name, a dot
 * and a hash of the user, so the partials of one name are found by prefix. */
#include "release.h"
#include "store_int.h"

#include <dragstrip/clock.h>
#include <dragstrip/error.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <linux/magic.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#define PART_PREFIX  XFTP_STORE_OWN_PREFIX "part."
#define MARK_LEN     21   /* 20 digits and a newline */
#define LOCK_WAIT_MS 5000 /* how long an upload waits for the one before it to end */

struct dir_store {
        struct xftp_store base;
        int root_fd;
        unsigned read_flags; /* for xftp_xfile_plain: XFTP_XFILE_DIRECT or 0 */
        dev_t judged_dev;    /* the device commits_in_order judged last, */
        int judged;          /* and its answer: 1 yes, 0 no, -1 none judged yet */
};

struct dir_file {
        struct xftp_store_file base;
        int fd;
        int parent_fd;   /* uploads: the directory the file lands in */
        int mark_fd;     /* uploads: the resume point's file, made when first written */
        int replaced_fd; /* committed uploads: the file the commit replaced (release.h) */
        uint64_t marked;
        uint64_t marked_ns; /* when a point was last tried, its bytes synced */
        uint64_t unmarked;  /* the whole prefix not written yet, written if the upload is kept
                             * for REST */
        bool upload;
        bool fresh; /* the upload made or emptied its temporary file (not continuing one) */
        bool committed;
        int written_out; /* xftp_store_write_out's result: 1 done, a negative errno (its or
                          * a resume point's sync), 0 not yet */
        char leaf[256];
        char part[64];
        char mark[64];
};

static int root_of(struct xftp_store *store)
{
        return ((struct dir_store *)store)->root_fd;
}

/* Uploads go by O_DIRECT: 1 GiB put and synced 1.5 times as fast as buffered writes and
 * the fsync before commit. Reads go through the page cache unless asked: in two runs its
 * read-ahead served a get 1.36 times as fast as O_DIRECT, then 0.93 times (noise), and a
 * hot file is read from memory (bench/xftpd-direct.sh). */
static unsigned xfile_flags(struct xftp_store *store, bool upload)
{
        return upload ? XFTP_XFILE_DIRECT : ((struct dir_store *)store)->read_flags;
}

static int close_keep(int fd, int rc)
{
        if (fd >= 0)
                close(fd);
        return rc;
}

/* Opens the directory holding path (for the *at calls) and points *leaf at its last
 * component. Returns the descriptor or a negative errno. */
static int open_parent(struct xftp_store *store, const char *path, const char **leaf)
{
        char parent[XFTP_STORE_PATH_MAX];

        *leaf = store_split(path, parent, sizeof(parent));
        if (strlen(*leaf) > 255)
                return -ENAMETOOLONG;
        return store_openat2(root_of(store), parent, O_RDONLY | O_DIRECTORY, 0);
}

static void fill_stat(const struct stat *sb, struct xftp_store_stat *st)
{
        st->dir = S_ISDIR(sb->st_mode);
        st->size = S_ISREG(sb->st_mode) ? (uint64_t)sb->st_size : 0;
        st->mtime = sb->st_mtim.tv_sec;
        st->mode = sb->st_mode & 07777;
}

static int dir_stat(struct xftp_store *store, const char *path, struct xftp_store_stat *st)
{
        struct stat sb;
        int fd = store_openat2(root_of(store), path, O_PATH, 0);

        if (fd < 0)
                return fd;
        int rc = fstat(fd, &sb) < 0 ? -errno : 0;
        close(fd);
        if (rc == 0)
                fill_stat(&sb, st);
        return rc;
}

/* One entry; a symbolic link counts as what it names, and not at all when that lies
 * outside the root or is gone. Returns 0 and st, or -ENOENT to skip the entry. */
static int entry_stat(int dir_fd, const char *name, struct xftp_store_stat *st)
{
        struct stat sb;

        if (fstatat(dir_fd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
                return -ENOENT;
        if (S_ISLNK(sb.st_mode)) {
                int fd = store_openat2(dir_fd, name, O_PATH, 0);
                if (fd < 0)
                        return -ENOENT;
                int rc = fstat(fd, &sb);
                close(fd);
                if (rc < 0)
                        return -ENOENT;
        }
        if (!S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode))
                return -ENOENT;
        fill_stat(&sb, st);
        return 0;
}

static int dir_list(struct xftp_store *store, const char *path, xftp_store_list_fn fn, void *ctx)
{
        int fd = store_openat2(root_of(store), path, O_RDONLY | O_DIRECTORY, 0);
        if (fd < 0)
                return fd;
        DIR *dir = fdopendir(fd);
        if (!dir)
                return close_keep(fd, -errno);

        int rc = 0;
        struct dirent *entry;
        while (rc == 0 && (entry = readdir(dir))) {
                struct xftp_store_stat st;
                const char *name = entry->d_name;
                if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || store_own_name(name))
                        continue;
                if (entry_stat(fd, name, &st) == 0)
                        rc = fn(name, &st, ctx);
        }
        closedir(dir);
        return rc;
}

/* The file as opened beneath the root (a link inside it counts as what it names), so the
 * time lands on what MDTM and listings stat. */
static int dir_set_mtime(struct xftp_store *store, const char *path, int64_t sec, long nsec)
{
        struct timespec times[2] = {{.tv_nsec = UTIME_OMIT},
                                    {.tv_sec = (time_t)sec, .tv_nsec = nsec}};
        struct stat sb;
        int fd = store_openat2(root_of(store), path, O_PATH, 0);

        if (fd < 0)
                return fd;
        int rc = fstat(fd, &sb) < 0 ? -errno : 0;
        if (rc == 0 && !S_ISREG(sb.st_mode))
                rc = S_ISDIR(sb.st_mode) ? -EISDIR : -EPERM;
        if (rc == 0 && utimensat(fd, "", times, AT_EMPTY_PATH) < 0)
                rc = -errno;
        return close_keep(fd, rc);
}

static int dir_mkdir(struct xftp_store *store, const char *path)
{
        const char *leaf;
        int parent = open_parent(store, path, &leaf);

        if (parent < 0)
                return parent;
        return close_keep(parent, mkdirat(parent, leaf, 0755) < 0 ? -errno : 0);
}

static uint64_t fnv1a(uint64_t hash, const char *text)
{
        for (const unsigned char *p = (const unsigned char *)text;; p++) {
                hash = (hash ^ *p) * 0x100000001b3u;
                if (!*p)
                        return hash;
        }
}

/* The partials of leaf all start with this (PART_PREFIX and the name's hash, a dot). */
static void part_stem(const char *leaf, char *stem, size_t len)
{
        snprintf(stem, len, PART_PREFIX "%016" PRIx64 ".", fnv1a(0xcbf29ce484222325u, leaf));
}

/* The key of a partial: the name's hash and the user's, so that two users uploading the
 * same name never continue each other's bytes, and DELE finds every user's partial. */
static void part_names(const char *user, const char *leaf, char *part, char *mark, size_t len)
{
        uint64_t leaf_hash = fnv1a(0xcbf29ce484222325u, leaf);
        uint64_t user_hash = fnv1a(0xcbf29ce484222325u, user ? user : "");

        snprintf(part, len, PART_PREFIX "%016" PRIx64 ".%016" PRIx64, leaf_hash, user_hash);
        snprintf(mark, len, PART_PREFIX "%016" PRIx64 ".%016" PRIx64 ".len", leaf_hash, user_hash);
}

/* Whether fd is still the regular file named part in parent: an upload that held its
 * lock before may have committed it (renamed it to its final name) meanwhile. */
static bool still_named(int parent, const char *part, int fd)
{
        struct stat named, held;

        return fstatat(parent, part, &named, AT_SYMLINK_NOFOLLOW) == 0 && fstat(fd, &held) == 0 &&
               S_ISREG(held.st_mode) && named.st_ino == held.st_ino && named.st_dev == held.st_dev;
}

/* Whether fd may be written as the store's own file: a regular file of one link. A FIFO
 * or directory a local user put at its name is none, and a second link to someone's file
 * is not the store's to cut. Returns 0 or -EPERM. */
static int own_file(int fd)
{
        struct stat sb;

        return fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_nlink <= 1 ? 0 : -EPERM;
}

/* Removes the partial whose file (or resume point's file) is entry, unless an upload
 * holds it: its lock is taken as an upload takes it, without waiting. A resume point whose
 * partial is gone (left by an older server's commit cut short, or a partial removed by
 * hand) goes too, under the lock of a partial made again for that: the name free, an
 * upload of it may have just written a resume point of its own there.
 * Returns 1 when it removed a partial, 0 when there was none, -EBUSY when an upload holds it. */
static int remove_partial(int dir_fd, const char *entry)
{
        char part[80], mark[sizeof(part) + 4];
        size_t len = strlen(entry);
        bool is_mark = len > 4 && strcmp(entry + len - 4, ".len") == 0;
        struct stat sb;

        if (len >= sizeof(part))
                return 0;
        snprintf(part, sizeof(part), "%.*s", (int)(is_mark ? len - 4 : len), entry);
        snprintf(mark, sizeof(mark), "%s.len", part);
        int fd = openat(dir_fd, part, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        bool orphan =
            fd < 0 && errno == ENOENT && fstatat(dir_fd, mark, &sb, AT_SYMLINK_NOFOLLOW) == 0;
        if (orphan)
                fd = openat(dir_fd, part, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
                return 0; /* gone, or not ours to judge (a directory, a link): left alone */
        if (flock(fd, LOCK_EX | LOCK_NB) != 0)
                return close_keep(fd, -EBUSY);
        int removed = 0;
        if (still_named(dir_fd, part, fd)) {
                unlinkat(dir_fd, mark, 0); /* first, as in dir_commit */
                removed = unlinkat(dir_fd, part, 0) == 0 && !orphan;
        }
        return close_keep(fd, removed);
}

/* Removes the partials in dir_fd that start with stem (every partial: PART_PREFIX) and no
 * upload holds. Returns how many were removed, -EBUSY when an upload holds one, or -ENOTEMPTY
 * (nothing removed) when only is set and the directory holds anything but partials. */
static int remove_partials(int dir_fd, const char *stem, bool only)
{
        int dup_fd = dup(dir_fd);
        DIR *dir = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
        struct dirent *entry;
        int removed = 0, busy = 0;

        if (!dir)
                return close_keep(dup_fd, -errno);
        while (only && (entry = readdir(dir)))
                if (strcmp(entry->d_name, ".") != 0 && strcmp(entry->d_name, "..") != 0 &&
                    strncmp(entry->d_name, PART_PREFIX, strlen(PART_PREFIX)) != 0) {
                        closedir(dir);
                        return -ENOTEMPTY;
                }
        rewinddir(dir);
        while ((entry = readdir(dir)))
                if (strncmp(entry->d_name, stem, strlen(stem)) == 0) {
                        int rc = remove_partial(dir_fd, entry->d_name);
                        busy |= rc == -EBUSY;
                        removed += rc > 0;
                }
        closedir(dir);
        return busy ? -EBUSY : removed;
}

/* A directory that holds only partials no upload holds is empty to the client (listings
 * hide them): they go, then the directory. One an upload holds keeps it (ENOTEMPTY). */
static int dir_rmdir(struct xftp_store *store, const char *path)
{
        const char *leaf;
        int parent = open_parent(store, path, &leaf);

        if (parent < 0)
                return parent;
        int rc = unlinkat(parent, leaf, AT_REMOVEDIR) < 0 ? -errno : 0;
        int fd = rc == -ENOTEMPTY ? store_openat2(parent, leaf, O_RDONLY | O_DIRECTORY, 0) : -1;
        if (fd >= 0 && remove_partials(fd, PART_PREFIX, true) >= 0)
                rc = unlinkat(parent, leaf, AT_REMOVEDIR) < 0 ? -errno : 0;
        close_keep(fd, 0);
        return close_keep(parent, rc);
}

/* DELE removes the name and what uploads of it left (every user's: no other command
 * reaches another user's partial); a running upload of it keeps its partial and may
 * still commit. The name absent but a partial removed counts as done. */
static int dir_unlink(struct xftp_store *store, const char *path)
{
        char stem[64];
        const char *leaf;
        int parent = open_parent(store, path, &leaf);

        if (parent < 0)
                return parent;
        int rc = unlinkat(parent, leaf, 0) < 0 ? -errno : 0;
        if (rc == 0 || rc == -ENOENT) {
                part_stem(leaf, stem, sizeof(stem));
                if (remove_partials(parent, stem, false) > 0)
                        rc = 0;
        }
        return close_keep(parent, rc);
}

static int dir_rename(struct xftp_store *store, const char *from, const char *to)
{
        const char *from_leaf, *to_leaf;
        struct stat sb;
        int from_dir = open_parent(store, from, &from_leaf);
        if (from_dir < 0)
                return from_dir;
        int to_dir = open_parent(store, to, &to_leaf);
        if (to_dir < 0)
                return close_keep(from_dir, to_dir);

        int rc = 0;
        if (fstatat(to_dir, to_leaf, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(sb.st_mode))
                rc = -EEXIST;
        else if (renameat(from_dir, from_leaf, to_dir, to_leaf) < 0)
                rc = -errno;
        close(to_dir);
        return close_keep(from_dir, rc);
}

/* A file open for reading, around fd (closed on failure). */
static int file_wrap(int fd, struct xftp_store *store, struct dir_file **out)
{
        struct ds_error err;
        struct dir_file *file = calloc(1, sizeof(*file));

        if (!file)
                return close_keep(fd, -ENOMEM);
        file->base.store = store;
        file->fd = fd;
        file->parent_fd = -1;
        file->mark_fd = file->replaced_fd = -1;
        int rc = xftp_xfile_plain(&file->base.xfile, fd, xfile_flags(store, false), &err);
        if (rc < 0) {
                free(file);
                return close_keep(fd, rc);
        }
        *out = file;
        return 0;
}

static int dir_open_read(struct xftp_store *store, const char *path, struct xftp_store_file **out)
{
        struct stat sb;
        /* O_NONBLOCK: opening a FIFO someone put in the store must not wait for a writer. */
        int fd = store_openat2(root_of(store), path, O_RDONLY | O_NONBLOCK, 0);

        if (fd < 0)
                return fd;
        if (fstat(fd, &sb) < 0)
                return close_keep(fd, -errno);
        if (S_ISDIR(sb.st_mode))
                return close_keep(fd, -EISDIR);
        if (!S_ISREG(sb.st_mode))
                return close_keep(fd, -EPERM);
        if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0)
                return close_keep(fd, -errno);
        struct dir_file *file;
        int rc = file_wrap(fd, store, &file);
        if (rc == 0)
                *out = &file->base;
        return rc;
}

/* Opens a partial, made when absent if created is given (*created then tells), and locks
 * it (LOCK_EX for an upload, LOCK_SH to read its resume point), waiting up to LOCK_WAIT_MS
 * for an upload of the same file that is still ending (its client just gone). The lock
 * on the partial itself keeps two uploads from writing one partial; a lock file beside it
 * would cost an inode made and freed per upload, and ext4 then searches its inode table
 * past every recently freed one (two thirds of the server's time in a tree of small
 * uploads). Returns the descriptor, -ENOENT, -EBUSY, or another negative errno. */
static int lock_partial(int parent, const char *part, int op, bool *created)
{
        int flags = (op == LOCK_EX ? O_RDWR : O_RDONLY | O_NONBLOCK) | O_NOFOLLOW | O_CLOEXEC;

        for (int waited = 0;; waited += 50) {
                int fd = created ? openat(parent, part, flags | O_CREAT | O_EXCL, 0644) : -1;
                if (created)
                        *created = fd >= 0;
                if (fd < 0 && created && errno != EEXIST)
                        return -errno;
                if (fd < 0 && (fd = openat(parent, part, flags)) < 0) {
                        if (errno == ENOENT && created)
                                continue; /* committed or removed since: make it afresh */
                        return -errno;
                }
                if (own_file(fd) < 0)
                        return close_keep(fd, -EPERM);
                if (flock(fd, op | LOCK_NB) == 0) {
                        if (still_named(parent, part, fd))
                                return fd;
                        close(fd); /* committed meanwhile: open the name afresh */
                        continue;
                }
                int rc = errno;
                close(fd);
                if (rc != EWOULDBLOCK)
                        return -rc;
                if (waited >= LOCK_WAIT_MS)
                        return -EBUSY;
                nanosleep(&(struct timespec){.tv_nsec = 50000000}, NULL);
        }
}

/* The resume point recorded for the locked partial part_fd, never more than its size. */
static int read_mark(int parent, const char *mark, int part_fd, uint64_t *size)
{
        char text[MARK_LEN + 1] = "";
        struct stat sb;

        if (fstat(part_fd, &sb) < 0)
                return -errno;
        int mark_fd = openat(parent, mark, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (mark_fd < 0)
                return -ENOENT;
        ssize_t n = pread(mark_fd, text, MARK_LEN, 0);
        close(mark_fd);
        char *end;
        errno = 0;
        unsigned long long value = n > 0 ? strtoull(text, &end, 10) : 0;
        if (n <= 0 || errno || end == text)
                return -ENOENT;
        *size = value < (uint64_t)sb.st_size ? value : (uint64_t)sb.st_size;
        return 0;
}

/* Writes the resume point prefix_end once the bytes below it are on the disk (a piece
 * written through the page cache, or blocks whose allocation the journal had not
 * committed, would read back as zeros); left as it was when they cannot be made so.
 * Returns 0, or the failed sync's negative errno: that counts as a failed write-out, for
 * the error is told once, so the next sync would pass over the lost pages (and the
 * commit's wait too); the upload then neither commits nor moves its point again, and
 * the transfer ends at once rather than receive what it cannot keep. */
static int mark_durable(struct dir_file *file, uint64_t prefix_end)
{
        char text[MARK_LEN + 1];

        if (file->written_out < 0)
                return file->written_out;
        if (fdatasync(file->fd) < 0) {
                file->written_out = -errno;
                return file->written_out;
        }
        /* The next sync a second on, even when this point cannot be written (no inode for
         * its file, something else at its name): else every piece would pay one. */
        file->marked_ns = ds_now_ns();
        if (file->mark_fd < 0) {
                file->mark_fd = openat(file->parent_fd, file->mark,
                                       O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (file->mark_fd >= 0 && own_file(file->mark_fd) < 0)
                        file->mark_fd = close_keep(file->mark_fd, -1);
        }
        snprintf(text, sizeof(text), "%020" PRIu64 "\n", prefix_end);
        if (file->mark_fd >= 0 && pwrite(file->mark_fd, text, MARK_LEN, 0) == MARK_LEN)
                file->marked = prefix_end;
        return 0;
}

/* The first point comes a second into the upload: a tree's small file never gives the mark
 * a disk block, whose release when the mark went cost a discard (1 ms here) per upload. */
static int dir_prefix(struct xftp_store_file *base, uint64_t prefix_end)
{
        struct dir_file *file = (struct dir_file *)base;

        if (prefix_end <= file->marked)
                return 0;
        if (prefix_end > file->unmarked)
                file->unmarked = prefix_end;
        if (ds_now_ns() - file->marked_ns < XFTP_RESUME_POINT_EVERY_NS)
                return 0;
        return mark_durable(file, prefix_end);
}

/* Copies [at, end) of src into the upload at the same offsets. */
static int copy_range(int src, int dst, loff_t at, loff_t end)
{
        loff_t out = at;

        while (at < end) {
                ssize_t n = copy_file_range(src, &at, dst, &out, (size_t)(end - at), 0);
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return -ERANGE; /* the file shrank meanwhile */
        }
        return 0;
}

/* Copies the first len bytes of the committed file leaf into the upload (REST or APPE
 * over a file that was committed before), data only: copy_file_range fills a hole it is
 * handed with zeros, so a sparse file's holes (a 128 MiB one for a 10-byte file) would
 * cost disk no one sent. The copy is the price of committing APPE all or nothing. */
static int copy_committed(struct dir_file *file, uint64_t len)
{
        int src = openat(file->parent_fd, file->leaf, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (src < 0)
                return -errno;
        loff_t at = 0, end = (loff_t)len;
        int rc = 0;
        while (rc == 0 && at < end) {
                loff_t data = lseek(src, at, SEEK_DATA);
                if (data < 0 && errno == ENXIO)
                        break; /* a hole up to the end of the file */
                loff_t hole = data < 0 ? -1 : lseek(src, data, SEEK_HOLE);
                if (hole < 0) {
                        rc = -errno;
                        break;
                }
                if (data >= end)
                        break;
                at = hole < end ? hole : end;
                rc = copy_range(src, file->fd, data, at);
        }
        if (rc == 0 && ftruncate(file->fd, end) < 0)
                rc = -errno; /* the size, holes at the end included */
        return close_keep(src, rc);
}

/* Where the upload starts in its locked partial (file->fd): a partial continued, the
 * committed file's bytes kept, or an empty file. Returns 0 with file->base.start set. */
static int start_upload(struct dir_file *file, const struct xftp_store_upload *how)
{
        struct stat sb;
        uint64_t whole = 0;
        /* The name itself, not what a link there names: a link's target may lie outside the
         * root, and REST's answers must not tell its type or size. */
        bool committed = fstatat(file->parent_fd, file->leaf, &sb, AT_SYMLINK_NOFOLLOW) == 0;

        if (committed && S_ISDIR(sb.st_mode))
                return -EISDIR;
        if (how->offset > 0 && !how->append && !file->fresh &&
            read_mark(file->parent_fd, file->mark, file->fd, &whole) == 0 && whole >= how->offset) {
                file->base.start = how->offset;
                return ftruncate(file->fd, (off_t)how->offset) < 0 ? -errno : 0;
        }
        uint64_t keep = how->append ? (committed ? (uint64_t)sb.st_size : 0) : how->offset;
        if (keep > 0 && (!committed || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size < keep))
                return -ERANGE;
        if (!file->fresh && ftruncate(file->fd, 0) < 0)
                return -errno;
        /* A resume point left by an earlier upload (or a commit cut short) would speak for
         * bytes this one writes. */
        unlinkat(file->parent_fd, file->mark, 0);
        file->fresh = true;
        file->base.start = keep;
        return keep > 0 ? copy_committed(file, keep) : 0;
}

static int dir_create(struct xftp_store *store, const char *path,
                      const struct xftp_store_upload *how, struct xftp_store_file **out)
{
        const char *leaf;
        struct dir_file *file = calloc(1, sizeof(*file));
        if (!file)
                return -ENOMEM;
        file->base.store = store;
        file->fd = file->mark_fd = file->replaced_fd = -1;
        file->upload = true;
        file->parent_fd = open_parent(store, path, &leaf);
        int rc = file->parent_fd;
        if (rc >= 0) {
                snprintf(file->leaf, sizeof(file->leaf), "%s", leaf);
                part_names(how->user, leaf, file->part, file->mark, sizeof(file->part));
                file->fd = rc = lock_partial(file->parent_fd, file->part, LOCK_EX, &file->fresh);
        }
        if (rc >= 0)
                rc = start_upload(file, how);
        struct ds_error err;
        if (rc >= 0)
                rc = xftp_xfile_plain(&file->base.xfile, file->fd, xfile_flags(store, true), &err);
        if (rc < 0) {
                file->base.xfile.ops = NULL;
                store->ops->file_close(&file->base, !file->fresh);
                return rc;
        }
        /* The resume point starts where the data will: what came before is whole. One that
         * cannot be written so must not stay naming more (a continuation cut the partial
         * back to its REST point): it goes, or the upload does. */
        file->marked_ns = ds_now_ns(); /* the first point a second into the upload */
        if (file->base.start > file->marked)
                mark_durable(file, file->base.start);
        rc = file->written_out;
        if (rc == 0 && file->marked != file->base.start &&
            unlinkat(file->parent_fd, file->mark, 0) < 0 && errno != ENOENT)
                rc = -errno;
        if (rc < 0) {
                store->ops->file_close(&file->base, true);
                return rc;
        }
        *out = &file->base;
        return 0;
}

/* Whether the ext4 driver's file system on dev keeps a journal: ext2, ext3 and a journal-less
 * ext4 share ext4's magic, and without a journal a directory's fsync writes the names but
 * not the inodes they name (fsck then clears them). Its sysfs directory, named after the
 * block device, names the journal's thread, or "<none>". Unknown: no. */
static bool ext4_journaled(dev_t dev)
{
        char path[320], link[256], text[16] = "";

        snprintf(path, sizeof(path), "/sys/dev/block/%u:%u", major(dev), minor(dev));
        ssize_t n = readlink(path, link, sizeof(link) - 1);
        if (n <= 0)
                return false;
        link[n] = '\0';
        const char *name = strrchr(link, '/');
        snprintf(path, sizeof(path), "/sys/fs/ext4/%s/journal_task", name ? name + 1 : link);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        n = read(fd, text, sizeof(text) - 1);
        close(fd);
        return n > 0 && strncmp(text, "<none>", 6) != 0;
}

/* Whether the file system of fd commits its journal in order, each commit after a flush of
 * the disk's cache, and ends an upload's writeback only once the blocks it allocated are in
 * the journal, so that a directory sync made after a rename makes the data written out
 * before it durable too: ext4 with a journal, XFS; tmpfs keeps nothing across a crash. Not
 * btrfs: its writeback ends before the file's extents are in its tree, and a directory's
 * fsync logs a new file in it with no data (vm.xftp-crash-btrfs found it empty under its
 * name); not NFS (only a file's fsync commits its unstable writes), FUSE or anything
 * unknown. The answer is kept for the device last asked about. */
static bool commits_in_order(struct xftp_store *store, int fd)
{
        struct dir_store *dir = (struct dir_store *)store;
        struct statfs fs;
        struct stat sb;

        if (fstat(fd, &sb) < 0)
                return false;
        if (dir->judged >= 0 && dir->judged_dev == sb.st_dev)
                return dir->judged;
        if (fstatfs(fd, &fs) < 0)
                return false;
        switch ((unsigned long)fs.f_type) {
        case EXT4_SUPER_MAGIC:
                dir->judged = ext4_journaled(sb.st_dev);
                break;
        case XFS_SUPER_MAGIC:
        case TMPFS_MAGIC:
                dir->judged = 1;
                break;
        default:
                dir->judged = 0;
        }
        dir->judged_dev = sb.st_dev;
        return dir->judged;
}

/* Where the file system commits in order, the data goes to the disk and is waited for,
 * but neither the disk's cache nor the journal is flushed here: the directory sync the
 * commit owes does both, once for a run of uploads (store.h); elsewhere it is fsynced. On
 * ext4 with a journal an fsync per upload cost a tree of 2,000 files of 64 KiB put into
 * xftpd 1.025 s against 0.728 s this way (bench/xftp-tree.sh, DS_TREE_FS=ext4 and
 * DS_BIN_B: medians of five rounds of both in one run). The pages the O_DIRECT twin wrote
 * are none of the page cache's: nothing to wait for. Done once: a MODE S upload is written
 * out ahead of its commit, and a second fsync still costs a flush of the disk's cache. */
static int dir_write_out(struct xftp_store_file *base)
{
        struct dir_file *file = (struct dir_file *)base;
        unsigned flags =
            SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER;

        if (file->written_out == 0) {
                int rc = commits_in_order(base->store, file->fd)
                             ? sync_file_range(file->fd, 0, 0, flags)
                             : fsync(file->fd);
                file->written_out = rc < 0 ? -errno : 1;
        }
        return file->written_out < 0 ? file->written_out : 0;
}

static int dir_commit(struct xftp_store_file *base)
{
        struct dir_file *file = (struct dir_file *)base;
        int rc = dir_write_out(base);

        if (rc < 0)
                return rc;
        /* The resume point goes while the partial holds its name: once the name is free,
         * the next upload of it may write a resume point of its own there. Should the
         * rename fail, the upload is kept for REST and its closing writes the point anew. */
        if (file->mark_fd >= 0) {
                unlinkat(file->parent_fd, file->mark, 0);
                file->mark_fd = close_keep(file->mark_fd, -1);
                file->unmarked = file->marked > file->unmarked ? file->marked : file->unmarked;
                file->marked = 0;
        }
        int replaced = xftp_release_hold(file->parent_fd, file->leaf);
        if (renameat(file->parent_fd, file->part, file->parent_fd, file->leaf) < 0) {
                rc = -errno;
                close_keep(replaced, 0); /* still named: closing it frees nothing */
                return rc;
        }
        file->replaced_fd = replaced;
        file->committed = true;
        return 0;
}

/* The rename's durability, and its data's, is the directory's fsync, the caller's to do
 * (store.h's xftp_store_owe). Until it is done a crash leaves the whole file under its
 * final name (the data was on the disk before the name was made, and the journal that
 * makes the name durable flushes the disk's cache first), or a part or none of it under
 * its partial name; never a part under the final name. */
static int dir_commit_dir(struct xftp_store_file *base)
{
        struct dir_file *file = (struct dir_file *)base;
        int dir_fd = file->committed ? file->parent_fd : -1;

        if (dir_fd >= 0)
                file->parent_fd = -1; /* the caller's now; a committed file needs it no more */
        return dir_fd;
}

static bool dir_file_close(struct xftp_store_file *base, bool keep)
{
        struct dir_file *file = (struct dir_file *)base;
        bool kept = false;

        if (file->base.xfile.ops)
                xftp_xfile_plain_close(&file->base.xfile);
        struct stat sb;
        /* A new upload that received nothing has nothing to resume: its empty partial goes
         * (a STOR refused 425, with no data connection, would otherwise leave one). */
        if (keep && file->upload && !file->committed && file->fresh && file->base.start == 0 &&
            file->fd >= 0 && fstat(file->fd, &sb) == 0 && sb.st_size == 0)
                keep = false;
        if (file->upload && !file->committed && keep && file->unmarked > file->marked)
                mark_durable(file, file->unmarked); /* kept for REST: where to go on from */
        /* A partial whose write-out (or a resume point's sync) failed may hold pages the disk
         * never took, and no later wait says so again (a writeback error is told once): it
         * is not kept for REST. */
        if (file->written_out < 0)
                keep = false;
        if (file->upload && !file->committed && file->fd >= 0) {
                kept = keep && fstatat(file->parent_fd, file->part, &sb, AT_SYMLINK_NOFOLLOW) == 0;
                if (!kept) {
                        unlinkat(file->parent_fd, file->mark, 0); /* first, as in dir_commit */
                        unlinkat(file->parent_fd, file->part, 0);
                }
        }
        for (int *fd = &file->fd; fd <= &file->mark_fd; fd++)
                if (*fd >= 0)
                        close(*fd);
        xftp_release_later(file->replaced_fd); /* after the reply: the blocks go apart */
        free(file);
        return kept;
}

static int dir_partial_size(struct xftp_store *store, const char *user, const char *path,
                            uint64_t *size)
{
        char part[64], mark[64];
        const char *leaf;
        int parent = open_parent(store, path, &leaf);

        if (parent < 0)
                return parent;
        part_names(user, leaf, part, mark, sizeof(part));
        int fd = lock_partial(parent, part, LOCK_SH, NULL);
        int rc = fd < 0 ? fd : read_mark(parent, mark, fd, size);
        if (fd >= 0)
                close(fd);
        return close_keep(parent, rc);
}

static void dir_close(struct xftp_store *store)
{
        close(root_of(store));
        free(store);
}

static const struct xftp_store_ops dir_ops = {
    .close = dir_close,
    .stat = dir_stat,
    .list = dir_list,
    .set_mtime = dir_set_mtime,
    .mkdir = dir_mkdir,
    .rmdir = dir_rmdir,
    .unlink = dir_unlink,
    .rename = dir_rename,
    .open_read = dir_open_read,
    .create = dir_create,
    .prefix = dir_prefix,
    .write_out = dir_write_out,
    .commit = dir_commit,
    .commit_dir = dir_commit_dir,
    .file_close = dir_file_close,
    .partial_size = dir_partial_size,
};

int store_dir_open(struct xftp_store **out, const char *root, unsigned flags, const char *what,
                   struct ds_error *err)
{
        struct dir_store *store = calloc(1, sizeof(*store));

        if (!store)
                return ds_fail(err, -ENOMEM, "store");
        store->root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (store->root_fd < 0) {
                int rc = -errno;
                free(store);
                return ds_fail(err, rc, "%s %s", what, root);
        }
        store->base.ops = &dir_ops;
        store->base.width = 1;
        store->read_flags = flags & XFTP_STORE_DIRECT_READS ? XFTP_XFILE_DIRECT : 0;
        store->judged = -1;
        *out = &store->base;
        return 0;
}
