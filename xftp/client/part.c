/* The partial file of a download.
 *
 * How much of it is whole is kept in its extended attribute user.xftp.whole as the data is
 * written (MODE E writes blocks out of order, so the file's size alone does not say), and
 * --resume continues from there. */
#include "part.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <dragstrip/error.h>

#define WHOLE_XATTR "user.xftp.whole"
#define PART_SUFFIX ".xftp-part"
#define PATH_ROOM   4096

int part_name(const char *local, char *out, size_t room)
{
        const char *slash = strrchr(local, '/');
        int n = slash ? snprintf(out, room, "%.*s/.%s%s", (int)(slash - local), local, slash + 1,
                                 PART_SUFFIX)
                      : snprintf(out, room, ".%s%s", local, PART_SUFFIX);
        return n > 0 && (size_t)n < room ? 0 : -ENAMETOOLONG;
}

void part_record_whole(uint64_t whole, void *ctx)
{
        char text[24];
        int n = snprintf(text, sizeof(text), "%llu", (unsigned long long)whole);
        fsetxattr(*(int *)ctx, WHOLE_XATTR, text, (size_t)n, 0); /* checked at open */
}

/* How much of a partial download is whole: the attribute if there is one (never more
 * than the file holds), else (a file written in order only) its size. */
static uint64_t whole_of(int fd, bool *marked)
{
        char text[24];
        struct stat st;
        ssize_t n = fgetxattr(fd, WHOLE_XATTR, text, sizeof(text) - 1);

        uint64_t size = fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
        *marked = n > 0;
        if (n <= 0)
                return size;
        text[n] = '\0';
        uint64_t whole = strtoull(text, NULL, 10);
        return whole < size ? whole : size; /* the file may have been cut since */
}

int part_open(const char *part, bool resume, uint64_t *offset, bool *marks, struct ds_error *err)
{
        bool marked = false;
        int fd = open(part, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

        *offset = 0;
        if (fd < 0 && errno == EEXIST) {
                fd = open(part, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
                if (fd < 0)
                        return ds_fail(err, -errno, "%s", part);
                uint64_t whole = whole_of(fd, &marked);
                if (resume) {
                        *offset = whole;
                } else if (!marked) {
                        close(fd);
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
        }
        part_record_whole(*offset, &fd);
        *marks = whole_of(fd, &marked) == *offset && marked;
        return fd;
}

int part_commit(int fd, const char *part, const char *local, uint64_t size, struct ds_error *err)
{
        if (ftruncate(fd, (off_t)size) < 0)
                return ds_fail(err, -errno, "%s", part);
        /* Written 0600 while partial; complete, it gets the mode cp would give a new file. */
        mode_t mask = umask(0);
        umask(mask);
        if (fchmod(fd, 0666 & ~mask) < 0)
                return ds_fail(err, -errno, "chmod %s", part);
        if (fsync(fd) < 0)
                return ds_fail(err, -errno, "fsync %s", part);
        fremovexattr(fd, WHOLE_XATTR);
        if (rename(part, local) < 0)
                return ds_fail(err, -errno, "rename %s to %s", part, local);
        char dir[PATH_ROOM];
        snprintf(dir, sizeof(dir), "%s", local);
        int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
                fsync(dfd); /* the rename itself durable; a failure here loses no data */
                close(dfd);
        }
        return 0;
}

uint64_t part_unknown_size_bound(int fd)
{
        struct statvfs vfs;
        if (fstatvfs(fd, &vfs) < 0)
                return UINT64_MAX;
        uint64_t free_bytes = (uint64_t)vfs.f_bavail * vfs.f_frsize;
        return free_bytes - free_bytes / 16;
}
