/* The tcp link: the kernel stack, for comparison. Each message is one record on the
 * stream, a wire header and its payload; control frames are records too. */
#include <dragstrip/link.h>

#include "link_priv.h"

#include <dragstrip/clock.h>
#include <dragstrip/serve.h>
#include <dragstrip/stop.h>
#include <dragstrip/error.h>
#include <dragstrip/net.h>
#include <dragstrip/pool.h>

#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define TCP_MAX_MSG (256u << 20)
#define SEND_BATCH  32
#define STAGE_BYTES (64u << 10)
#define STALL_MS    10000 /* a peer that takes nothing we send for this long is gone */
/* A record must be whole within this of its first wait, plus its length at 4 MB/s; bytes
 * that trickle in do not extend it. Blocking calls wake every DS_STOP_SLICE_MS to look. */
#define RECORD_MS 2000
/* Payloads this large are awaited whole (await_bytes): 1 MiB records on loopback went from
 * 4241 to 5171 MB/s; at 256 KiB the three extra calls cost more than the wake-ups saved. */
#define LOWAT_MIN (512u << 10)

struct tcp_link {
        struct ds_link base;
        int fd;
        uint32_t msg_size;
        struct ds_pool *rx_pool;
        struct ctl_ring ctl;
        uint8_t *stage; /* bytes read ahead of the record being parsed */
        size_t stage_len;
        size_t stage_off;
        uint64_t record_deadline; /* 0 until the record being read first waits */
};

struct tcp_listener {
        struct ds_link_listener base;
        int fd;
};

static int tcp_wrap(int fd, const char *peer, struct ds_link **out, struct ds_error *err)
{
        struct tcp_link *t = calloc(1, sizeof(*t));
        uint8_t *stage = malloc(STAGE_BYTES);
        if (!t || !stage) {
                free(t);
                free(stage);
                close(fd);
                return ds_fail(err, -ENOMEM, "tcp link");
        }
        int one = 1;
        struct timeval stall = {.tv_usec = DS_STOP_SLICE_MS * 1000};
        if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ||
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &stall, sizeof(stall)) < 0 ||
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &stall, sizeof(stall)) < 0) {
                int e = -errno;
                free(t);
                free(stage);
                close(fd);
                return ds_fail(err, e, "tcp socket options");
        }
        t->base.ops = &ds_link_tcp;
        t->base.caps = ds_link_tcp.caps;
        t->base.max_msg = TCP_MAX_MSG;
        snprintf(t->base.peer, sizeof(t->base.peer), "%s", peer);
        t->fd = fd;
        t->stage = stage;
        *out = &t->base;
        return 0;
}

static int tcp_listen(struct ds_link_listener **out, const struct ds_link_config *config,
                      struct ds_error *err)
{
        int fd = ds_net_listen(config->host, config->port, SOCK_STREAM, err);
        if (fd < 0)
                return fd;
        struct tcp_listener *l = calloc(1, sizeof(*l));
        if (!l) {
                close(fd);
                return ds_fail(err, -ENOMEM, "tcp listener");
        }
        l->base.ops = &ds_link_tcp;
        l->fd = fd;
        *out = &l->base;
        return 0;
}

static int tcp_accept(struct ds_link_listener *listener, struct ds_link **out, int timeout_ms,
                      struct ds_error *err)
{
        struct tcp_listener *l = (struct tcp_listener *)listener;
        char peer[64];
        int fd = ds_net_accept(l->fd, timeout_ms, peer, sizeof(peer), err);
        if (fd < 0)
                return fd;
        return tcp_wrap(fd, peer, out, err);
}

static void tcp_unlisten(struct ds_link_listener *listener)
{
        struct tcp_listener *l = (struct tcp_listener *)listener;
        close(l->fd);
        free(l);
}

static int tcp_connect(struct ds_link **out, const struct ds_link_config *config,
                       struct ds_error *err)
{
        int fd = ds_net_connect(config->host, config->port, SOCK_STREAM, config->timeout_ms, err);
        if (fd < 0)
                return fd;
        char peer[64];
        snprintf(peer, sizeof(peer), "%s:%u", config->host, config->port);
        return tcp_wrap(fd, peer, out, err);
}

