/* The store: canonical paths, and the operations every backend shares, dispatched through
 * the backend's table (store_dir.c, store_stripe.c). */
#include "store.h"
#include "store_int.h"

#include <dragstrip/clock.h>
#include <dragstrip/error.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int store_openat2(int dirfd, const char *path, int flags, unsigned mode)
{
        struct open_how how = {
            .flags = (uint64_t)(flags | O_CLOEXEC),
            .mode = flags & O_CREAT ? mode : 0,
            .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
        };
        long fd;

        /* EAGAIN: a rename anywhere in the system raced a ".." in the walk (a symbolic link
         * such as ../f) and the kernel could not prove it stayed beneath; it asks for a
         * retry, which a loaded machine needs now and then. */
        for (int tries = 0;; tries++) {
                fd = syscall(SYS_openat2, dirfd, *path ? path : ".", &how, sizeof(how));
                if (fd >= 0 || (errno != EINTR && (errno != EAGAIN || tries >= 1000)))
                        break;
        }
        return fd < 0 ? -errno : (int)fd;
}

const char *store_split(const char *path, char *parent, size_t len)
{
        const char *slash = strrchr(path, '/');
        size_t n = slash ? (size_t)(slash - path) : 0;

        if (len == 0)
                return slash ? slash + 1 : path;
        if (n >= len)
                n = len - 1;
        memcpy(parent, path, n);
        parent[n] = '\0';
        return slash ? slash + 1 : path;
}

bool store_own_name(const char *name)
{
        return strncmp(name, XFTP_STORE_OWN_PREFIX, strlen(XFTP_STORE_OWN_PREFIX)) == 0;
}

/* Appends one component to out (length *used), folding "." and "..". */
static int path_push(char *out, size_t len, size_t *used, const char *part, size_t n)
{
        if (n == 0 || (n == 1 && part[0] == '.'))
                return 0;
        if (n == 2 && part[0] == '.' && part[1] == '.') {
                char *slash = memrchr(out, '/', *used);
                *used = slash ? (size_t)(slash - out) : 0;
                out[*used] = '\0';
                return 0;
        }
        size_t need = *used + (*used ? 1 : 0) + n;
        if (need + 1 > len)
                return -ENAMETOOLONG;
        if (*used)
                out[(*used)++] = '/';
        memcpy(out + *used, part, n);
        *used = need;
        out[*used] = '\0';
        return 0;
}

static int path_append(char *out, size_t len, size_t *used, const char *text)
{
        while (*text) {
                const char *end = strchrnul(text, '/');
                int rc = path_push(out, len, used, text, (size_t)(end - text));
                if (rc < 0)
                        return rc;
                text = *end ? end + 1 : end;
        }
        return 0;
}

int xftp_store_path(const char *cwd, const char *arg, char *out, size_t len)
{
        size_t used = 0;

        if (len == 0)
                return -ENAMETOOLONG;
        out[0] = '\0';
        for (const unsigned char *p = (const unsigned char *)arg; *p; p++)
                if (*p < 0x20 || *p == 0x7f)
                        return -EINVAL;
        int rc = arg[0] == '/' ? 0 : path_append(out, len, &used, cwd);
        if (rc == 0)
                rc = path_append(out, len, &used, arg);
        if (rc < 0)
                return rc;
        for (const char *part = out; *part; part = strchrnul(part, '/'), part += *part == '/')
                if (store_own_name(part))
                        return -EPERM;
        return 0;
}

int xftp_store_open(struct xftp_store **out, const char *roots, unsigned flags, const char *what,
                    struct ds_error *err)
{
        return strchr(roots, ',') ? store_stripe_open(out, roots, what, err)
                                  : store_dir_open(out, roots, flags, what, err);
}

void xftp_store_close(struct xftp_store *store)
{
        if (store)
                store->ops->close(store);
}

unsigned xftp_store_width(const struct xftp_store *store)
{
        return store->width;
}

