/* The partial file of a download.
 *
 * How much of it is whole is kept in its extended attribute user.xftp.whole as the data is
 * written (MODE E writes blocks out of order, so the file's size alone does not say), and
 * --resume continues from there. What the file is a part of, the remote file's size and
 * modification time as the server named them when the download began, is kept in
 * user.xftp.origin: --resume of a file that changed on the server since starts it over
 * rather than joining two versions. */
#include "part.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <dragstrip/clock.h>
#include <dragstrip/error.h>

#include "xfer.h"

#define WHOLE_XATTR  "user.xftp.whole"
#define ORIGIN_XATTR "user.xftp.origin" /* what the partial is a part of */
/* A partial continued from bytes xftp did not write: to be checked whole, in every run */
#define UNCHECKED_XATTR "user.xftp.unchecked" /* how many of its first bytes */
#define PART_SUFFIX     ".xftp-part"
#define PATH_ROOM       4096

/* FNV-1a: a short tag that tells long names apart (not a defence against anyone). */
static uint64_t name_tag(const char *name)
{
        uint64_t hash = 14695981039346656037ull;
        for (const unsigned char *p = (const unsigned char *)name; *p; p++)
                hash = (hash ^ *p) * 1099511628211ull;
        return hash;
}

int part_name(const char *local, char *out, size_t room)
{
        const char *slash = strrchr(local, '/');
        const char *base = slash ? slash + 1 : local;
        int dir_len = slash ? (int)(slash + 1 - local) : 0;
        size_t keep = strlen(base);
        char tag[24] = "";
        /* ".NAME.xftp-part" of a name near NAME_MAX bytes is a name no file system takes:
         * such a name keeps its first bytes and a tag of the whole, one partial per name. */
        if (1 + keep + strlen(PART_SUFFIX) > NAME_MAX) {
                snprintf(tag, sizeof(tag), "~%016llx", (unsigned long long)name_tag(base));
                keep = NAME_MAX - 1 - strlen(tag) - strlen(PART_SUFFIX);
        }
        int n =
            snprintf(out, room, "%.*s.%.*s%s%s", dir_len, local, (int)keep, base, tag, PART_SUFFIX);
        return n > 0 && (size_t)n < room ? 0 : -ENAMETOOLONG;
}

bool part_name_like(const char *name)
{
        size_t len = strlen(name), suffix = strlen(PART_SUFFIX);
        return name[0] == '.' && len > suffix && strcmp(name + len - suffix, PART_SUFFIX) == 0;
}

/* A count kept on the partial fd in attribute attr: true when it is recorded. */
static bool write_count(int fd, const char *attr, uint64_t count)
{
        char text[24];
        int n = snprintf(text, sizeof(text), "%llu", (unsigned long long)count);
        return fsetxattr(fd, attr, text, (size_t)n, 0) == 0;
}

/* The count in attribute attr of the partial fd: true and *count when there is one. */
static bool read_count(int fd, const char *attr, uint64_t *count)
{
        char text[24];
        ssize_t n = fgetxattr(fd, attr, text, sizeof(text) - 1);
        if (n <= 0)
                return false;
        text[n] = '\0';
        *count = strtoull(text, NULL, 10);
        return true;
}

/* Records that the partial fd is whole up to whole: true when it is recorded. */
static bool write_whole(int fd, uint64_t whole)
{
        return write_count(fd, WHOLE_XATTR, whole); /* checked at open */
}

/* The first bytes of the partial that xftp did not write (0: none recorded). */
static uint64_t unchecked_of(int fd)
{
        uint64_t bytes = 0;
        return read_count(fd, UNCHECKED_XATTR, &bytes) ? bytes : 0;
}

/* Records w->whole once the bytes below it are on the disk. */
static void record_durable(struct part_whole *w)
{
        if (w->failed)
                return;
        if (fdatasync(w->fd) < 0)
                w->failed = -errno;
        else if (!w->marks || write_whole(w->fd, w->whole)) /* unmarked: written in order */
                w->recorded = w->whole;
        /* A file system that keeps no attribute is still synced once a second, not at
         * every block. */
        w->recorded_ns = ds_now_ns();
}

int part_record_whole(uint64_t whole, void *ctx)
{
        struct part_whole *w = ctx;
        if (whole > w->whole)
                w->whole = whole;
        if (w->whole > w->recorded && ds_now_ns() - w->recorded_ns >= XFTP_RESUME_POINT_EVERY_NS)
                record_durable(w);
        return w->failed;
}

