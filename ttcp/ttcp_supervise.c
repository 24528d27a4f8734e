#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <unistd.h>

#include <dragstrip/clock.h>
#include <dragstrip/report.h>

#include "ttcp.h"
#include "ttcp_supervise.h"

static struct {
        struct ds_report *report;
        int wake[2]; /* workers write a byte here as they end */
        atomic_uint running;
        uint64_t deadline_ns;
        void (*interrupt)(void *ctx);
        void *interrupt_ctx;
        bool interrupted;
} sup = {.wake = {-1, -1}};

int supervise_init(struct ds_report *report)
{
        sup.report = report;
        if (pipe2(sup.wake, O_CLOEXEC | O_NONBLOCK) != 0)
                return -errno;
        return 0;
}

void supervise_begin(uint64_t start_ns, double duration_s, void (*interrupt)(void *ctx), void *ctx)
{
        ds_report_start_at(sup.report, start_ns); /* intervals count from here, not the listen */
        sup.deadline_ns = duration_s > 0 ? start_ns + (uint64_t)(duration_s * 1e9) : UINT64_MAX;
        sup.interrupt = interrupt;
        sup.interrupt_ctx = ctx;
}

int supervise_spawn(pthread_t *thread, void *(*body)(void *), void *arg)
{
        sigset_t block, old;
        int rc;

        sigemptyset(&block);
        sigaddset(&block, SIGINT);
        sigaddset(&block, SIGTERM);
        pthread_sigmask(SIG_BLOCK, &block, &old);
        atomic_fetch_add(&sup.running, 1);
        rc = pthread_create(thread, NULL, body, arg);
        if (rc != 0)
                atomic_fetch_sub(&sup.running, 1);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        return -rc;
}

void supervise_worker_done(void)
{
        atomic_fetch_sub(&sup.running, 1);
        /* A full pipe already holds a wake-up; nothing is lost by dropping this one. */
        (void)!write(sup.wake[1], "", 1);
}

static void stop_once(void)
{
        atomic_store(&ttcp_stop, true);
        if (!sup.interrupted && sup.interrupt)
                sup.interrupt(sup.interrupt_ctx);
        sup.interrupted = true;
}

static int poll_timeout_ms(uint64_t now)
{
        uint64_t due = ds_report_next_due(sup.report);

        if (sup.deadline_ns < due)
                due = sup.deadline_ns;
        if (due == UINT64_MAX)
                return -1;
        if (due <= now)
                return 0;
        return (int)((due - now) / 1000000) + 1;
}

bool supervise_until_done(int listen_fd)
{
        for (;;) {
                struct pollfd fds[2] = {{.fd = sup.wake[0], .events = POLLIN},
                                        {.fd = listen_fd, .events = POLLIN}};
                char drain[64];

                while (read(sup.wake[0], drain, sizeof drain) > 0)
                        ;
                if (atomic_load(&sup.running) == 0) {
                        /* A stream that connected while the last one was ending still counts. */
                        return listen_fd >= 0 && poll(&fds[1], 1, 0) == 1;
                }
                uint64_t now = ds_now_ns();
                if (now >= sup.deadline_ns || atomic_load(&ttcp_stop))
                        stop_once();
                int ready =
                    poll(fds, listen_fd >= 0 ? 2 : 1, sup.interrupted ? 100 : poll_timeout_ms(now));
                if (ready < 0 && errno != EINTR)
                        stop_once();
                ds_report_tick(sup.report);
                if (ready > 0 && listen_fd >= 0 && (fds[1].revents & POLLIN))
                        return true;
        }
}