int xftp_store_stat(struct xftp_store *store, const char *path, struct xftp_store_stat *st)
{
        return store->ops->stat(store, path, st);
}

int xftp_store_list(struct xftp_store *store, const char *path, xftp_store_list_fn fn, void *ctx)
{
        return store->ops->list(store, path, fn, ctx);
}

int xftp_store_set_mtime(struct xftp_store *store, const char *path, int64_t sec, long nsec)
{
        return store->ops->set_mtime(store, path, sec, nsec);
}

int xftp_store_mkdir(struct xftp_store *store, const char *path)
{
        return *path ? store->ops->mkdir(store, path) : -EEXIST;
}

int xftp_store_rmdir(struct xftp_store *store, const char *path)
{
        return *path ? store->ops->rmdir(store, path) : -EBUSY;
}

int xftp_store_unlink(struct xftp_store *store, const char *path)
{
        return *path ? store->ops->unlink(store, path) : -EISDIR;
}

int xftp_store_rename(struct xftp_store *store, const char *from, const char *to)
{
        if (!*from || !*to)
                return -EBUSY;
        return store->ops->rename(store, from, to);
}

int xftp_store_open_read(struct xftp_store *store, const char *path, struct xftp_store_file **out)
{
        return store->ops->open_read(store, path, out);
}

int xftp_store_create(struct xftp_store *store, const char *path,
                      const struct xftp_store_upload *how, struct xftp_store_file **out)
{
        if (!*path)
                return -EISDIR;
        return store->ops->create(store, path, how, out);
}

uint64_t xftp_store_upload_start(const struct xftp_store_file *file)
{
        return file->start;
}

int xftp_store_upload_prefix(struct xftp_store_file *file, uint64_t prefix_end)
{
        return file->store->ops->prefix ? file->store->ops->prefix(file, prefix_end) : 0;
}

int xftp_store_write_out(struct xftp_store_file *file)
{
        return file->store->ops->write_out ? file->store->ops->write_out(file) : 0;
}

int xftp_store_commit(struct xftp_store_file *file)
{
        return file->store->ops->commit(file);
}

int xftp_store_pay(struct xftp_store_owed *owed)
{
        if (owed->dir_fd < 0)
                return 0;
        int rc = fsync(owed->dir_fd) < 0 ? -errno : 0;
        close(owed->dir_fd);
        *owed = XFTP_STORE_OWED_NONE;
        return rc;
}

int xftp_store_owe(struct xftp_store_file *file, struct xftp_store_owed *owed)
{
        struct stat sb;
        int dir_fd = file->store->ops->commit_dir ? file->store->ops->commit_dir(file) : -1;

        if (dir_fd < 0)
                return 0;
        if (fstat(dir_fd, &sb) < 0) /* a directory it cannot tell apart: paid at once */
                return xftp_store_pay(&(struct xftp_store_owed){.dir_fd = dir_fd});
        if (owed->dir_fd >= 0 && owed->dev == (uint64_t)sb.st_dev &&
            owed->ino == (uint64_t)sb.st_ino) {
                close(dir_fd); /* the one fsync owed covers this rename too */
                return 0;
        }
        int rc = xftp_store_pay(owed);
        *owed = (struct xftp_store_owed){
            .dir_fd = dir_fd, .dev = sb.st_dev, .ino = sb.st_ino, .since_ns = ds_now_ns()};
        return rc;
}

bool xftp_store_file_close(struct xftp_store_file *file, bool keep)
{
        return file && file->store->ops->file_close(file, keep);
}

struct xftp_xfile *xftp_store_xfile(struct xftp_store_file *file)
{
        return &file->xfile;
}

int xftp_store_partial_size(struct xftp_store *store, const char *user, const char *path,
                            uint64_t *size)
{
        if (!store->ops->partial_size || !*path)
                return -ENOENT;
        return store->ops->partial_size(store, user, path, size);
}
