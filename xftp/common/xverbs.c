/* The verbs data channel (xverbs.h): links set up by lib/'s verbs backend and its hello
 * (session.h), and the xconn operations that carry a byte stream over their messages. */
#include "xverbs.h"

#include "xconn.h"

#include <dragstrip/clock.h>
#include <dragstrip/error.h>
#include <dragstrip/link.h>
#include <dragstrip/pool.h>
#include <dragstrip/serve.h>
#include <dragstrip/session.h>
#include <dragstrip/stop.h>
#include <dragstrip/wire.h>

#include <arpa/inet.h>
#include <errno.h>
#include <rdma/rdma_cma.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>

#define SLICE_MS   100
#define PORT_TRIES 64
/* The link's own registered control frames: 2 x VB_DEPTH x VB_FRAME (lib/src/link_verbs.h). */
#define CTL_FRAMES   (2u * 512u * 256u)
#define EPHEMERAL_LO 49152u

struct xftp_verbs_listener {
        struct ds_link_listener *link;
        uint16_t port;
};

/* One stream. */
struct xverbs {
        struct ds_link *link;
        struct ds_session session;
        bool sender;
        /* sender */
        struct ds_pool *pool; /* registered by the link once, at the hello */
        bool pool_lent;       /* pool is the session's (xftp_verbs_buffers) */
        pthread_mutex_t free_lock;
        void *free_bufs[XFTP_VERBS_WINDOW];
        unsigned free_count;
        uint64_t sent;
        /* Blocks sent in place and not yet posted, oldest first: one with more behind it
         * (MSG_MORE) waits here, so that the blocks ready go to the link in one post.
         * Soft-RoCE runs a queue pair's transport in the posting thread when it finds the
         * queue idle, and in its softirq when a post finds work queued: one block a post
         * kept it in the posting thread, at about 0.75 of the rate. Each holds one of the
         * window's buffers, so there are never more than that. */
        struct ds_msg staged[XFTP_VERBS_WINDOW];
        unsigned staged_count;
        /* the framer (copy path): the header being read, its block (count: payload bytes
         * not yet in a message, offset: where they go), and the message being filled */
        uint8_t head[XFTP_MODEE_HEADER];
        unsigned head_have;
        struct xftp_modee_block block;
        uint8_t *out;
        size_t out_len, out_want;
        /* receiver: the message being read, until its last byte is copied out or lent;
         * what came, for the FINAL its close sends */
        struct ds_msg msg;
        uint32_t msg_used;
        bool has_msg;
        uint64_t received, received_bytes;
        /* Data messages taken from the link and not yet released, numbered from 0 in
         * arrival order: [held_first, received). A slot goes back as credit by its place
         * (the sender writes message k into slot k mod window), so messages are released
         * in that order, each once it is read and its loan, if any, given back. Loans
         * are given back from the pipeline's disk thread: held_lock guards these. */
        pthread_mutex_t held_lock;
        struct ds_msg held[XFTP_VERBS_WINDOW];
        bool held_done[XFTP_VERBS_WINDOW];
        uint64_t held_first;
};

static bool stopped(const struct xftp_verbs_opts *opts)
{
        return ds_stopping() || (opts->stop && atomic_load(opts->stop));
}

/* The numeric host of addr, for rdma_getaddrinfo. */
static const char *host_text(const struct xftp_addr *addr, char *buf, size_t len)
{
        const void *raw = addr->ss.ss_family == AF_INET6
                              ? (const void *)&((const struct sockaddr_in6 *)&addr->ss)->sin6_addr
                              : (const void *)&((const struct sockaddr_in *)&addr->ss)->sin_addr;
        if (!inet_ntop(addr->ss.ss_family, raw, buf, (socklen_t)len))
                buf[0] = '\0';
        return buf;
}

/* Whether peer, "host:port" or "[v6]:port" as links name their peers, is at host. */
static bool at_host(const char *peer, const char *host)
{
        const char *end = strrchr(peer, ':');
        size_t len = end ? (size_t)(end - peer) : 0;
        if (len >= 2 && peer[0] == '[' && peer[len - 1] == ']')
                peer++, len -= 2;
        return end && len == strlen(host) && memcmp(peer, host, len) == 0;
}

uint64_t xftp_verbs_stream_bytes(void)
{
        return xftp_verbs_buffers_stream_bytes() + CTL_FRAMES;
}

