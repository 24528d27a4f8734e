/* Connections behind one table of operations (xconn.h), and the plain TCP backend. */
#include "xconn.h"

#include <dragstrip/stop.h>

#include <dragstrip/clock.h>

#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

/* The plain backend is the socket calls themselves: one indirect call per send or receive
 * (a 4 MiB block in the pipeline), nothing copied, nothing buffered. */
static ssize_t tcp_sendv(struct xftp_conn *c, const struct iovec *iov, int cnt, int flags)
{
        struct msghdr msg = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)cnt};
        ssize_t sent = sendmsg(c->fd, &msg, flags | MSG_NOSIGNAL);
        return sent < 0 ? -errno : sent;
}

static ssize_t tcp_recv(struct xftp_conn *c, void *buf, size_t len, int flags)
{
        ssize_t got = recv(c->fd, buf, len, flags);
        return got < 0 ? -errno : got;
}

static ssize_t tcp_sendfile(struct xftp_conn *c, int file_fd, off_t *offset, size_t len)
{
        ssize_t sent = sendfile(c->fd, file_fd, offset, len);
        return sent < 0 ? -errno : sent;
}

static int tcp_close(struct xftp_conn *c)
{
        return close(c->fd) < 0 ? -errno : 0;
}

const struct xftp_conn_ops xftp_conn_tcp = {
    .name = "tcp",
    .sendv = tcp_sendv,
    .recv = tcp_recv,
    .sendfile = tcp_sendfile,
    .close = tcp_close,
};

void xftp_conn_plain(struct xftp_conn *c, int fd)
{
        *c = (struct xftp_conn){.ops = &xftp_conn_tcp, .fd = fd, .kernel = true};
}

void xftp_conn_none(struct xftp_conn *c)
{
        *c = (struct xftp_conn){.ops = &xftp_conn_tcp, .fd = -1};
}

int xftp_conn_wait(struct xftp_conn *c, short events, int timeout_ms, atomic_bool *also)
{
        if ((events & POLLIN) && c->ops->pending && c->ops->pending(c) > 0)
                return 1;
        return ds_poll_one_until(c->fd, events, timeout_ms, also);
}

int xftp_conn_write_all(struct xftp_conn *c, const void *buf, size_t len, int timeout_ms,
                        atomic_bool *also)
{
        const char *p = buf;

        while (len > 0) {
                ssize_t n = xftp_conn_send(c, p, len, MSG_DONTWAIT);
                if (n > 0) {
                        p += n;
                        len -= (size_t)n;
                        continue;
                }
                if (n < 0 && n != -EAGAIN && n != -EINTR)
                        return (int)n;
                int rc = xftp_conn_wait(c, POLLOUT, timeout_ms, also);
                if (rc <= 0)
                        return rc == 0 ? -ETIMEDOUT : rc;
        }
        return 0;
}

int xftp_conn_close(struct xftp_conn *c)
{
        int rc = 0;

        if (xftp_conn_is_open(c))
                rc = c->ops->close(c);
        xftp_conn_none(c);
        return rc;
}

void xftp_conn_close_all(struct xftp_conn *conns, unsigned n)
{
        for (unsigned i = 0; i < n; i++)
                xftp_conn_close(&conns[i]);
}

void xftp_conn_drop_all(struct xftp_conn *conns, unsigned n)
{
        for (unsigned i = 0; i < n; i++) {
                struct xftp_conn *c = &conns[i];
                if (xftp_conn_is_open(c) && c->ops->drop)
                        c->ops->drop(c);
                else if (xftp_conn_is_open(c))
                        close(c->fd);
                xftp_conn_none(c);
        }
}