static int tcp_prepare(struct ds_link *link, const struct ds_link_params *params,
                       struct ds_link_offer *mine, struct ds_error *err)
{
        struct tcp_link *t = (struct tcp_link *)link;
        t->msg_size = params->msg_size;
        if (params->send_pool)
                return 0; /* the sender sends from the caller's pool */
        unsigned count = link_rx_buffers(params->msg_size);
        int rc = ds_pool_create(&t->rx_pool, params->msg_size, count, 0, err);
        if (rc < 0)
                return rc;
        mine->window = count;
        return 0;
}

/* Writes every byte of iov, resuming after short writes. */
static int write_all(int fd, struct iovec *iov, int iovcnt, struct ds_error *err)
{
        uint64_t stalled_since = 0;
        while (iovcnt > 0) {
                struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)iovcnt};
                ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL);
                if (n < 0 && errno == EAGAIN) { /* SO_SNDTIMEO: nothing taken for a slice */
                        uint64_t now = ds_now_ns();
                        if (ds_stopping())
                                return ds_fail(err, -EINTR, "tcp send");
                        if (!stalled_since)
                                stalled_since = now;
                        else if (now - stalled_since > (uint64_t)STALL_MS * 1000000u)
                                return ds_fail(err, -ETIMEDOUT, "tcp peer took nothing for %d s",
                                               STALL_MS / 1000);
                        continue;
                }
                stalled_since = 0;
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        int e = errno == ECONNRESET || errno == EPIPE ? -EPIPE : -errno;
                        return ds_fail(err, e, "tcp send");
                }
                while (iovcnt > 0 && (size_t)n >= iov->iov_len) {
                        n -= (ssize_t)iov->iov_len;
                        iov++;
                        iovcnt--;
                }
                if (iovcnt > 0) {
                        iov->iov_base = (uint8_t *)iov->iov_base + n;
                        iov->iov_len -= (size_t)n;
                }
        }
        return 0;
}

static int tcp_send(struct ds_link *link, const struct ds_msg *msgs, unsigned n,
                    struct ds_error *err)
{
        struct tcp_link *t = (struct tcp_link *)link;
        uint8_t hdrs[SEND_BATCH][DS_WIRE_HDR_LEN];
        struct iovec iov[2 * SEND_BATCH];
        if (n > SEND_BATCH)
                n = SEND_BATCH;
        for (unsigned i = 0; i < n; i++) {
                struct ds_wire_hdr h = {.type = DS_WIRE_DATA,
                                        .seq = msgs[i].seq,
                                        .msg_len = msgs[i].len,
                                        .frag_len = msgs[i].len};
                ds_wire_encode(hdrs[i], &h);
                iov[2 * i] = (struct iovec){hdrs[i], DS_WIRE_HDR_LEN};
                iov[2 * i + 1] = (struct iovec){msgs[i].buf, msgs[i].len};
        }
        int rc = write_all(t->fd, iov, (int)(2 * n), err);
        if (rc < 0)
                return rc;
        t->base.stats.frames_sent += n;
        return (int)n;
}

static int tcp_send_ctl(struct ds_link *link, uint8_t type, const void *payload, size_t len,
                        struct ds_error *err)
{
        struct tcp_link *t = (struct tcp_link *)link;
        uint8_t hdr[DS_WIRE_HDR_LEN];
        struct ds_wire_hdr h = {.type = type, .msg_len = (uint32_t)len, .frag_len = (uint32_t)len};
        ds_wire_encode(hdr, &h);
        struct iovec iov[2] = {{hdr, sizeof(hdr)}, {(void *)payload, len}};
        return write_all(t->fd, iov, 2, err);
}

/* The record being read had to wait for more (left bytes of it still to come): it has
 * until its deadline, set at the first wait, and no trickle of bytes extends it. A stop
 * ends the wait too when stop_too (the wait lasted a slice). Returns 0 or -ETIMEDOUT,
 * -EINTR. */
static int record_wait(struct tcp_link *t, size_t left, bool stop_too, struct ds_error *err)
{
        if (stop_too && ds_stopping())
                return ds_fail(err, -EINTR, "tcp: stopped inside a record from %s", t->base.peer);
        uint64_t now = ds_now_ns();
        if (!t->record_deadline) {
                t->record_deadline = now + (RECORD_MS + (uint64_t)left / 4000u) * 1000000u;
                return 0;
        }
        if (now < t->record_deadline)
                return 0;
        return ds_fail(err, -ETIMEDOUT, "tcp peer %s stalled mid-record", t->base.peer);
}