/* librdmacm reads the device list (and libibverbs its drivers') at its first event
 * channel, once per process. */
void xftp_verbs_load(void)
{
        struct rdma_event_channel *channel = rdma_create_event_channel();
        if (channel)
                rdma_destroy_event_channel(channel);
}

bool xftp_verbs_available(const struct xftp_addr *local)
{
        char host[INET6_ADDRSTRLEN];
        struct ds_link_config config = {.host = host_text(local, host, sizeof(host))};
        struct ds_link_listener *listener;
        struct ds_error ignored;

        if (!host[0] || ds_link_listen(&ds_link_verbs, &listener, &config, &ignored) < 0)
                return false;
        ds_link_unlisten(listener);
        return true;
}

int xftp_verbs_listen(struct xftp_verbs_listener **out, const struct xftp_addr *local, uint16_t lo,
                      uint16_t hi, struct ds_error *err)
{
        char host[INET6_ADDRSTRLEN];
        unsigned first = lo ? lo : EPHEMERAL_LO, span = (lo ? hi : 65535u) - first + 1;
        uint32_t start;
        struct xftp_verbs_listener *l = calloc(1, sizeof(*l));

        if (!l)
                return ds_fail(err, -ENOMEM, "verbs listener");
        if (getrandom(&start, sizeof(start), 0) != sizeof(start))
                start = (uint32_t)ds_now_ns();
        host_text(local, host, sizeof(host));
        int rc = -EADDRINUSE;
        for (unsigned i = 0; i < span && i < PORT_TRIES && rc == -EADDRINUSE; i++) {
                struct ds_link_config config = {.host = host,
                                                .port = (uint16_t)(first + (start + i) % span)};
                rc = ds_link_listen(&ds_link_verbs, &l->link, &config, err);
                l->port = config.port;
        }
        if (rc == -EADDRINUSE)
                ds_fail(err, rc, "verbs listener on %s: every port tried is taken", host);
        if (rc < 0) {
                free(l);
                return rc;
        }
        *out = l;
        return 0;
}

uint16_t xftp_verbs_port(const struct xftp_verbs_listener *listener)
{
        return listener->port;
}

void xftp_verbs_unlisten(struct xftp_verbs_listener *listener)
{
        if (!listener)
                return;
        ds_link_unlisten(listener->link);
        free(listener);
}

/* The xconn operations. */

/* Sends the link has completed, their buffers into the free list, waiting up to wait_ms
 * for one. The pipeline's disk thread takes buffers too (take_buf), hence the lock; the
 * wait for completions is the link's own, outside it. Returns how many, or a negative
 * errno. */
static int reap_send_bufs(struct xverbs *x, int wait_ms)
{
        void *reaped[XFTP_VERBS_WINDOW];
        struct ds_error ignored;
        int got = ds_link_reap(x->link, reaped, XFTP_VERBS_WINDOW, wait_ms, &ignored);

        pthread_mutex_lock(&x->free_lock);
        for (int i = 0; i < got; i++)
                x->free_bufs[x->free_count++] = reaped[i];
        pthread_mutex_unlock(&x->free_lock);
        return got;
}

/* A free registered buffer: one not yet sent, or one whose send has completed. */
static void *take_send_buf(struct xverbs *x, int wait_ms, int *rc)
{
        void *buf = NULL;
        int got = 0;

        pthread_mutex_lock(&x->free_lock);
        if (x->free_count == 0) {
                pthread_mutex_unlock(&x->free_lock);
                got = reap_send_bufs(x, wait_ms);
                pthread_mutex_lock(&x->free_lock);
        }
        if (x->free_count > 0)
                buf = x->free_bufs[--x->free_count];
        pthread_mutex_unlock(&x->free_lock);
        *rc = got < 0 ? got : 0;
        return buf;
}

static void put_send_buf(struct xverbs *x, void *buf)
{
        pthread_mutex_lock(&x->free_lock);
        x->free_bufs[x->free_count++] = buf;
        pthread_mutex_unlock(&x->free_lock);
}

/* Posts the staged blocks, oldest first. The link takes what its credit allows (waiting
 * for some, up to its stall limit); when it takes none until its sends are reaped, they
 * are reaped here into the free list, a slice at a time, until a stop. Returns 0, or a
 * negative errno with nothing left staged: the stream has failed, and what was staged is
 * not sent. */
