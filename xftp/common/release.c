/* Dropping a replaced file's last reference apart from the session (release.h). */
#include "release.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <linux/magic.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

/* One thread at a time: a run of big replacements frees one file apart and the next in
 * line, so no more than two are ever held at once. */
static atomic_bool busy;

/* Where an open file of a removed name costs nothing more: a network file system instead
 * keeps it under a name of its own (NFS's .nfsXXXX) until it closes. */
static bool frees_on_close(int dir_fd)
{
        struct statfs fs;
        if (fstatfs(dir_fd, &fs) < 0)
                return false;
        switch ((unsigned long)fs.f_type) {
        case EXT4_SUPER_MAGIC:
        case XFS_SUPER_MAGIC:
        case BTRFS_SUPER_MAGIC:
        case TMPFS_MAGIC:
                return true;
        default:
                return false;
        }
}

int xftp_release_hold(int dir_fd, const char *leaf)
{
        struct stat sb;
        if (fstatat(dir_fd, leaf, &sb, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(sb.st_mode) ||
            sb.st_nlink != 1 || (uint64_t)sb.st_blocks * 512 < XFTP_RELEASE_APART ||
            !frees_on_close(dir_fd))
                return -1;
        return openat(dir_fd, leaf, O_PATH | O_NOFOLLOW | O_CLOEXEC);
}

static void *release(void *arg)
{
        close((int)(intptr_t)arg);
        atomic_store(&busy, false);
        return NULL;
}

void xftp_release_later(int fd)
{
        pthread_t thread;
        pthread_attr_t attr;

        if (fd < 0)
                return;
        if (atomic_exchange(&busy, true)) {
                close(fd);
                return;
        }
        bool started = pthread_attr_init(&attr) == 0;
        if (started) {
                pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
                started = pthread_create(&thread, &attr, release, (void *)(intptr_t)fd) == 0;
                pthread_attr_destroy(&attr);
        }
        if (!started) {
                close(fd);
                atomic_store(&busy, false);
        }
}
