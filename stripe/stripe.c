/* Striped file lifecycle: create, open (with every member checked), headers, commit,
 * fsync, truncate, close. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <dragstrip/stop.h>

#include "stripe_int.h"

#define LOCK_WAIT_MS 30000u /* the longest wait for the commit lock */

const char *stripe_hex_id(char out[2 * DS_STRIPE_SET_ID_SIZE + 1], const uint8_t *id)
{
        for (unsigned i = 0; i < DS_STRIPE_SET_ID_SIZE; i++)
                snprintf(out + 2 * i, 3, "%02x", id[i]);
        return out;
}

char *stripe_join(const char *dir, const char *prefix, const char *name)
{
        char *path;

        if (asprintf(&path, "%s/%s%s", dir, prefix, name) < 0)
                return NULL;
        return path;
}

char *stripe_tmp_path(const char *dir, const uint8_t *set_id, const char *name)
{
        char id[2 * DS_STRIPE_SET_ID_SIZE + 1], prefix[64];

        snprintf(prefix, sizeof(prefix), "%s%s.", DS_STRIPE_TMP_PREFIX, stripe_hex_id(id, set_id));
        return stripe_join(dir, prefix, name);
}

int stripe_lock(const char *dir0, int op, struct ds_error *err)
{
        int fd = open(dir0, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        unsigned step_us = 100;

        if (fd < 0)
                return ds_fail(err, -errno, "open directory %s to lock it", dir0);
        /* Holders keep it for a few renames or opens and one directory fsync, so short
         * polls wait little. The wait still ends on a stop, and after LOCK_WAIT_MS: what
         * holds it that long is no commit but someone keeping the directory locked. */
        for (uint64_t waited_us = 0;; waited_us += step_us) {
                int rc = flock(fd, op | LOCK_NB) == 0 ? 0 : -errno;
                if (rc == 0)
                        return fd;
                if (rc != -EWOULDBLOCK && rc != -EINTR)
                        rc = ds_fail(err, rc, "lock directory %s", dir0);
                else if (ds_stopping())
                        rc = stripe_reject(err, -EINTR, "stopped waiting for the lock of %s", dir0);
                else if (waited_us >= LOCK_WAIT_MS * 1000ull)
                        rc = stripe_reject(err, -ETIMEDOUT, "%s stayed locked for %u s", dir0,
                                           LOCK_WAIT_MS / 1000);
                else
                        rc = 0;
                if (rc != 0) {
                        close(fd);
                        return rc;
                }
                nanosleep(&(struct timespec){.tv_nsec = (long)step_us * 1000}, NULL);
                step_us = step_us < 5000 ? 2 * step_us : 10000;
        }
}

void stripe_unlock(int lock_fd)
{
        if (lock_fd >= 0)
                close(lock_fd);
}

int ds_stripe_lock(const char *dir0, bool exclusive, struct ds_error *err)
{
        return stripe_lock(dir0, exclusive ? LOCK_EX : LOCK_SH, err);
}

void ds_stripe_unlock(int lock_fd)
{
        stripe_unlock(lock_fd);
}

/* A FIFO or a device under a member's name must neither block the open nor be read:
 * O_NONBLOCK keeps open() from waiting for a FIFO's writer, fstat() refuses the rest. */
int stripe_open_entry(const char *path, int flags)
{
        struct stat st;
        int fd = open(path, flags | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) != 0) {
                int rc = -errno;
                close(fd);
                return rc;
        }
        if (!S_ISREG(st.st_mode)) {
                close(fd);
                return -STRIPE_ENOTREG;
        }
        return fd;
}

/* One directory per disk: two entries naming the same directory would put two members in
 * one file, so they are refused by identity, not by spelling. */