static int post_staged(struct xverbs *x)
{
        struct ds_error ignored;
        while (x->staged_count > 0) {
                int n = ds_link_send(x->link, x->staged, x->staged_count, &ignored);
                if (n == 0 && ds_stopping()) {
                        n = -EINTR;
                } else if (n == 0) {
                        n = reap_send_bufs(x, SLICE_MS);
                        n = n < 0 ? n : 0;
                } else if (n > 0) {
                        x->sent += (unsigned)n;
                        x->staged_count -= (unsigned)n;
                        memmove(x->staged, x->staged + n, x->staged_count * sizeof(x->staged[0]));
                }
                if (n < 0) {
                        x->staged_count = 0;
                        return n;
                }
        }
        return 0;
}

/* One message: payload bytes at buf, then the header of the block they make. It is
 * staged, and with more (another block follows at once) left there. Returns 1 (taken) or
 * a negative errno. */
static int post_block(struct xverbs *x, uint8_t *buf, const struct xftp_modee_block *block,
                      bool more)
{
        xftp_modee_encode(block, buf + block->count);
        x->staged[x->staged_count] =
            (struct ds_msg){.buf = buf,
                            .len = (uint32_t)(block->count + XFTP_MODEE_HEADER),
                            .kind = DS_MSG_DATA,
                            .seq = x->sent + x->staged_count};
        x->staged_count++;
        if (more && x->staged_count < XFTP_VERBS_WINDOW)
                return 1;
        int rc = post_staged(x);
        return rc < 0 ? rc : 1;
}

/* Whether the framer holds a message whose header and payload are all there. */
static bool framed_whole(const struct xverbs *x)
{
        return x->out && x->head_have == XFTP_MODEE_HEADER && x->out_len == x->out_want;
}

/* The framer's message, when its payload is all there: posted (after any staged), and
 * the block moves on to its next message or is done. Returns 1 or a negative errno. */
static int post_framed(struct xverbs *x)
{
        struct xftp_modee_block *b = &x->block;
        bool last = b->count == x->out_want;
        struct xftp_modee_block part = {
            .desc = last ? b->desc : 0, .count = x->out_want, .offset = b->offset};
        int rc = post_block(x, x->out, &part, false);
        if (rc < 0)
                return rc;
        x->out = NULL;
        b->count -= x->out_want;
        b->offset += x->out_want;
        x->out_len = 0;
        x->out_want = b->count < XFTP_XFER_BLOCK ? b->count : XFTP_XFER_BLOCK;
        if (last)
                x->head_have = 0;
        return 1;
}

/* Frames len bytes of the MODE E stream at p into messages (the copy path): each
 * header's block is cut into messages of at most a buffer's payload, each with a header
 * of its own after it. Returns the bytes taken, -EAGAIN when none could be (no buffer
 * within wait_ms), or a negative errno. */
static ssize_t frame(struct xverbs *x, const uint8_t *p, size_t len, int wait_ms)
{
        size_t used = 0;
        int rc;

        for (;;) {
                /* A failure after bytes were taken returns their count: they are framed
                 * and kept, and a caller that retries must not offer them again. */
                if (framed_whole(x)) {
                        if ((rc = post_framed(x)) < 0)
                                return used ? (ssize_t)used : rc;
                        continue;
                }
                if (used == len)
                        break;
                if (!x->out && !(x->out = take_send_buf(x, wait_ms, &rc))) {
                        if (rc < 0)
                                return used ? (ssize_t)used : rc;
                        break;
                }
                wait_ms = 0; /* bytes taken are kept: return them rather than wait again */
                if (x->head_have < XFTP_MODEE_HEADER) {
                        size_t n = XFTP_MODEE_HEADER - x->head_have;
                        n = n < len - used ? n : len - used;
                        memcpy(x->head + x->head_have, p + used, n);
                        x->head_have += (unsigned)n;
                        used += n;
                        struct ds_error err;
                        if (x->head_have == XFTP_MODEE_HEADER &&
                            xftp_modee_decode(x->head, UINT64_MAX, &x->block, &err) < 0)
                                return -EPROTO;
                        x->out_len = 0;
                        x->out_want =
                            x->block.count < XFTP_XFER_BLOCK ? x->block.count : XFTP_XFER_BLOCK;
                } else {
                        size_t n = x->out_want - x->out_len;
                        n = n < len - used ? n : len - used;
                        memcpy(x->out + x->out_len, p + used, n);
                        x->out_len += n;
                        used += n;
                }
        }
        return used ? (ssize_t)used : -EAGAIN;
}