/* One recv() of at most len bytes: the count (> 0), or -EPIPE when the peer closed or
 * reset, -ETIMEDOUT when the record's deadline passed, -EINTR on a stop, another
 * negative errno. */
static ssize_t recv_some(struct tcp_link *t, void *buf, size_t len, int flags, struct ds_error *err)
{
        for (;;) {
                ssize_t n = recv(t->fd, buf, len, flags);
                if (n > 0)
                        return n;
                if (n == 0)
                        return -EPIPE;
                if (errno == EINTR)
                        continue;
                if (errno == EAGAIN) { /* SO_RCVTIMEO: a slice without a byte */
                        int rc = record_wait(t, len, true, err);
                        if (rc < 0)
                                return rc;
                        continue;
                }
                return errno == ECONNRESET ? -EPIPE : ds_fail(err, -errno, "tcp recv");
        }
}

/* Reads at least want bytes into the stage (after what it holds), up to its size. */
static int stage_fill(struct tcp_link *t, size_t want, size_t cap, struct ds_error *err)
{
        if (t->stage_off > 0) {
                memmove(t->stage, t->stage + t->stage_off, t->stage_len - t->stage_off);
                t->stage_len -= t->stage_off;
                t->stage_off = 0;
        }
        while (t->stage_len < want) {
                ssize_t n = recv_some(t, t->stage + t->stage_len, cap - t->stage_len, 0, err);
                if (n < 0)
                        return (int)n;
                t->stage_len += (size_t)n;
                int rc = t->stage_len < want ? record_wait(t, want - t->stage_len, false, err) : 0;
                if (rc < 0)
                        return rc;
        }
        return 0;
}

static int set_rcvlowat(int fd, size_t bytes)
{
        int v = bytes > INT_MAX / 2 ? INT_MAX / 2 : (int)bytes;
        return setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof(v));
}

/* Waits until the socket holds want bytes (or as many as the kernel wakes a reader for):
 * one wake-up for a large payload instead of one per segment. Only poll() waits with
 * SO_RCVLOWAT raised; a read blocked with it raised could miss its wake-up for good,
 * since the kernel counts the bytes not yet read, and the read takes them as they come. */
static int await_bytes(struct tcp_link *t, size_t want, struct ds_error *err)
{
        int rc = record_wait(t, want, false, err);
        if (rc < 0 || set_rcvlowat(t->fd, want) < 0)
                return rc; /* then the read wakes per segment: slower, no less correct */
        int n = ds_poll_one(t->fd, POLLIN, ds_deadline_left_ms(t->record_deadline));
        set_rcvlowat(t->fd, 1);
        if (n < 0)
                return ds_fail(err, n, "tcp poll");
        if (n == 0)
                return ds_fail(err, -ETIMEDOUT, "tcp peer %s stalled mid-record", t->base.peer);
        return 0;
}

/* Reads a payload of len bytes into dst: first what the stage holds (one copy, counted),
 * the rest straight from the socket. */
static int read_payload(struct tcp_link *t, uint8_t *dst, size_t len, struct ds_error *err)
{
        size_t staged = t->stage_len - t->stage_off;
        if (staged > len)
                staged = len;
        memcpy(dst, t->stage + t->stage_off, staged);
        t->base.stats.bytes_copied += staged;
        t->stage_off += staged;
        if (len - staged >= LOWAT_MIN) {
                int rc = await_bytes(t, len - staged, err);
                if (rc < 0)
                        return rc;
        }
        while (staged < len) {
                ssize_t n = recv_some(t, dst + staged, len - staged, MSG_WAITALL, err);
                if (n < 0)
                        return (int)n;
                staged += (size_t)n;
                int rc = staged < len ? record_wait(t, len - staged, false, err) : 0;
                if (rc < 0)
                        return rc;
        }
        return 0;
}