int ds_stripe_check_dirs(const char *const *dirs, unsigned ndirs, struct ds_error *err)
{
        struct stat seen[DS_STRIPE_MAX_WIDTH];

        if (ndirs < 1 || ndirs > DS_STRIPE_MAX_WIDTH)
                return stripe_reject(err, -EINVAL, "%u directories: expected 1 to %u", ndirs,
                                     DS_STRIPE_MAX_WIDTH);
        for (unsigned i = 0; i < ndirs; i++) {
                if (stat(dirs[i], &seen[i]) != 0)
                        return ds_fail(err, -errno, "directory %s", dirs[i]);
                if (!S_ISDIR(seen[i].st_mode))
                        return stripe_reject(err, -ENOTDIR, "%s is not a directory", dirs[i]);
                for (unsigned j = 0; j < i; j++)
                        if (seen[j].st_dev == seen[i].st_dev && seen[j].st_ino == seen[i].st_ino)
                                return stripe_reject(err, -EINVAL,
                                                     "%s and %s are the same directory: one "
                                                     "directory per disk",
                                                     dirs[j], dirs[i]);
        }
        return 0;
}

static struct ds_stripe *stripe_alloc(unsigned ndirs, const struct ds_stripe_options *options)
{
        struct ds_stripe *stripe =
            calloc(1, sizeof(*stripe) + ndirs * sizeof(struct stripe_member));

        if (!stripe)
                return NULL;
        stripe->width = ndirs;
        stripe->flags = options ? options->flags : 0;
        stripe->live = options ? options->live : NULL;
        stripe->stop = options ? options->stop : NULL;
        stripe->mem_budget =
            options && options->mem_budget ? options->mem_budget : ds_stripe_default_budget();
        stripe->depth = options && options->depth ? options->depth : DEFAULT_DEPTH;
        stripe->checksums = !(stripe->flags & DS_STRIPE_NO_CHECKSUM);
        stripe->slots = calloc(stripe->depth, sizeof(*stripe->slots));
        if (!stripe->slots) {
                free(stripe);
                return NULL;
        }
        pthread_mutex_init(&stripe->done_lock, NULL);
        pthread_cond_init(&stripe->done_cond, NULL);
        for (unsigned i = 0; i < ndirs; i++) {
                stripe->members[i].stripe = stripe;
                stripe->members[i].index = i;
                stripe->members[i].fd = -1;
                stripe->members[i].fd_direct = -1;
        }
        return stripe;
}

void stripe_free(struct ds_stripe *stripe)
{
        for (unsigned i = 0; i < stripe->width; i++) {
                struct stripe_member *m = &stripe->members[i];
                if (m->fd >= 0)
                        close(m->fd);
                if (m->fd_direct >= 0)
                        close(m->fd_direct);
                free(m->path);
                free(m->tmp_path);
        }
        free(stripe->lock_dir);
        pthread_mutex_destroy(&stripe->done_lock);
        pthread_cond_destroy(&stripe->done_cond);
        free(stripe->slots);
        free(stripe);
}

/* The O_DIRECT descriptor beside the ordinary one, checked to be the same file; EINVAL
 * means the filesystem refuses O_DIRECT (tmpfs), which leaves the member buffered rather
 * than failing. */
static int open_direct(struct stripe_member *m, const char *path, int oflags, struct ds_error *err)
{
        struct stat a, b;

        if (m->stripe->flags & DS_STRIPE_NO_DIRECT)
                return 0;
        m->fd_direct = open(path, oflags | O_DIRECT | O_NONBLOCK | O_CLOEXEC);
        if (m->fd_direct < 0 && errno == EINVAL) {
                m->direct_refused = true;
                return 0;
        }
        if (m->fd_direct < 0)
                return ds_fail(err, -errno, "member %u: open %s with O_DIRECT", m->index, path);
        if (fstat(m->fd, &a) != 0 || fstat(m->fd_direct, &b) != 0)
                return ds_fail(err, -errno, "member %u: fstat %s", m->index, path);
        if (a.st_dev != b.st_dev || a.st_ino != b.st_ino)
                return stripe_reject(err, -ESTALE, "member %u: %s was replaced while opening it",
                                     m->index, path);
        return 0;
}

static void remove_temporaries(struct ds_stripe *stripe)
{
        for (unsigned i = 0; i < stripe->width; i++)
                if (stripe->members[i].tmp_path && stripe->members[i].fd >= 0)
                        unlink(stripe->members[i].tmp_path);
}

/* What opening and creating share: a valid name over usable directories, and the struct. */
static int stripe_new(struct ds_stripe **out, const char *const *dirs, unsigned ndirs,
                      const char *name, const struct ds_stripe_options *options,
                      struct ds_error *err)
{
        int rc;

