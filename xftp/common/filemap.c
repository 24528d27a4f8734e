/* File windows mapped for reading, guarded against the file shrinking (filemap.h). */
#include "filemap.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define READ_AHEAD_WINDOWS 2

/* The window this thread reads under a guard; start 0: none. */
static _Thread_local struct {
        uintptr_t start, end;
        volatile sig_atomic_t shrank;
} guard;

static struct sigaction previous_sigbus;
static uintptr_t page_size;

/* A fault inside the guarded window: the file ends before it now. The rest of the window
 * becomes zero pages and the read that faulted goes on. mmap() is a plain system call
 * here, safe in a handler. Any other SIGBUS gets the disposition there was before ours:
 * restored, it takes the fault when the instruction runs again. */
static void on_sigbus(int sig, siginfo_t *info, void *context)
{
        uintptr_t at = (uintptr_t)info->si_addr;

        (void)sig;
        (void)context;
        if (guard.start && at >= guard.start && at < guard.end) {
                uintptr_t page = at & ~(page_size - 1);
                if (mmap((void *)page, guard.end - page, PROT_READ,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED) {
                        guard.shrank = 1;
                        return;
                }
        }
        sigaction(SIGBUS, &previous_sigbus, NULL);
}

/* Puts on_sigbus in place unless it is: at every guard, as whoever changed the
 * disposition since (a test harness, a library) would otherwise leave the guard without
 * its handler. One system call a window. */
static void install_sigbus(void)
{
        static pthread_mutex_t installing = PTHREAD_MUTEX_INITIALIZER;
        struct sigaction now;

        pthread_mutex_lock(&installing);
        if (sigaction(SIGBUS, NULL, &now) == 0 && now.sa_sigaction != on_sigbus) {
                struct sigaction action = {.sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO};
                page_size = (uintptr_t)sysconf(_SC_PAGESIZE);
                sigemptyset(&action.sa_mask);
                sigaction(SIGBUS, &action, &previous_sigbus);
        }
        pthread_mutex_unlock(&installing);
}

void xftp_filemap_init(struct xftp_filemap *m)
{
        *m = (struct xftp_filemap){0};
}

void xftp_filemap_release(struct xftp_filemap *m)
{
        if (m->data)
                munmap((void *)m->data, m->len);
        xftp_filemap_init(m);
}

int xftp_filemap_at(struct xftp_filemap *m, int fd, uint64_t offset)
{
        struct stat st;

        xftp_filemap_release(m);
        if (fstat(fd, &st) < 0)
                return -errno;
        if (offset >= (uint64_t)st.st_size)
                return 0;
        uint64_t start = offset - offset % XFTP_FILEMAP_WINDOW;
        uint64_t left = (uint64_t)st.st_size - start;
        size_t len = left < XFTP_FILEMAP_WINDOW ? (size_t)left : XFTP_FILEMAP_WINDOW;
        /* Populated: one call maps the window's pages, where a fault per 64 KiB would
         * each stop the sender; the next two windows are read ahead meanwhile, as deep as
         * the kernel's own read-ahead of a sequential read (8 MiB on a virtio disk). */
        void *data = mmap(NULL, len, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, (off_t)start);
        if (data == MAP_FAILED)
                return -errno;
        posix_fadvise(fd, (off_t)(start + len), READ_AHEAD_WINDOWS * XFTP_FILEMAP_WINDOW,
                      POSIX_FADV_WILLNEED);
        *m = (struct xftp_filemap){.data = data, .offset = start, .len = len};
        return 1;
}

void xftp_filemap_guard(const struct xftp_filemap *m)
{
        install_sigbus();
        guard.shrank = 0;
        guard.end = (uintptr_t)m->data + m->len;
        guard.start = (uintptr_t)m->data;
}

bool xftp_filemap_unguard(struct xftp_filemap *m)
{
        guard.start = 0;
        bool shrank = guard.shrank;
        if (shrank)
                xftp_filemap_release(m);
        return shrank;
}
