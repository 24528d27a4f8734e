/* The watcher thread of a session (watch.h). */
#include "watch.h"

#include "session.h"

#include <dragstrip/stop.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct watch {
        struct session *s;
        pthread_t thread;
        pthread_mutex_t lock;
        pthread_cond_t changed;
        atomic_bool armed; /* a transfer runs: read the control connection */
        bool reading;      /* the thread is in a transfer's loop */
        bool quit;
        int wake; /* an eventfd: watch_end ends the thread's poll at once, so the 226 of
                   * every transfer waits for no slice */
};

/* Takes the first ABOR line out of s->in. Returns whether there was one. */
static bool take_abor(struct session *s)
{
        struct xftpd_cmd *cmd = malloc(sizeof(*cmd));
        const char *refusal;
        bool found = false;
        size_t at = 0;

        while (cmd && !found && at < s->in_used) {
                char *lf = memchr(s->in + at, '\n', s->in_used - at);
                if (!lf)
                        break;
                size_t len = (size_t)(lf - (s->in + at)) + 1;
                found = xftpd_cmd_parse(s->in + at, len, cmd, &refusal) == 0 && cmd->verb == V_ABOR;
                if (found) {
                        memmove(s->in + at, s->in + at + len, s->in_used - at - len);
                        s->in_used -= len;
                }
                at += len;
        }
        free(cmd);
        return found;
}

/* Takes an ABOR out of s->in and, if there was one, stops the transfer. One only: the
 * transfer's replies answer it, and any other is left for the session to answer as an
 * ABOR with no transfer (every command gets its reply). */
static void watch_abor(struct session *s)
{
        if (!atomic_load(&s->aborted) && take_abor(s)) {
                atomic_store(&s->aborted, true);
                atomic_store(&s->xfer_stop, true);
        }
}

/* Reads what the control connection holds, waiting at most timeout_ms for it (on wake too,
 * when wake >= 0): an ABOR stops the transfer, a hang-up or SIGTERM too. */
static void watch_step(struct session *s, int wake, int timeout_ms)
{
        if (ds_stopping())
                atomic_store(&s->xfer_stop, true);
        bool room = s->in_used < sizeof(s->in) && !atomic_load(&s->ctl_gone);
        struct pollfd pfd[2] = {{.fd = s->ctl.fd, .events = room ? POLLIN : 0},
                                {.fd = wake, .events = POLLIN}};
        bool held = room && s->ctl.ops->pending && s->ctl.ops->pending(&s->ctl) > 0;
        if (!held && (poll(pfd, wake >= 0 ? 2 : 1, timeout_ms) <= 0 ||
                      !(pfd[0].revents & (POLLIN | POLLHUP | POLLERR))))
                return;
        ssize_t got =
            xftp_conn_recv(&s->ctl, s->in + s->in_used, sizeof(s->in) - s->in_used, MSG_DONTWAIT);
        if (got == -EINTR || got == -EAGAIN)
                return;
        if (got <= 0) {
                atomic_store(&s->ctl_gone, true);
                atomic_store(&s->xfer_stop, true);
                return;
        }
        s->in_used += (size_t)got;
        watch_abor(s);
}

/* One transfer's watch: until watch_end disarms it. */
static void watch_transfer(struct watch *w)
{
        struct session *s = w->s;

        watch_abor(s); /* an ABOR may have come in the same read as the command it cuts */
        while (atomic_load(&w->armed))
                watch_step(s, w->wake, 100);
}

static void *watch_run(void *arg)
{
        struct watch *w = arg;

        pthread_mutex_lock(&w->lock);
        for (;;) {
                while (!atomic_load(&w->armed) && !w->quit)
                        pthread_cond_wait(&w->changed, &w->lock);
                if (w->quit)
                        break;
                w->reading = true;
                pthread_mutex_unlock(&w->lock);
                watch_transfer(w);
                pthread_mutex_lock(&w->lock);
                w->reading = false;
                pthread_cond_broadcast(&w->changed);
        }
        pthread_mutex_unlock(&w->lock);
        return NULL;
}

static int watch_make(struct session *s)
{
        struct watch *w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        w->s = s;
        w->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        int rc = w->wake < 0 ? errno : 0;
        if (rc == 0) {
                pthread_mutex_init(&w->lock, NULL);
                pthread_cond_init(&w->changed, NULL);
                rc = pthread_create(&w->thread, NULL, watch_run, w);
                if (rc != 0) {
                        pthread_cond_destroy(&w->changed);
                        pthread_mutex_destroy(&w->lock);
                }
        }
        if (rc != 0) {
                if (w->wake >= 0)
                        close(w->wake);
                free(w);
                return -rc;
        }
        s->watch = w;
        return 0;
}

/* A transfer's start: no stop, no ABOR yet. */
static void transfer_flags_clear(struct session *s)
{
        atomic_store(&s->xfer_stop, false);
        atomic_store(&s->aborted, false);
}

int watch_skip(struct session *s)
{
        transfer_flags_clear(s);
        watch_abor(s);
        return 0;
}

void watch_glance(void *session)
{
        watch_step(session, -1, 0);
}

int watch_begin(struct session *s)
{
        int rc = s->watch ? 0 : watch_make(s);
        if (rc < 0)
                return rc;
        struct watch *w = s->watch;
        eventfd_t stale;
        eventfd_read(w->wake, &stale); /* the last watch_end's wake-up, if it was never read */
        transfer_flags_clear(s);
        pthread_mutex_lock(&w->lock);
        atomic_store(&w->armed, true);
        pthread_cond_broadcast(&w->changed);
        pthread_mutex_unlock(&w->lock);
        return 0;
}

void watch_end(struct session *s)
{
        struct watch *w = s->watch;

        pthread_mutex_lock(&w->lock);
        atomic_store(&w->armed, false);
        eventfd_write(w->wake, 1); /* were it to fail, the poll's slice ends the wait */
        while (w->reading)
                pthread_cond_wait(&w->changed, &w->lock);
        pthread_mutex_unlock(&w->lock);
}

void watch_free(struct session *s)
{
        struct watch *w = s->watch;

        if (!w)
                return;
        pthread_mutex_lock(&w->lock);
        w->quit = true;
        pthread_cond_broadcast(&w->changed);
        pthread_mutex_unlock(&w->lock);
        pthread_join(w->thread, NULL);
        pthread_cond_destroy(&w->changed);
        pthread_mutex_destroy(&w->lock);
        close(w->wake);
        free(w);
        s->watch = NULL;
}