static bool is_send_buf(const struct xverbs *x, const void *p)
{
        return x->sender && ds_pool_index_of(x->pool, p) >= 0;
}

/* A block whose payload is in a buffer take_buf lent: its header goes after it and the
 * buffer is the message, with no copy. */
static ssize_t send_in_place(struct xverbs *x, const struct iovec *iov, bool more)
{
        struct xftp_modee_block block;
        struct ds_error err;
        if (x->head_have != 0 || iov[0].iov_len != XFTP_MODEE_HEADER ||
            xftp_modee_decode(iov[0].iov_base, UINT64_MAX, &block, &err) < 0 ||
            block.count != iov[1].iov_len || block.count > XFTP_XFER_BLOCK)
                return -EINVAL; /* a lent buffer comes whole, as the block's payload */
        int rc = post_block(x, iov[1].iov_base, &block, more);
        return rc < 0 ? rc : (ssize_t)(XFTP_MODEE_HEADER + block.count);
}

static ssize_t verbs_sendv(struct xftp_conn *c, const struct iovec *iov, int cnt, int flags)
{
        struct xverbs *x = c->impl;
        int wait_ms = flags & MSG_DONTWAIT ? 0 : SLICE_MS;
        size_t taken = 0;

        if (!x->sender)
                return -EINVAL;
        if (cnt == 2 && is_send_buf(x, iov[1].iov_base))
                return send_in_place(x, iov, flags & MSG_MORE);
        for (int i = 0; i < cnt; i++) {
                ssize_t n = frame(x, iov[i].iov_base, iov[i].iov_len, taken ? 0 : wait_ms);
                if (n < 0)
                        return taken ? (ssize_t)taken : n;
                taken += (size_t)n;
                if ((size_t)n < iov[i].iov_len)
                        break;
        }
        return (ssize_t)taken;
}

/* A buffer for up to len payload bytes that a sendv then sends in place. */
static int verbs_take_buf(struct xftp_conn *c, size_t len, int wait_ms, void **buf)
{
        struct xverbs *x = c->impl;
        int rc;
        if (!x->sender)
                return -EINVAL;
        if (len > XFTP_XFER_BLOCK)
                return -EMSGSIZE;
        *buf = take_send_buf(x, wait_ms, &rc);
        return *buf ? 0 : rc < 0 ? rc : -EAGAIN;
}

static void verbs_put_buf(struct xftp_conn *c, void *buf)
{
        put_send_buf(c->impl, buf);
}

/* Data message number is read (or its loan is back): it and every read one after the
 * oldest go back to the link, in order. No more than the window is held (the sender has
 * no credit for more), so number's place in held is its own. */
static void done_with(struct xverbs *x, uint64_t number)
{
        pthread_mutex_lock(&x->held_lock);
        x->held_done[number % XFTP_VERBS_WINDOW] = true;
        while (x->held_first < x->received && x->held_done[x->held_first % XFTP_VERBS_WINDOW]) {
                ds_link_release(x->link, &x->held[x->held_first % XFTP_VERBS_WINDOW], 1);
                x->held_first++;
        }
        pthread_mutex_unlock(&x->held_lock);
}

/* Whether a message is one block as the sender frames them: its payload, then a header
 * that counts exactly those bytes. */
static bool framed(const struct ds_msg *msg)
{
        struct xftp_modee_block block;
        struct ds_error err;
        if (msg->len < XFTP_MODEE_HEADER)
                return false;
        const uint8_t *head = (const uint8_t *)msg->buf + msg->len - XFTP_MODEE_HEADER;
        return xftp_modee_decode(head, UINT64_MAX, &block, &err) == 0 &&
               block.count == msg->len - XFTP_MODEE_HEADER;
}

/* The next data message into x->msg: 1, 0 when none came within wait_ms, -EPIPE when the
 * sender closed or said END, -EPROTO for a message that is not a framed block, or a
 * negative errno. Control frames are the session's. */