int part_whole_final(struct part_whole *w)
{
        if (w->final)
                return 0; /* once: what it kept has been told, and a second sync may fail */
        w->final = true;
        bool failed_before = w->failed != 0;
        if (w->whole > w->recorded)
                record_durable(w);
        /* The pages above the point may be lost, and where the file system keeps no
         * attribute a resume would take the partial's size for its point: the size says
         * no more than the point. */
        if (w->failed)
                (void)ftruncate(w->fd, (off_t)w->recorded);
        return failed_before ? 0 : w->failed;
}

uint64_t part_whole_kept(const struct part_whole *w, uint64_t prefix)
{
        return w->failed ? w->recorded : prefix;
}

/* How much of a partial download is whole: the attribute if there is one (never more
 * than the file holds), else (a file written in order only) its size. */
static uint64_t whole_of(int fd, bool *marked)
{
        struct stat st;
        uint64_t whole = 0;
        uint64_t size = fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
        *marked = read_count(fd, WHOLE_XATTR, &whole);
        if (!*marked)
                return size;
        return whole < size ? whole : size; /* the file may have been cut since */
}

/* The origin recorded on the partial file: true and *o when there is one. */
static bool origin_of(int fd, struct part_origin *o)
{
        char text[64], size[24];
        ssize_t n = fgetxattr(fd, ORIGIN_XATTR, text, sizeof(text) - 1);
        if (n <= 0)
                return false;
        text[n] = '\0';
        if (sscanf(text, "size=%23[^;];modify=%23s", size, o->modified) != 2)
                return false;
        o->size = strcmp(size, "-") == 0 ? UINT64_MAX : strtoull(size, NULL, 10);
        if (strcmp(o->modified, "-") == 0)
                o->modified[0] = '\0';
        return true;
}

static void record_origin(int fd, const struct part_origin *o)
{
        char text[64], size[24] = "-";
        if (o->size != UINT64_MAX)
                snprintf(size, sizeof(size), "%llu", (unsigned long long)o->size);
        int n = snprintf(text, sizeof(text), "size=%s;modify=%s", size,
                         o->modified[0] ? o->modified : "-");
        fsetxattr(fd, ORIGIN_XATTR, text, (size_t)n, 0); /* none kept: nothing to compare */
}

/* Why xftp's partial file fd, whole up to whole, is not a part of the remote file as it is
 * now: into why (empty when it is, or cannot be told). A field the server named neither
 * time, or only one of them, says nothing. */
static void changed_since(int fd, uint64_t whole, const struct part_origin *now, char *why,
                          size_t room)
{
        struct part_origin then;
        why[0] = '\0';
        if (!origin_of(fd, &then)) {
                if (now->size != UINT64_MAX && whole > now->size)
                        snprintf(why, room, "holds %llu bytes, the file is now %llu",
                                 (unsigned long long)whole, (unsigned long long)now->size);
        } else if (then.size != UINT64_MAX && now->size != UINT64_MAX && then.size != now->size) {
                snprintf(why, room, "the file was %llu bytes, now %llu",
                         (unsigned long long)then.size, (unsigned long long)now->size);
        } else if (then.modified[0] && now->modified[0] &&
                   strcmp(then.modified, now->modified) != 0) {
                snprintf(why, room, "the file was modified %s, now %s", then.modified,
                         now->modified);
        }
}

/* Takes the partial for this transfer alone: a second xftp (an overlapping run, or a name
 * that differs only in case on a file system that ignores it) would otherwise cut it or
 * write it under the first. Held until the file has its name (the batch keeps a copy of
 * fd). A file system without flock() goes unlocked. A lock taken once the transfer that
 * held it named or removed the file is not on the partial: -ESTALE, to open it anew. fd is
 * closed on failure. */
static int lock_part(int fd, const char *part, struct ds_error *err)
{
        struct stat held, named;
        if (flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK) {
                close(fd);
                return ds_fail(err, 0, "%s: another transfer is writing it", part), -EBUSY;
        }
        if (fstat(fd, &held) == 0 && lstat(part, &named) == 0 && held.st_dev == named.st_dev &&
            held.st_ino == named.st_ino)
                return fd;
        close(fd);
        return ds_fail(err, 0, "%s: named or removed by another transfer meanwhile", part), -ESTALE;
}

