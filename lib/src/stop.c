/* Stopping on SIGINT, SIGTERM and SIGHUP (stop.h). */
#include <dragstrip/stop.h>

#include <dragstrip/clock.h>
#include <dragstrip/error.h>
#include <dragstrip/live.h>

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

static atomic_bool stopping;
static atomic_int stop_signo;
/* The live-counter segment's file, named before any signal, so that the handler of a
 * second signal only has to unlink() it (async-signal-safe; shm_unlink is not listed). */
static char live_path[64];
static atomic_bool *tool_flag;

static void on_signal(int signo)
{
        if (atomic_exchange(&stopping, true)) {
                unlink(live_path);
                _exit(128 + signo);
        }
        atomic_store(&stop_signo, signo);
        if (tool_flag)
                atomic_store(tool_flag, true); /* lock-free, so safe in a handler */
}

int ds_stop_catch(atomic_bool *also, struct ds_error *err)
{
        tool_flag = also;
        snprintf(live_path, sizeof(live_path), "/dev/shm/%s%d", DS_LIVE_PREFIX, (int)getpid());
        struct sigaction sa = {.sa_handler = on_signal};
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGINT, &sa, NULL) != 0 || sigaction(SIGTERM, &sa, NULL) != 0)
                return ds_fail(err, -errno, "catching SIGINT and SIGTERM");
        /* A hang-up (the terminal or the ssh session gone) stops as SIGTERM does, unless
         * the tool was started to outlive it (nohup leaves it ignored). */
        struct sigaction hup;
        if (sigaction(SIGHUP, NULL, &hup) == 0 && hup.sa_handler != SIG_IGN &&
            sigaction(SIGHUP, &sa, NULL) != 0)
                return ds_fail(err, -errno, "catching SIGHUP");
        if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
                return ds_fail(err, -errno, "ignoring SIGPIPE");
        return 0;
}

void ds_stop_request(int signo)
{
        atomic_store(&stop_signo, signo);
        atomic_store(&stopping, true);
}

bool ds_stopping(void)
{
        return atomic_load_explicit(&stopping, memory_order_relaxed);
}

int ds_stop_signal(void)
{
        return atomic_load(&stop_signo);
}

int ds_stop_status(void)
{
        int signo = ds_stop_signal();
        return signo > 0 ? 128 + signo : 0;
}

int ds_poll_one(int fd, short events, int timeout_ms)
{
        return ds_poll_one_until(fd, events, timeout_ms, NULL);
}

int ds_poll_one_until(int fd, short events, int timeout_ms, atomic_bool *also)
{
        struct pollfd pfd = {.fd = fd, .events = events};
        bool sliced = timeout_ms < 0 || timeout_ms > DS_STOP_SLICE_MS || also;
        uint64_t deadline = timeout_ms > 0 ? ds_now_ns() + (uint64_t)timeout_ms * 1000000u : 0;
        for (;;) {
                if (sliced && (ds_stopping() || (also && atomic_load(also))))
                        return -EINTR;
                int wait_ms = timeout_ms;
                if (timeout_ms > 0) {
                        uint64_t now = ds_now_ns();
                        if (now >= deadline)
                                return 0;
                        wait_ms = (int)((deadline - now + 999999u) / 1000000u);
                }
                if (sliced && (wait_ms < 0 || wait_ms > DS_STOP_SLICE_MS))
                        wait_ms = DS_STOP_SLICE_MS;
                int n = poll(&pfd, 1, wait_ms);
                if (n > 0)
                        return 1;
                if (n == 0 && timeout_ms == 0)
                        return 0;
                if (n < 0 && errno != EINTR)
                        return -errno;
        }
}