static int next_msg(struct xverbs *x, int wait_ms)
{
        struct ds_error ignored;
        for (;;) {
                if (x->session.ended)
                        return -EPIPE; /* END comes after every message (RC keeps order) */
                int n = ds_link_recv(x->link, &x->msg, 1, wait_ms, &ignored);
                if (n <= 0)
                        return n;
                if (x->msg.kind == DS_MSG_DATA) {
                        pthread_mutex_lock(&x->held_lock);
                        x->held[x->received % XFTP_VERBS_WINDOW] = x->msg;
                        x->held_done[x->received % XFTP_VERBS_WINDOW] = false;
                        x->received++;
                        pthread_mutex_unlock(&x->held_lock);
                        x->has_msg = true;
                        x->msg_used = 0;
                        x->received_bytes += x->msg.len;
                        return framed(&x->msg) ? 1 : -EPROTO;
                }
                ds_session_handle(&x->session, &x->msg, &ignored);
                ds_link_release(x->link, &x->msg, 1);
        }
}

/* The stream a message holds: the header (at its end) first, then the payload. */
static const uint8_t *stream_at(const struct xverbs *x, uint32_t at, uint32_t *left)
{
        uint32_t payload = x->msg.len - XFTP_MODEE_HEADER;
        const uint8_t *buf = x->msg.buf;
        *left = at < XFTP_MODEE_HEADER ? XFTP_MODEE_HEADER - at : x->msg.len - at;
        return at < XFTP_MODEE_HEADER ? buf + payload + at : buf + (at - XFTP_MODEE_HEADER);
}

static ssize_t verbs_recv(struct xftp_conn *c, void *buf, size_t len, int flags)
{
        struct xverbs *x = c->impl;
        size_t done = 0;

        if (x->sender)
                return -EINVAL;
        while (done < len) {
                if (!x->has_msg) {
                        int rc = next_msg(x, done || (flags & MSG_DONTWAIT) ? 0 : SLICE_MS);
                        if (rc == 0 || (rc < 0 && rc != -EPROTO && done))
                                break;
                        if (rc == -EPIPE)
                                return 0; /* the peer's end, as a socket's close reads */
                        if (rc < 0)
                                return rc;
                }
                uint32_t left;
                const uint8_t *from = stream_at(x, x->msg_used, &left);
                size_t take = len - done < left ? len - done : left;
                /* A copy out of the receive slot (a header; a payload not lent), which goes
                 * back to the sender as credit once read. */
                memcpy((char *)buf + done, from, take);
                done += take;
                x->msg_used += (uint32_t)take;
                if (x->msg_used == x->msg.len) {
                        x->has_msg = false;
                        done_with(x, x->received - 1);
                }
        }
        return done ? (ssize_t)done : -EAGAIN;
}

/* The payload of the message being read, its header read, when it is len bytes: lent
 * where it lies, at the start of its receive slot (page-aligned, as O_DIRECT wants), and
 * from there written to the file with no copy. */
static void *verbs_lend(struct xftp_conn *c, size_t len, uint64_t *ticket)
{
        struct xverbs *x = c->impl;
        if (x->sender || !x->has_msg || x->msg_used != XFTP_MODEE_HEADER ||
            x->msg.len - XFTP_MODEE_HEADER != len)
                return NULL;
        x->has_msg = false;
        *ticket = x->received - 1;
        return x->msg.buf;
}

static void verbs_give_back(struct xftp_conn *c, uint64_t ticket)
{
        done_with(c->impl, ticket);
}

/* What is held goes with the link: nobody reuses its slots now. */
static void stream_free(struct xverbs *x)
{
        ds_link_close(x->link); /* before the pool it registered */
        if (!x->pool_lent)
                ds_pool_destroy(x->pool);
        pthread_mutex_destroy(&x->held_lock);
        pthread_mutex_destroy(&x->free_lock);
        free(x);
}

/* The end of a stream. The sender says END and waits (at most the channel's timeout) for
 * the receiver's FINAL, which its close sends before it disconnects: the disconnect then
 * flushes nothing the receiver has not read, and the sender hears of it on the data
 * queue pair, sooner than from rdma_cm's disconnect. A receiver gone without a FINAL ends
 * the wait as soon as the link says so. */
static int verbs_close(struct xftp_conn *c)
{
        struct xverbs *x = c->impl;
        struct ds_error ignored;
        struct ds_wire_final final = {.messages = x->received, .bytes = x->received_bytes};

        if (x->sender) {
                post_staged(x); /* before the END */
                ds_session_close(&x->session, x->sent, 0, &final, &ignored);
        } else {
                ds_session_finish(&x->session, &final, &ignored);
        }
        stream_free(x);
        return 0;
}