/* part_open's one try: -ESTALE when the file it opened stopped being the partial. */
static int part_take(const char *part, bool resume, const struct part_origin *origin,
                     uint64_t *offset, bool *marks, uint64_t *theirs, char *why, size_t why_room,
                     struct ds_error *err)
{
        bool marked = false;
        struct stat st;
        int fd = open(part, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

        *offset = 0;
        *theirs = 0;
        why[0] = '\0';
        if (fd < 0 && errno == EEXIST) {
                /* Never through a link, never a fifo or device someone put there. */
                fd = open(part, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
                if (fd < 0)
                        return ds_fail(err, -errno, "%s", part);
                if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                        close(fd);
                        return ds_fail(err, 0, "%s: not a regular file", part), -EEXIST;
                }
                if ((fd = lock_part(fd, part, err)) < 0)
                        return fd;
                uint64_t whole = whole_of(fd, &marked);
                /* Bytes of someone else's, even once continued: never started over here. An
                 * empty unmarked file is one just created, taken. */
                uint64_t foreign = unchecked_of(fd);
                if (!foreign && !marked)
                        foreign = whole;
                if (resume && marked)
                        changed_since(fd, whole, origin, why, why_room);
                if (resume && !why[0]) {
                        *offset = whole;
                        *theirs = foreign;
                        if (foreign) /* kept, should this run be cut too */
                                write_count(fd, UNCHECKED_XATTR, foreign);
                } else if (foreign) {
                        close(fd);
                        if (why[0])
                                return ds_fail(err, 0,
                                               "%s holds bytes xftp did not write, and the "
                                               "server's file changed since (%s): remove it",
                                               part, why),
                                       -EEXIST;
                        return ds_fail(err, 0,
                                       "%s exists and xftp did not write it: remove it, or "
                                       "continue it with --resume",
                                       part),
                               -EEXIST;
                } else if (ftruncate(fd, 0) < 0) {
                        int rc = -errno;
                        close(fd);
                        return ds_fail(err, rc, "%s", part);
                }
        } else if (fd < 0) {
                return ds_fail(err, -errno, "%s", part);
        } else if ((fd = lock_part(fd, part, err)) < 0) {
                return fd; /* taken between its creation and now: the taker's */
        }
        record_origin(fd, origin);
        write_whole(fd, *offset); /* a point recorded durable before, or the start */
        *marks = whole_of(fd, &marked) == *offset && marked;
        return fd;
}

#define PART_OPEN_TRIES 3 /* a partial named or removed under each is another run's churn */

int part_open(const char *part, bool resume, const struct part_origin *origin, uint64_t *offset,
              bool *marks, uint64_t *theirs, char *why, size_t why_room, struct ds_error *err)
{
        int fd = -ESTALE;
        for (int i = 0; i < PART_OPEN_TRIES && fd == -ESTALE; i++)
                fd = part_take(part, resume, origin, offset, marks, theirs, why, why_room, err);
        return fd;
}

void part_give_back(int fd, uint64_t theirs)
{
        if (ftruncate(fd, (off_t)theirs) < 0)
                return;
        fremovexattr(fd, WHOLE_XATTR);
        fremovexattr(fd, ORIGIN_XATTR);
        fremovexattr(fd, UNCHECKED_XATTR);
}

/* Cuts the partial file to size, with the mode cp would give a new file and the time the
 * source had, as a whole file should be before it takes its name. */
static int part_finish(int fd, const char *part, uint64_t size, const struct timespec *modified,
                       struct ds_error *err)
{
        if (ftruncate(fd, (off_t)size) < 0)
                return ds_fail(err, -errno, "%s", part);
        /* Written 0600 while partial; complete, it gets the mode cp would give a new file. */
        mode_t mask = umask(0);
        umask(mask);
        if (fchmod(fd, 0666 & ~mask) < 0)
                return ds_fail(err, -errno, "chmod %s", part);
        struct timespec times[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_nsec = UTIME_OMIT}};
        if (modified)
                times[1] = *modified;
        if (modified && futimens(fd, times) < 0)
                return ds_fail(err, -errno, "setting the time of %s", part);
        return 0;
}

/* The partial's (fd's) marks off, and its name: after this, part is local. The marks go
 * first, so that the final name never carries them. A rename that fails marks the partial
 * again, whole to its end (its bytes were synced before the rename), so that it stays
 * xftp's: --resume continues it and a plain run starts it over, neither refuses it. */
