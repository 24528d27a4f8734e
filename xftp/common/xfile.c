/* The plain-descriptor file of the pipeline: pread/pwrite on the caller's descriptor, and
 * with XFTP_XFILE_DIRECT pieces aligned in memory, offset and length through an O_DIRECT
 * twin of it.
 *
 * Measured on this machine's disk (1 GiB, 4 MiB pieces, caches dropped, alternating pairs
 * under the bench lock): buffered reads with the disk's 8 MiB readahead 675-930 MB/s
 * against 370-625 for O_DIRECT reads one at a time, so a sender is best without the flag;
 * and xftp get to durable at 473-572 MB/s with O_DIRECT writes against 427-505 with
 * buffered writes whose writeback starts at once (sync_file_range, eight writes deep),
 * ahead in all six pairs, so a receiver is best with it. */
#include "xfer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dragstrip/error.h>

#define DIRECT_ALIGN 4096u /* covers 512-byte and 4 KiB sectors alike */
/* A write shorter than this goes through the page cache even when aligned: a small
 * upload's O_DIRECT write waited for the disk (180 us for 64 KiB here) only for the write
 * out before its commit to wait for the disk once more. */
#define DIRECT_WRITE_MIN (1u << 20)

#define DIRECT_NOT_YET (-2) /* direct_fd asked for, not opened yet */

static bool aligned(const void *buf, size_t len, uint64_t offset)
{
        return ((uintptr_t)buf | len | offset) % DIRECT_ALIGN == 0;
}

/* The O_DIRECT twin, opened by the first piece that can go through it: a small upload (a
 * tree's file) never has one, and spares its open and close. The pipeline's threads may
 * race here; one descriptor wins, the others are closed. Returns it, or fd where the twin
 * is not asked for or refused (tmpfs). */
static int direct_or_plain(struct xftp_xfile *file)
{
        int twin = __atomic_load_n(&file->direct_fd, __ATOMIC_ACQUIRE);

        if (twin == DIRECT_NOT_YET) {
                /* A second open of the same inode: O_DIRECT on fd itself would also govern
                 * the unaligned tail, which O_DIRECT refuses. */
                char path[32];
                int access = fcntl(file->fd, F_GETFL);
                snprintf(path, sizeof(path), "/proc/self/fd/%d", file->fd);
                int opened =
                    access < 0 ? -1 : open(path, (access & O_ACCMODE) | O_DIRECT | O_CLOEXEC);
                int expected = DIRECT_NOT_YET;
                twin = opened;
                if (!__atomic_compare_exchange_n(&file->direct_fd, &expected, twin, false,
                                                 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
                        if (opened >= 0)
                                close(opened);
                        twin = expected;
                }
        }
        return twin >= 0 ? twin : file->fd;
}

static ssize_t plain_read_at(struct xftp_xfile *file, void *buf, size_t len, uint64_t offset)
{
        int fd = aligned(buf, len, offset) ? direct_or_plain(file) : file->fd;
        size_t done = 0;

        while (done < len) {
                ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(offset + done));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        break;
                done += (size_t)n;
                if (done % DIRECT_ALIGN != 0)
                        fd = file->fd; /* a short direct read: the rest is the tail */
        }
        return (ssize_t)done;
}

static int plain_write_at(struct xftp_xfile *file, const void *buf, size_t len, uint64_t offset)
{
        int fd =
            len >= DIRECT_WRITE_MIN && aligned(buf, len, offset) ? direct_or_plain(file) : file->fd;
        size_t done = 0;

        while (done < len) {
                ssize_t n =
                    pwrite(fd, (const char *)buf + done, len - done, (off_t)(offset + done));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return -EIO;
                done += (size_t)n;
                if (done % DIRECT_ALIGN != 0)
                        fd = file->fd;
        }
        return 0;
}

static int plain_size(struct xftp_xfile *file, uint64_t *size)
{
        struct stat st;
        if (fstat(file->fd, &st) < 0)
                return -errno;
        *size = (uint64_t)st.st_size;
        return 0;
}

static int plain_sync(struct xftp_xfile *file)
{
        return fsync(file->fd) < 0 ? -errno : 0;
}

static const struct xftp_xfile_ops plain_ops = {
    .read_at = plain_read_at,
    .write_at = plain_write_at,
    .size = plain_size,
    .sync = plain_sync,
};

int xftp_xfile_plain(struct xftp_xfile *file, int fd, unsigned flags, struct ds_error *err)
{
        *file = (struct xftp_xfile){.ops = &plain_ops, .fd = fd, .direct_fd = -1};
        if (fcntl(fd, F_GETFL) < 0)
                return ds_fail(err, -errno, "descriptor %d", fd);
        if (flags & XFTP_XFILE_DIRECT)
                file->direct_fd = DIRECT_NOT_YET;
        return 0;
}

void xftp_xfile_plain_close(struct xftp_xfile *file)
{
        if (file->direct_fd >= 0)
                close(file->direct_fd);
        file->direct_fd = -1;
}