        if ((rc = ds_stripe_name_check(name, err)) != 0 ||
            (rc = ds_stripe_check_dirs(dirs, ndirs, err)) != 0)
                return rc;
        *out = stripe_alloc(ndirs, options);
        if (*out && !((*out)->lock_dir = strdup(dirs[0]))) {
                stripe_free(*out);
                *out = NULL;
        }
        if (!*out)
                return ds_fail(err, -ENOMEM, "allocate a striped file of %u members", ndirs);
        return 0;
}

int ds_stripe_create(struct ds_stripe **out, const char *const *dirs, unsigned ndirs,
                     const char *name, const struct ds_stripe_options *options,
                     struct ds_error *err)
{
        struct ds_stripe *stripe;
        int lock = -1, rc;

        if ((rc = stripe_new(&stripe, dirs, ndirs, name, options, err)) != 0)
                return rc;
        /* What a crash left of earlier puts of this name goes first: committed members are
         * put in place, uncommitted ones removed. The lock also covers the members' creation
         * up to their own locks, so no sweep takes a new member for a leftover. */
        if ((rc = lock = stripe_lock(dirs[0], LOCK_EX, err)) < 0 ||
            (rc = stripe_sweep(dirs, ndirs, name, NULL, NULL, err)) < 0)
                goto fail;
        stripe->layout.width = ndirs;
        stripe->layout.unit = options && options->unit ? options->unit : DS_STRIPE_DEFAULT_UNIT;
        stripe->created = stripe->writable = stripe->dirty = true;
        if (!ds_stripe_layout_valid(&stripe->layout)) {
                rc = stripe_reject(err, -EINVAL, "unit %llu: expected a multiple of 4K up to 1G",
                                   (unsigned long long)stripe->layout.unit);
                goto fail;
        }
        if (getrandom(stripe->set_id, sizeof(stripe->set_id), 0) != sizeof(stripe->set_id)) {
                rc = ds_fail(err, -EIO, "getrandom for the set id");
                goto fail;
        }
        for (unsigned i = 0; i < ndirs; i++) {
                struct stripe_member *m = &stripe->members[i];

                m->path = stripe_join(dirs[i], "", name);
                m->tmp_path = stripe_tmp_path(dirs[i], stripe->set_id, name);
                if (!m->path || !m->tmp_path) {
                        rc = ds_fail(err, -ENOMEM, "member path");
                        goto fail;
                }
                if (!(stripe->flags & DS_STRIPE_REPLACE) && access(m->path, F_OK) == 0) {
                        rc =
                            stripe_reject(err, -EEXIST, "'%s' is taken (%s exists)", name, m->path);
                        goto fail;
                }
                m->fd = open(m->tmp_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
                if (m->fd < 0) {
                        rc = ds_fail(err, -errno, "member %u: create %s", i, m->tmp_path);
                        goto fail;
                }
                /* The lock says "in use" to a sweep, which removes only unlocked leftovers. */
                if (flock(m->fd, LOCK_EX | LOCK_NB) != 0) {
                        rc = ds_fail(err, -errno, "member %u: lock %s", i, m->tmp_path);
                        goto fail;
                }
                if ((rc = open_direct(m, m->tmp_path, O_RDWR, err)) != 0)
                        goto fail;
                data_crc_reset(&m->written);
                data_crc_reset(&m->read);
                m->written.ok = stripe->checksums;
        }
        stripe_unlock(lock);
        lock = -1;
        if ((rc = stripe_write_headers(stripe, err)) != 0)
                goto fail;
        *out = stripe;
        return 0;
fail:
        stripe_unlock(lock);
        remove_temporaries(stripe);
        stripe_free(stripe);
        return rc;
}

static int read_header(struct stripe_member *m, struct ds_error *err)
{
        uint8_t block[DS_STRIPE_HEADER_SIZE];
        const char *why;
        ssize_t n;

        do
                n = pread(m->fd, block, sizeof(block), 0);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return ds_fail(err, -errno, "member %u (%s): read header", m->index, m->path);
        if (ds_stripe_header_decode(block, (size_t)n, &m->header, &why) != 0)
                return stripe_reject(err, -EINVAL, "member %u (%s): bad header: %s", m->index,
                                     m->path, why);
        return 0;
}

/* Everything that ties member i to member 0 and to the directory it was found in. */
static int check_member(struct ds_stripe *stripe, struct stripe_member *m, struct ds_error *err)
{
        const struct ds_stripe_header *h = &m->header, *first = &stripe->members[0].header;
        uint64_t expect;
        struct stat st;

        if (h->width != stripe->width)
                return stripe_reject(err, -EINVAL,
                                     "member %u (%s): the file is striped over %u directories, "
                                     "%u given",
                                     m->index, m->path, h->width, stripe->width);
        if (h->member != m->index)
                return stripe_reject(
                    err, -EINVAL, "member %u (%s) holds member %u (directories in another order?)",
                    m->index, m->path, h->member);
        if (memcmp(h->set_id, first->set_id, DS_STRIPE_SET_ID_SIZE) != 0)
                return stripe_reject(
                    err, -EINVAL,
                    "member %u (%s) belongs to another striped file (set id differs "
                    "from member 0's)",
                    m->index, m->path);
        if (h->unit != first->unit || h->file_size != first->file_size)
                return stripe_reject(err, -EINVAL,
                                     "member %u (%s) disagrees with member 0 on unit or size",
                                     m->index, m->path);
        if (fstat(m->fd, &st) != 0)
                return ds_fail(err, -errno, "member %u (%s): fstat", m->index, m->path);
        expect = ds_stripe_member_bytes(&stripe->layout, m->index, h->file_size);
        if ((uint64_t)st.st_size != DS_STRIPE_HEADER_SIZE + expect)
                return stripe_reject(
                    err, -EINVAL, "member %u (%s): %s: %llu data bytes, the layout says %llu",
                    m->index, m->path,
                    (uint64_t)st.st_size < DS_STRIPE_HEADER_SIZE + expect ? "truncated"
                                                                          : "too long",
                    (unsigned long long)(st.st_size - DS_STRIPE_HEADER_SIZE),
                    (unsigned long long)expect);
        return 0;
}

/* Opens path as member m and reads its header. */
static int open_as(struct stripe_member *m, const char *path, int oflags, struct ds_error *err)
{
        m->fd = stripe_open_entry(path, oflags);
        if (m->fd == -STRIPE_ENOTREG) {
                m->fd = -1;
                return stripe_reject(err, -EINVAL, "member %u of %u: %s is not a regular file",
                                     m->index, m->stripe->width, path);
        }
        if (m->fd < 0) {
                int rc = m->fd;
                m->fd = -1;
                return ds_fail(err, rc, "member %u of %u: %s", m->index, m->stripe->width, path);
        }
        return read_header(m, err);
}

static void close_member(struct stripe_member *m)
{
        if (m->fd >= 0)
                close(m->fd);
        m->fd = -1;
}

/* Member 0 is the commit point: once it holds a set, the other members of that set are
 * the file's even while a commit cut short leaves them under their temporary names. Such
 * a member is used where it is, and put in place when the file is opened for writing. */
static int open_uncommitted(struct ds_stripe *stripe, struct stripe_member *m, const char *dir,
                            const char *name, int oflags)
{
        struct ds_error ignored;
        char *tmp = stripe_tmp_path(dir, stripe->set_id, name);

        if (!tmp)
                return -ENOMEM;
        close_member(m);
        if (open_as(m, tmp, oflags, &ignored) != 0 || check_member(stripe, m, &ignored) != 0) {
                close_member(m);
                free(tmp);
                return -ENOENT;
        }
        if (stripe->writable && rename(tmp, m->path) == 0) {
                free(tmp);
                return 0;
        }
        m->tmp_path = tmp;
        return 0;
}

static int open_member(struct ds_stripe *stripe, unsigned i, const char *dir, const char *name,
                       struct ds_error *err)
{
        struct stripe_member *m = &stripe->members[i];
        int oflags = stripe->writable ? O_RDWR : O_RDONLY;
        int rc;