static void verbs_drop(struct xftp_conn *c)
{
        stream_free(c->impl);
}

static const struct xftp_conn_ops xconn_verbs = {
    .name = "verbs",
    .sendv = verbs_sendv,
    .recv = verbs_recv,
    .take_buf = verbs_take_buf,
    .put_buf = verbs_put_buf,
    .lend = verbs_lend,
    .give_back = verbs_give_back,
    .close = verbs_close,
    .drop = verbs_drop,
};

static void wrap(struct xftp_conn *c, struct xverbs *x)
{
        *c = (struct xftp_conn){.ops = &xconn_verbs, .fd = -1, .impl = x};
}

/* Set-up. */

static struct xverbs *stream_new(struct ds_link *link, bool sender, struct ds_error *err)
{
        struct xverbs *x = calloc(1, sizeof(*x));
        if (!x) {
                ds_link_close(link);
                ds_fail(err, -ENOMEM, "verbs stream");
                return NULL;
        }
        x->link = link;
        x->sender = sender;
        pthread_mutex_init(&x->held_lock, NULL);
        pthread_mutex_init(&x->free_lock, NULL);
        return x;
}

/* What the receiver checks in a hello before it registers anything. */
struct admission {
        unsigned streams;
        struct xftp_verbs_buffers *buffers; /* lent as receive slots; may be NULL */
        uint32_t seen;                      /* streams already accepted, by bit */
        uint64_t run_id;
        char why[128];
};

static uint32_t admit(struct ds_session *s, void *ctx)
{
        struct admission *a = ctx;
        struct ds_wire_hello *h = &s->hello;
        if (h->msg_size == 0 || h->msg_size > XFTP_VERBS_MSG) {
                s->ack.max_msg = XFTP_VERBS_MSG;
                snprintf(a->why, sizeof(a->why), "messages of %u bytes (at most %u)", h->msg_size,
                         XFTP_VERBS_MSG);
                return DS_ACK_TOO_BIG;
        }
        if (h->op != DS_OP_DEFAULT && h->op != DS_OP_WRITE) {
                snprintf(a->why, sizeof(a->why), "an op other than RDMA WRITE");
                return DS_ACK_UNSUPPORTED;
        }
        if (h->streams != a->streams || h->stream >= a->streams || (a->seen >> h->stream & 1u) ||
            (a->seen && h->run_id != a->run_id)) {
                snprintf(a->why, sizeof(a->why),
                         "stream %u of %u where %u streams of one run "
                         "were due",
                         h->stream, h->streams, a->streams);
                return DS_ACK_CONFLICT;
        }
        /* A sender of another framing (blast, an older xftp) would be misread. */
        if (!(h->flags & DS_HELLO_MODEE)) {
                snprintf(a->why, sizeof(a->why),
                         "messages not framed as MODE E blocks, data first");
                return DS_ACK_UNSUPPORTED;
        }
        /* The slots this side registers: never more than its window, whatever is asked. */
        if (h->window == 0 || h->window > XFTP_VERBS_WINDOW)
                h->window = XFTP_VERBS_WINDOW;
        a->seen |= 1u << h->stream;
        a->run_id = h->run_id;
        if (a->buffers)
                xftp_verbs_buffers_join(a->buffers);
        if (a->buffers && h->stream < a->buffers->count)
                s->recv_pool = a->buffers->pool[h->stream];
        return DS_ACK_OK;
}

/* One link from the peer's host (any host when host is NULL), or 0 when a slice passed
 * without one. */
static int accept_one(struct xftp_verbs_listener *l, const char *host, struct ds_link **out,
                      int wait_ms, struct ds_error *err)
{
        struct ds_link *link;
        int rc = ds_link_accept(l->link, &link, wait_ms, err);
        if (rc == -ETIMEDOUT || rc == -EAGAIN)
                return 0;
        if (rc < 0)
                return rc;
        if (host && !at_host(link->peer, host)) {
                ds_link_close(link); /* a third host racing for the port gets nothing */
                return 0;
        }
        *out = link;
        return 1;
}

int xftp_verbs_accept(struct xftp_verbs_listener *l, const struct xftp_addr *peer,
                      struct xftp_conn *conns, unsigned n, const struct xftp_verbs_opts *opts,
                      struct ds_error *err)
{
        char host[INET6_ADDRSTRLEN];
        struct admission admission = {.streams = n, .buffers = opts->buffers};
        uint64_t deadline = ds_now_ns() + (uint64_t)opts->timeout_ms * 1000000u;
        unsigned done = 0;
        int rc = 0;