static int part_rename(int fd, const char *part, const char *local, struct ds_error *err)
{
        char origin[64];
        struct stat st;
        ssize_t origin_len = fgetxattr(fd, ORIGIN_XATTR, origin, sizeof(origin));
        uint64_t unchecked = unchecked_of(fd);
        fremovexattr(fd, WHOLE_XATTR);
        fremovexattr(fd, ORIGIN_XATTR);
        fremovexattr(fd, UNCHECKED_XATTR);
        if (rename(part, local) == 0)
                return 0;
        int rc = ds_fail(err, -errno, "rename %s to %s", part, local);
        if (origin_len > 0)
                fsetxattr(fd, ORIGIN_XATTR, origin, (size_t)origin_len, 0);
        if (unchecked)
                write_count(fd, UNCHECKED_XATTR, unchecked);
        write_whole(fd, fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0);
        return rc;
}

/* A finished partial synced and renamed to local, the rename synced too. */
static int commit_now(int fd, const char *part, const char *local, struct ds_error *err)
{
        if (fsync(fd) < 0)
                return ds_fail(err, -errno, "fsync %s", part);
        int rc = part_rename(fd, part, local, err);
        if (rc < 0)
                return rc;
        char dir[PATH_ROOM];
        snprintf(dir, sizeof(dir), "%s", local);
        int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
                fsync(dfd); /* the rename itself durable; a failure here loses no data */
                close(dfd);
        }
        return 0;
}

int part_commit(int fd, const char *part, const char *local, uint64_t size,
                const struct timespec *modified, struct ds_error *err)
{
        int rc = part_finish(fd, part, size, modified, err);
        return rc < 0 ? rc : commit_now(fd, part, local, err);
}

/* A file that waits in a batch: its partial, its final name, and a copy of the partial's
 * descriptor that keeps it locked until the name is taken. */
struct part_pending {
        char *part, *local;
        int fd;
};

#define BATCH_FILES_MAX 1024u
#define BATCH_BYTES_MAX (1ull << 30) /* what a flush may have to write back at once */
#define BATCH_FDS_SHARE 2u           /* the batches keep at most half the descriptors open */

/* Descriptors the batches may keep open at once (one filling, others taken out and
 * waiting for the flush before theirs; each file keeps one): room for two full batches
 * where the limit allows. The soft limit is raised toward the hard one for them (xftp
 * waits with poll(), never select()). */
static size_t batch_held_max(void)
{
        struct rlimit nofile;
        if (getrlimit(RLIMIT_NOFILE, &nofile) < 0)
                return 2;
        rlim_t want = 2 * BATCH_FILES_MAX * BATCH_FDS_SHARE;
        if (nofile.rlim_cur < want) {
                nofile.rlim_cur = nofile.rlim_max < want ? nofile.rlim_max : want;
                setrlimit(RLIMIT_NOFILE, &nofile);
                getrlimit(RLIMIT_NOFILE, &nofile);
        }
        rlim_t held = nofile.rlim_cur / BATCH_FDS_SHARE;
        return held < 2 ? 2 : held < want ? (size_t)held : (size_t)want;
}

void part_batch_init(struct part_batch *batch, part_unnamed_fn *unnamed, void *ctx)
{
        size_t held_max = batch_held_max();
        size_t files_max = held_max / 2 < BATCH_FILES_MAX ? held_max / 2 : BATCH_FILES_MAX;
        *batch = (struct part_batch){.fs_fd = -1,
                                     .files_max = files_max,
                                     .held_max = held_max,
                                     .unnamed = unnamed,
                                     .unnamed_ctx = ctx};
        pthread_mutex_init(&batch->lock, NULL);
        pthread_mutex_init(&batch->flushing, NULL);
}

/* Syncs and renames the files taken out of a batch; frees them. Runs without the batch's
 * lock: the other workers go on fetching and adding files meanwhile (holding it across a
 * syncfs stopped every one of them at its next commit, for 40-60 ms a batch here). Each
 * file not named is told: one failure names no other file. */
