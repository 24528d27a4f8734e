/* Dropping a replaced file's last reference apart from the session (release.h). */
#include "release.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

/* One thread at a time: a run of big replacements frees one file apart and the next in
 * line, so no more than two are ever held at once. */
static atomic_bool busy;

int xftp_release_hold(int dir_fd, const char *leaf)
{
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
        struct stat sb;
        pthread_t thread;
        pthread_attr_t attr;

        if (fd < 0)
                return;
        bool big = fstat(fd, &sb) == 0 && (uint64_t)sb.st_blocks * 512 >= XFTP_RELEASE_APART;
        if (!big || atomic_exchange(&busy, true)) {
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