        if (peer)
                host_text(peer, host, sizeof(host));
        else
                snprintf(host, sizeof(host), "any host");
        for (unsigned i = 0; i < n; i++)
                xftp_conn_none(&conns[i]);
        while (done < n && rc == 0) {
                int left = ds_deadline_left_ms(deadline);
                struct ds_link *link = NULL;
                if (stopped(opts))
                        rc = ds_fail(err, -EINTR, "stopped waiting for verbs links");
                else if (left == 0)
                        rc = ds_fail(err, -ETIMEDOUT, "%u of %u verbs links came from %s in %d ms",
                                     done, n, host, opts->timeout_ms);
                else if ((rc = accept_one(l, peer ? host : NULL, &link,
                                          left < SLICE_MS ? left : SLICE_MS, err)) > 0) {
                        struct xverbs *x = stream_new(link, false, err);
                        rc = x ? ds_session_accept(&x->session, link, admit, &admission,
                                                   opts->timeout_ms, err)
                               : -ENOMEM;
                        if (rc == -EPROTO && admission.why[0])
                                ds_fail(err, 0, "verbs hello from %s refused: %s", link->peer,
                                        admission.why);
                        if (x && rc < 0)
                                stream_free(x);
                        if (rc == 0) {
                                wrap(&conns[x->session.hello.stream], x);
                                done++;
                        }
                }
        }
        if (rc < 0)
                xftp_conn_drop_all(conns, n);
        return rc < 0 ? rc : 0;
}

static int connect_one(const struct xftp_addr *addr, unsigned stream, unsigned n, uint64_t run_id,
                       const struct xftp_verbs_opts *opts, struct xftp_conn *conn,
                       struct ds_error *err)
{
        char host[INET6_ADDRSTRLEN];
        struct ds_link_config config = {.host = host_text(addr, host, sizeof(host)),
                                        .port = xftp_addr_port(addr),
                                        .timeout_ms = opts->timeout_ms};
        struct ds_link *link;
        int rc = ds_link_connect(&ds_link_verbs, &link, &config, err);
        if (rc < 0)
                return rc;
        struct xverbs *x = stream_new(link, true, err);
        if (!x)
                return -ENOMEM;
        struct xftp_verbs_buffers *lend = opts->buffers;
        if (lend)
                xftp_verbs_buffers_join(lend);
        if (lend && stream < lend->count) {
                x->pool = lend->pool[stream];
                x->pool_lent = true;
        } else {
                rc = ds_pool_create(&x->pool, XFTP_VERBS_MSG, XFTP_VERBS_WINDOW, 0, err);
        }
        struct ds_wire_hello hello = {.flags = DS_HELLO_MODEE,
                                      .msg_size = XFTP_VERBS_MSG,
                                      .flow = DS_FLOW_CREDIT,
                                      .op = DS_OP_DEFAULT,
                                      .streams = (uint16_t)n,
                                      .stream = (uint16_t)stream,
                                      .run_id = run_id,
                                      .window = XFTP_VERBS_WINDOW};
        if (rc == 0)
                rc = ds_session_open(&x->session, link, &hello, x->pool, opts->timeout_ms, err);
        if (rc < 0) {
                stream_free(x);
                return rc;
        }
        for (unsigned i = 0; i < XFTP_VERBS_WINDOW; i++)
                x->free_bufs[x->free_count++] = ds_pool_buf(x->pool, i);
        wrap(conn, x);
        return 0;
}

int xftp_verbs_connect(const struct xftp_addr *addr, struct xftp_conn *conns, unsigned n,
                       const struct xftp_verbs_opts *opts, struct ds_error *err)
{
        uint64_t run_id;
        int rc = 0;

        if (getrandom(&run_id, sizeof(run_id), 0) != sizeof(run_id))
                run_id = ds_now_ns();
        for (unsigned i = 0; i < n; i++)
                xftp_conn_none(&conns[i]);
        for (unsigned i = 0; i < n && rc == 0; i++) {
                if (stopped(opts))
                        rc = ds_fail(err, -EINTR, "stopped opening verbs links");
                else
                        rc = connect_one(addr, i, n, run_id, opts, &conns[i], err);
        }
        if (rc < 0)
                xftp_conn_drop_all(conns, n);
        return rc;
}