static void flush_items(struct part_batch *batch, int fs_fd, struct part_pending *items,
                        size_t count)
{
        struct ds_error why;
        pthread_mutex_lock(&batch->flushing);
        /* Never a name for a file whose data may not be on disk. */
        int synced = batch->failed ? batch->failed : syncfs(fs_fd) == 0 ? 0 : -errno;
        for (size_t i = 0; i < count; i++) {
                int rc = synced < 0 ? ds_fail(&why, synced, "%s: syncing its data", items[i].local)
                                    : part_rename(items[i].fd, items[i].part, items[i].local, &why);
                if (rc < 0) {
                        batch->unnamed(batch->unnamed_ctx, items[i].local, &why);
                        free(items[i].local);
                        items[i].local = NULL; /* told: not told again below */
                }
        }
        int names = synced < 0 || syncfs(fs_fd) == 0 ? 0 : -errno;
        batch->failed = synced < 0 ? synced : names;
        pthread_mutex_unlock(&batch->flushing);
        for (size_t i = 0; i < count; i++) {
                if (names < 0 && items[i].local) {
                        ds_fail(&why, names, "%s: syncing its name", items[i].local);
                        batch->unnamed(batch->unnamed_ctx, items[i].local, &why);
                }
                close(items[i].fd); /* its lock with it: the name is taken, or never will be */
                free(items[i].part);
                free(items[i].local);
        }
        free(items);
        pthread_mutex_lock(&batch->lock);
        batch->held -= count;
        pthread_mutex_unlock(&batch->lock);
}

/* Takes what the batch holds (the caller holds its lock) and flushes it after unlocking. */
static void flush_unlock(struct part_batch *batch)
{
        struct part_pending *items = batch->items;
        size_t count = batch->count;
        int fs_fd = batch->fs_fd;
        batch->items = NULL;
        batch->count = batch->room = 0;
        batch->bytes = 0;
        pthread_mutex_unlock(&batch->lock);
        if (count > 0)
                flush_items(batch, fs_fd, items, count);
}

int part_commit_later(struct part_batch *batch, int fd, const char *part, const char *local,
                      uint64_t size, const struct timespec *modified, struct ds_error *err)
{
        struct stat st;
        int rc = part_finish(fd, part, size, modified, err);
        if (rc < 0)
                return rc;
        if (fstat(fd, &st) < 0)
                return ds_fail(err, -errno, "%s", part);
        pthread_mutex_lock(&batch->lock);
        if (batch->fs_fd < 0) {
                batch->fs_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
                batch->dev = st.st_dev;
        }
        /* Batches taken out to flush keep theirs open while the flush before them runs. */
        bool here = batch->fs_fd >= 0 && st.st_dev == batch->dev && batch->held < batch->held_max;
        struct part_pending p = {here ? strdup(part) : NULL, here ? strdup(local) : NULL,
                                 here ? fcntl(fd, F_DUPFD_CLOEXEC, 3) : -1};
        if (here && p.part && p.local && p.fd >= 0 && batch->count == batch->room) {
                size_t room = batch->room ? 2 * batch->room : 64;
                struct part_pending *more = realloc(batch->items, room * sizeof(*more));
                if (more) {
                        batch->items = more;
                        batch->room = room;
                }
        }
        if (!here || !p.part || !p.local || p.fd < 0 || batch->count == batch->room) {
                pthread_mutex_unlock(&batch->lock);
                free(p.part);
                free(p.local);
                if (p.fd >= 0)
                        close(p.fd);
                return commit_now(fd, part, local, err); /* on its own */
        }
        batch->items[batch->count++] = p;
        batch->held++;
        batch->bytes += size;
        if (batch->count >= batch->files_max || batch->bytes >= BATCH_BYTES_MAX)
                flush_unlock(batch);
        else
                pthread_mutex_unlock(&batch->lock);
        return 0;
}

void part_batch_flush(struct part_batch *batch)
{
        pthread_mutex_lock(&batch->lock);
        flush_unlock(batch);
}

void part_batch_free(struct part_batch *batch)
{
        for (size_t i = 0; i < batch->count; i++) {
                close(batch->items[i].fd);
                free(batch->items[i].part);
                free(batch->items[i].local);
        }
        free(batch->items);
        if (batch->fs_fd >= 0)
                close(batch->fs_fd);
        pthread_mutex_destroy(&batch->lock);
        pthread_mutex_destroy(&batch->flushing);
}

uint64_t part_free_space(int fd)
{
        struct statvfs vfs;
        if (fstatvfs(fd, &vfs) < 0)
                return UINT64_MAX;
        return (uint64_t)vfs.f_bavail * vfs.f_frsize;
}