        m->path = stripe_join(dir, "", name);
        if (!m->path)
                return ds_fail(err, -ENOMEM, "member path");
        /* Twice: a commit may rename the temporary member into place between the looks. */
        for (int attempt = 0; attempt < 2; attempt++) {
                rc = open_as(m, m->path, oflags, err);
                if (rc == 0 && i == 0) {
                        stripe->layout.width = m->header.width;
                        stripe->layout.unit = m->header.unit;
                        stripe->size = m->header.file_size;
                        memcpy(stripe->set_id, m->header.set_id, DS_STRIPE_SET_ID_SIZE);
                }
                if (rc == 0)
                        rc = check_member(stripe, m, err);
                if (rc == 0 || i == 0)
                        break;
                if (open_uncommitted(stripe, m, dir, name, oflags) == 0) {
                        rc = 0;
                        break;
                }
        }
        if (rc != 0)
                return rc;
        m->written.ok = (m->header.flags & DS_STRIPE_DATA_CRC) != 0;
        m->written.crc = m->header.data_crc;
        m->written.next = ds_stripe_member_bytes(&stripe->layout, i, stripe->size);
        data_crc_reset(&m->read);
        return open_direct(m, m->tmp_path ? m->tmp_path : m->path, oflags, err);
}

/* Opens the members of name under a lock the caller holds (or none, see stripe_probe). */
static int probe_members(struct ds_stripe *stripe, const char *const *dirs, unsigned ndirs,
                         const char *name, struct ds_error *err)
{
        unsigned missing = 0;
        int rc;

        for (unsigned i = 0; i < ndirs; i++) {
                char *path = stripe_join(dirs[i], "", name);
                if (path && access(path, F_OK) != 0 && errno == ENOENT)
                        missing++;
                free(path);
        }
        if (missing == ndirs)
                return stripe_reject(err, -ENOENT, "no striped file '%s' in these directories",
                                     name);
        for (unsigned i = 0; i < ndirs; i++)
                if ((rc = open_member(stripe, i, dirs[i], name, err)) != 0)
                        return rc;
        return 0;
}

static int probe(struct ds_stripe **out, const char *const *dirs, unsigned ndirs, const char *name,
                 const struct ds_stripe_options *options, bool lock_held, struct ds_error *err)
{
        struct ds_stripe *stripe;
        int lock = -1, rc;

        if ((rc = stripe_new(&stripe, dirs, ndirs, name, options, err)) != 0)
                return rc;
        stripe->writable = (stripe->flags & DS_STRIPE_WRITE) != 0;
        /* Every member opened under one lock belongs to one commit; a writer may rename
         * members into place, so it takes the lock as a commit does. A directory this user
         * may not read cannot be locked: it is opened as before, unguarded. */
        if (!lock_held &&
            (lock = stripe_lock(dirs[0], stripe->writable ? LOCK_EX : LOCK_SH, err)) < 0 &&
            lock != -EACCES) {
                stripe_free(stripe);
                return lock;
        }
        rc = probe_members(stripe, dirs, ndirs, name, err);
        stripe_unlock(lock);
        if (rc != 0) {
                stripe_free(stripe);
                return rc;
        }
        *out = stripe;
        return 0;
}

int stripe_probe(struct ds_stripe **out, const char *const *dirs, unsigned ndirs, const char *name,
                 const struct ds_stripe_options *options, struct ds_error *err)
{
        return probe(out, dirs, ndirs, name, options, false, err);
}

int stripe_probe_held(struct ds_stripe **out, const char *const *dirs, unsigned ndirs,
                      const char *name, const struct ds_stripe_options *options,
                      struct ds_error *err)
{
        return probe(out, dirs, ndirs, name, options, true, err);
}

int ds_stripe_open(struct ds_stripe **out, const char *const *dirs, unsigned ndirs,
                   const char *name, const struct ds_stripe_options *options, struct ds_error *err)
{
        return stripe_probe(out, dirs, ndirs, name, options, err);
}

int stripe_write_headers(struct ds_stripe *stripe, struct ds_error *err)
{
        uint8_t block[DS_STRIPE_HEADER_SIZE];

        for (unsigned i = 0; i < stripe->width; i++) {
                struct stripe_member *m = &stripe->members[i];
                uint64_t bytes = ds_stripe_member_bytes(&stripe->layout, i, stripe->size);
                struct ds_stripe_header h = {
                    .width = stripe->width,
                    .member = i,
                    .unit = stripe->layout.unit,
                    .file_size = stripe->size,
                    .flags = m->written.ok && m->written.next == bytes ? DS_STRIPE_DATA_CRC : 0,
                    .data_crc = m->written.crc,
                };

                memcpy(h.set_id, stripe->set_id, DS_STRIPE_SET_ID_SIZE);
                ds_stripe_header_encode(&h, block);
                if (pwrite(m->fd, block, sizeof(block), 0) != (ssize_t)sizeof(block))
                        return ds_fail(err, errno ? -errno : -EIO, "member %u (%s): write header",
                                       i, m->tmp_path ? m->tmp_path : m->path);
                /* Writes past the end of the file leave other members short; holes make
                 * every member as long as the layout says. */
                if (ftruncate(m->fd, (off_t)(DS_STRIPE_HEADER_SIZE + bytes)) != 0)
                        return ds_fail(err, -errno, "member %u: set length", i);
                m->header = h;
        }
        stripe->dirty = false;
        return 0;
}

static int idle(struct ds_stripe *stripe, const char *what, struct ds_error *err)
{
        for (unsigned i = 0; i < stripe->depth; i++)
                if (stripe->slots[i].busy)
                        return stripe_reject(err, -EBUSY, "%s with submits in flight", what);
        return 0;
}

static int sync_members(struct ds_stripe *stripe, enum stripe_sync what, struct ds_error *err)
{
        int rc;

        if ((rc = idle(stripe, "fsync", err)) != 0)
                return rc;
        if (stripe->writable && stripe->dirty && (rc = stripe_write_headers(stripe, err)) != 0)
                return rc;
        return stripe_sync_all(stripe, what, err);
}

int ds_stripe_fsync(struct ds_stripe *stripe, struct ds_error *err)
{
        return sync_members(stripe, SYNC_FILE, err);
}

int stripe_sync_dir_of(const char *path, struct ds_error *err)
{
        char *dir = strdup(path);
        char *slash = dir ? strrchr(dir, '/') : NULL;
        int fd, rc = 0;

        if (!slash)
                return dir ? (free(dir), 0) : ds_fail(err, -ENOMEM, "path");
        *slash = '\0';
        fd = open(*dir ? dir : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 || fsync(fd) != 0)
                rc = ds_fail(err, -errno, "fsync directory %s", dir);
        if (fd >= 0)
                close(fd);
        free(dir);
        return rc;
}

/* The commit point is one rename: member 0 under its final name. Before it, a file
 * already under that name is whole and untouched; after it, the new one is, its other
 * members found under their temporary names (which member 0's set id names) until they
 * are renamed too. Every member and its directory entry is durable before the commit (all
 * disks syncing at once), member 0's new name right after it; the other renames need no
 * sync, since a crash that loses one leaves the temporary name readers look for. */
int ds_stripe_commit(struct ds_stripe *stripe, struct ds_error *err)
{
        unsigned flags = stripe->flags & DS_STRIPE_REPLACE ? 0 : RENAME_NOREPLACE;
        struct stripe_member *first = &stripe->members[0];
        int lock, rc;

        if (!stripe->created || stripe->committed)
                return stripe_reject(err, -EINVAL,
                                     "commit: the file was not created by this handle");
        stripe->dirty = true;
        if ((rc = sync_members(stripe, SYNC_FILE_AND_DIR, err)) != 0)
                return rc;
        /* The renames of one commit are one act: a second commit of the name would
         * otherwise interleave its renames with these and leave members of two sets. */
        if ((lock = stripe_lock(stripe->lock_dir, LOCK_EX, err)) < 0)
                return lock;
        if (renameat2(AT_FDCWD, first->tmp_path, AT_FDCWD, first->path, flags) != 0) {
                rc =
                    ds_fail(err, -errno, "member 0: rename %s to %s", first->tmp_path, first->path);
                stripe_unlock(lock);
                return rc;
        }
        stripe->committed = true;
        free(first->tmp_path);
        first->tmp_path = NULL;
        rc = stripe_sync_dir_of(first->path, err);
        for (unsigned i = 1; i < stripe->width; i++) {
                struct stripe_member *m = &stripe->members[i];

                /* ENOENT: a sweep of this name put the member in place first. */
                if (rc == 0 && renameat2(AT_FDCWD, m->tmp_path, AT_FDCWD, m->path, flags) != 0 &&
                    errno != ENOENT)
                        rc = ds_fail(err, -errno,
                                     "member %u: rename %s to %s (the file is committed; "
                                     "stripe fsck puts it in place)",
                                     i, m->tmp_path, m->path);
                if (rc == 0) {
                        free(m->tmp_path);
                        m->tmp_path = NULL;
                }
        }
        stripe_unlock(lock);
        return rc;
}

int ds_stripe_truncate(struct ds_stripe *stripe, uint64_t size, struct ds_error *err)
{
        int rc;

        if (!stripe->writable)
                return stripe_reject(err, -EBADF, "truncate: the striped file is open read-only");
        if (size > DS_STRIPE_MAX_SIZE)
                return stripe_reject(err, -EFBIG, "truncate to %llu: beyond the largest file",
                                     (unsigned long long)size);
        if ((rc = idle(stripe, "truncate", err)) != 0)
                return rc;
        for (unsigned i = 0; i < stripe->width; i++) {
                struct stripe_member *m = &stripe->members[i];
                uint64_t bytes = ds_stripe_member_bytes(&stripe->layout, i, size);

                if (bytes == 0)
                        data_crc_reset(&m->written);
                else if (bytes != ds_stripe_member_bytes(&stripe->layout, i, stripe->size))
                        m->written.ok = false;
                if (ftruncate(m->fd, (off_t)(DS_STRIPE_HEADER_SIZE + bytes)) != 0)
                        return ds_fail(err, -errno, "member %u: truncate", i);
        }
        stripe->size = size;
        stripe->dirty = true;
        return 0;
}

int ds_stripe_close(struct ds_stripe *stripe, struct ds_error *err)
{
        int rc = stripe_drain(stripe, err);

        if (stripe->created && !stripe->committed) {
                remove_temporaries(stripe);
        } else if (stripe->writable && stripe->dirty && rc == 0) {
                rc = ds_stripe_fsync(stripe, err);
        }
        stripe_engine_stop(stripe);
        for (unsigned i = 0; i < stripe->width; i++) {
                struct stripe_member *m = &stripe->members[i];
                if (m->fd_direct >= 0 && close(m->fd_direct) != 0 && rc == 0)
                        rc = ds_fail(err, -errno, "member %u: close", i);
                if (m->fd >= 0 && close(m->fd) != 0 && rc == 0)
                        rc = ds_fail(err, -errno, "member %u: close", i);
                m->fd = m->fd_direct = -1;
        }
        stripe_free(stripe);
        return rc;
}

void ds_stripe_stat(const struct ds_stripe *stripe, struct ds_stripe_info *info)
{
        memset(info, 0, sizeof(*info));
        info->layout = stripe->layout;
        info->size = stripe->size;
        memcpy(info->set_id, stripe->set_id, DS_STRIPE_SET_ID_SIZE);
        info->data_crc = true;
        info->buffered_member = -1;
        for (unsigned i = 0; i < stripe->width; i++) {
                const struct stripe_member *m = &stripe->members[i];
                uint64_t bytes = ds_stripe_member_bytes(&stripe->layout, i, stripe->size);
                bool has_crc = stripe->writable ? m->written.ok && m->written.next == bytes
                                                : (m->header.flags & DS_STRIPE_DATA_CRC) != 0;
                if (!has_crc)
                        info->data_crc = false;
                if (m->fd_direct >= 0)
                        info->direct++;
                else if (m->direct_refused && info->buffered_member < 0)
                        info->buffered_member = (int)i;
        }
}

const char *ds_stripe_member_path(const struct ds_stripe *stripe, unsigned member)
{
        if (member >= stripe->width)
                return NULL;
        return stripe->members[member].tmp_path ? stripe->members[member].tmp_path
                                                : stripe->members[member].path;
}