/* Parses one record. Returns 1 with msg filled, 0 when no buffer is free, or an error. */
static int recv_one(struct tcp_link *t, struct ds_msg *msg, struct ds_error *err)
{
        /* Large messages: read only the header, the payload goes straight to its buffer. */
        size_t cap = t->msg_size >= (16u << 10) ? DS_WIRE_HDR_LEN : STAGE_BYTES;
        t->record_deadline = 0;
        int rc = stage_fill(t, DS_WIRE_HDR_LEN, cap, err);
        if (rc < 0 && rc != -EINTR && t->stage_len > t->stage_off)
                t->base.stats.malformed[DS_WIRE_SHORT]++; /* a header cut off */
        if (rc < 0)
                return rc;
        struct ds_wire_hdr h;
        uint32_t max = t->rx_pool ? t->msg_size : 0;
        enum ds_wire_reject bad = ds_wire_parse(
            t->stage + t->stage_off, t->stage_len - t->stage_off, max, DS_WIRE_STREAM, &h);
        if (bad != DS_WIRE_OK) {
                /* A stream cannot resynchronise: count it and give up on the link. */
                t->base.stats.malformed[bad]++;
                return ds_fail(err, -EPROTO, "tcp peer %s sent a malformed record (%s)",
                               t->base.peer, ds_wire_reject_name(bad));
        }
        t->stage_off += DS_WIRE_HDR_LEN;
        t->base.stats.frames_received++;
        if (h.type != DS_WIRE_DATA) {
                uint8_t payload[DS_WIRE_CTL_MAX];
                rc = read_payload(t, payload, h.frag_len, err);
                if (rc < 0 && rc != -EINTR)
                        t->base.stats.malformed[DS_WIRE_LENGTH_BAD]++; /* cut short */
                if (rc < 0)
                        return rc;
                return ctl_ring_take(&t->ctl, &h, payload, msg) == 0
                           ? 1
                           : ds_fail(err, -EPROTO, "tcp peer %s floods control frames",
                                     t->base.peer);
        }
        uint8_t *buf = ds_pool_get(t->rx_pool);
        if (!buf) /* the caller holds every buffer: a misuse, not the peer's fault */
                return ds_fail(err, -ENOBUFS, "tcp recv: every receive buffer is held");
        rc = read_payload(t, buf, h.frag_len, err);
        if (rc < 0) {
                /* Cut short: by a stall; a close in the middle of data is only the end of
                 * a blast that died, and the run is reported aborted for it. */
                if (rc != -EINTR && rc != -EPIPE)
                        t->base.stats.malformed[DS_WIRE_LENGTH_BAD]++;
                ds_pool_put(t->rx_pool, buf);
                return rc;
        }
        *msg = (struct ds_msg){.buf = buf, .len = h.frag_len, .kind = DS_MSG_DATA, .seq = h.seq};
        return 1;
}

static int tcp_recv(struct ds_link *link, struct ds_msg *msgs, unsigned max, int timeout_ms,
                    struct ds_error *err)
{
        struct tcp_link *t = (struct tcp_link *)link;
        unsigned got = 0;
        while (got < max && !ctl_ring_full(&t->ctl)) {
                /* Wait only for the first message; then take what is already here. */
                if (t->stage_len - t->stage_off < DS_WIRE_HDR_LEN) {
                        int ready = ds_poll_one(t->fd, POLLIN, got ? 0 : timeout_ms);
                        if (ready < 0)
                                return ds_fail(err, ready, "tcp poll");
                        if (ready == 0)
                                break;
                }
                int rc = recv_one(t, &msgs[got], err);
                if (rc < 0 && got > 0)
                        break; /* hand over what came first; the error comes again next call */
                if (rc == -EPIPE)
                        return ds_fail(err, rc, "tcp: %s closed the link", t->base.peer);
                if (rc < 0)
                        return rc;
                got++;
        }
        return (int)got;
}

static void tcp_release(struct ds_link *link, const struct ds_msg *msgs, unsigned n)
{
        struct tcp_link *t = (struct tcp_link *)link;
        for (unsigned i = 0; i < n; i++) {
                if (msgs[i].kind == DS_MSG_CTL)
                        ctl_ring_release(&t->ctl);
                else
                        ds_pool_put(t->rx_pool, msgs[i].buf);
        }
}

static void tcp_close(struct ds_link *link)
{
        struct tcp_link *t = (struct tcp_link *)link;
        close(t->fd);
        if (t->rx_pool)
                ds_pool_destroy(t->rx_pool);
        free(t->stage);
        free(t);
}

const struct ds_link_ops ds_link_tcp = {
    .name = "tcp",
    .caps = DS_LINK_RELIABLE | DS_LINK_OWN_FLOW | DS_LINK_BOUNDARIES,
    .listen = tcp_listen,
    .accept = tcp_accept,
    .unlisten = tcp_unlisten,
    .connect = tcp_connect,
    .prepare = tcp_prepare,
    .send = tcp_send,
    .send_ctl = tcp_send_ctl,
    .recv = tcp_recv,
    .release = tcp_release,
    .close = tcp_close,
};
