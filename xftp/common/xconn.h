/* A connection of xftp or xftpd, control or data, as the protocol and the transfer pipeline
 * see it: every byte either side reads or writes goes through one small table of
 * operations, beside xftp_xfile_ops for files. The plain backend is a TCP socket (xconn.c);
 * TLS is another backend, and so would be any other data channel.
 *
 * The calls keep the socket's own manners: a call with MSG_DONTWAIT never blocks, one
 * without blocks no longer than the socket's SO_SNDTIMEO/SO_RCVTIMEO (or, where a backend
 * cannot honour those, one 100 ms slice), so a caller that waits in slices still sees a
 * stop. Errors come back as a negative errno, -EAGAIN meaning "nothing yet, try again". */
#ifndef XFTP_XCONN_H
#define XFTP_XCONN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct xftp_conn;

struct xftp_conn_ops {
        const char *name; /* "tcp", "tls", "verbs" */
        /* Sends from iov[0..cnt-1] (flags: 0, MSG_DONTWAIT, MSG_MORE). Returns the bytes
         * taken, possibly fewer than offered, or a negative errno (-EPIPE: the peer left).
         * MSG_MORE, on a send in place (below): another send follows at once, so the
         * backend may hold this one to post both together; a send without it, or the
         * close, sends what is held first. */
        ssize_t (*sendv)(struct xftp_conn *c, const struct iovec *iov, int cnt, int flags);
        /* Receives up to len bytes (flags: 0, MSG_DONTWAIT or MSG_WAITALL). Returns the
         * bytes read, 0 when the peer closed, or a negative errno. */
        ssize_t (*recv)(struct xftp_conn *c, void *buf, size_t len, int flags);
        /* May be NULL: sends up to len bytes of file_fd from *offset, advancing it:
         * without copying them through user space where the kernel carries the bytes
         * (tcp, kernel TLS), else from the file mapped into memory (TLS in user space).
         * Returns as sendv. */
        ssize_t (*sendfile)(struct xftp_conn *c, int file_fd, off_t *offset, size_t len);
        /* May be NULL, both or neither: sending without a copy. take_buf hands out a
         * buffer of the backend's own memory for up to len bytes of a MODE E block's
         * payload into *buf and returns 0; -EAGAIN when none came free within wait_ms,
         * -EMSGSIZE when len is more than its buffers hold (the caller uses its own), or
         * another negative errno. A sendv of the block's header and then exactly that
         * payload, from the buffer's start, sends it in place, all or nothing: once it
         * returned the bytes as sent the buffer is the backend's again; until then (an
         * error, -EAGAIN) it is the caller's, who gives it back by put_buf if not sent,
         * or abandons it with a connection that failed (closed, it lends nothing more). */
        int (*take_buf)(struct xftp_conn *c, size_t len, int wait_ms, void **buf);
        void (*put_buf)(struct xftp_conn *c, void *buf);
        /* May be NULL, both or neither: receiving without a copy. When the next len bytes
         * of the stream lie whole in the backend's own memory (a verbs message in its
         * receive slot), lend returns where, as read, and sets *ticket; else NULL, and the
         * caller reads them with recv. give_back(c, ticket), from any thread and in any
         * order, ends the loan; the backend then reuses that memory (the slot goes back to
         * the sender as credit), so the lender keeps the connection open until every loan
         * is back or abandoned with the connection. */
        void *(*lend)(struct xftp_conn *c, size_t len, uint64_t *ticket);
        void (*give_back)(struct xftp_conn *c, uint64_t ticket);
        /* May be NULL: bytes already received and held in user space (TLS records), which
         * a poll() on the socket would not announce. */
        size_t (*pending)(struct xftp_conn *c);
        /* Ends the connection (TLS: its close_notify first) and closes the socket. Returns 0
         * or a negative errno of the close. */
        int (*close)(struct xftp_conn *c);
        /* May be NULL (a plain close then): closes at once, no goodbye sent or awaited. */
        void (*drop)(struct xftp_conn *c);
};

/* One connection. fd stays the socket, for poll() and socket options. */
struct xftp_conn {
        const struct xftp_conn_ops *ops;
        int fd;      /* the socket; -1: none (no connection, or a backend without one) */
        void *impl;  /* the backend's own state */
        bool kernel; /* the kernel carries the bytes as they are on the wire (plain TCP,
                      * kernel TLS): sendfile and large sends need no user-space copy */
};

/* The plain backend over the connected socket fd, which the connection owns from now on. */
extern const struct xftp_conn_ops xftp_conn_tcp;
void xftp_conn_plain(struct xftp_conn *c, int fd);

/* An empty connection (fd -1), for arrays filled later. */
void xftp_conn_none(struct xftp_conn *c);

/* Whether c holds a connection: a socket, or a backend's state without one (verbs,
 * xverbs.h), which waits in 100 ms slices of its own and cannot be polled. */
static inline bool xftp_conn_is_open(const struct xftp_conn *c)
{
        return c->fd >= 0 || c->impl != NULL;
}

static inline ssize_t xftp_conn_send(struct xftp_conn *c, const void *buf, size_t len, int flags)
{
        struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
        return c->ops->sendv(c, &iov, 1, flags);
}

static inline ssize_t xftp_conn_recv(struct xftp_conn *c, void *buf, size_t len, int flags)
{
        return c->ops->recv(c, buf, len, flags);
}

/* Waits until c can be read (POLLIN, true at once when the backend holds bytes already) or
 * written (POLLOUT), as ds_poll_one does: at most timeout_ms (negative: no deadline), in
 * slices that a stop ends (-EINTR), or when *also (may be NULL) is set. Returns 1 ready,
 * 0 on timeout, or a negative errno. */
int xftp_conn_wait(struct xftp_conn *c, short events, int timeout_ms, atomic_bool *also);

/* Writes all len bytes, waiting at most timeout_ms for each stall, ending on a stop or
 * *also. Returns 0, -ETIMEDOUT, -EINTR or another negative errno. */
int xftp_conn_write_all(struct xftp_conn *c, const void *buf, size_t len, int timeout_ms,
                        atomic_bool *also);

/* Closes c if it is open and leaves it empty. Returns 0 or the close's negative errno. */
int xftp_conn_close(struct xftp_conn *c);
/* Closes conns[0..n-1]. */
void xftp_conn_close_all(struct xftp_conn *conns, unsigned n);
/* Closes conns[0..n-1] at once, without the goodbyes of a close (TLS's close_notify, and
 * the wait for the peer's end): for connections that carry nothing the peer still waits
 * for, as MODE E connections kept between two transfers. A peer that waits for its next
 * command, not for them, would make a close wait its whole deadline. */
void xftp_conn_drop_all(struct xftp_conn *conns, unsigned n);

#endif
