/* The udp link: the kernel's datagrams, for comparison. A message larger than a datagram
 * travels as a train; sink gives each blast stream a socket of its own, connected to
 * the peer, so the kernel sorts the streams apart. */
#include <dragstrip/link.h>

#include "link_dgram.h"

#include <dragstrip/error.h>
#include <dragstrip/stop.h>
#include <dragstrip/net.h>
#include <dragstrip/pool.h>

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define UDP_MAX_MSG     (256u << 20)
#define UDP_PAYLOAD_MAX 65507u
#define SLOT_BYTES      65536u
#define RX_SLOTS        64
#define HELLO_SLOTS     2 /* before a hello is admitted: the held hello and one more */
#define TX_SLOTS        8 /* a sender only receives control frames */
#define BATCH           32
#define SOCK_BYTES      (8 << 20)
#define MAX_PEERS       256

struct udp_listener;

struct udp_link {
        struct ds_link base;
        int fd;
        struct dgram dg;
        struct ds_pool *slots; /* receive buffers, one datagram each */
        uint32_t frag_max;     /* payload bytes per datagram: what fits the path MTU */
        uint8_t *held;         /* a datagram read but not yet taken (the hello, or FULL) */
        size_t held_len;
        struct udp_listener *listener; /* receiver: where its peer is registered */
        struct sockaddr_storage peer;
};

struct udp_listener {
        struct ds_link_listener base;
        int fd;
        struct sockaddr_storage local;
        socklen_t local_len;
        uint8_t frame[SLOT_BYTES];
        pthread_mutex_t lock; /* links close from their own threads */
        struct {
                struct sockaddr_storage addr;
                uint32_t session;
                bool used;
        } peers[MAX_PEERS];
};

/* Datagrams that IP must fragment are lost whole when one fragment is, and cost the
 * receiver far more buffer than their bytes: keep each within the path MTU. */
static uint32_t fit_mtu(int fd)
{
        struct sockaddr_storage local;
        socklen_t len = sizeof(local);
        int mtu = 0;
        socklen_t mtu_len = sizeof(mtu);
        uint32_t ip_hdr = 28;
        if (getsockname(fd, (struct sockaddr *)&local, &len) == 0 && local.ss_family == AF_INET6) {
                ip_hdr = 48;
                if (getsockopt(fd, IPPROTO_IPV6, IPV6_MTU, &mtu, &mtu_len) < 0)
                        mtu = 0;
        } else if (getsockopt(fd, IPPROTO_IP, IP_MTU, &mtu, &mtu_len) < 0) {
                mtu = 0;
        }
        uint32_t payload = mtu > (int)ip_hdr ? (uint32_t)mtu - ip_hdr : 1500 - ip_hdr;
        if (payload > UDP_PAYLOAD_MAX)
                payload = UDP_PAYLOAD_MAX;
        return payload - DS_WIRE_HDR_LEN;
}

static int udp_new(struct udp_link **out, int fd, unsigned slots, struct ds_error *err)
{
        struct udp_link *u = calloc(1, sizeof(*u));
        if (!u) {
                close(fd);
                return ds_fail(err, -ENOMEM, "udp link");
        }
        u->fd = fd;
        u->frag_max = fit_mtu(fd);
        u->dg.link = &u->base;
        u->base.ops = &ds_link_udp;
        u->base.caps = ds_link_udp.caps;
        u->base.max_msg = UDP_MAX_MSG;
        int rc = ds_pool_create(&u->slots, SLOT_BYTES, slots, 0, err);
        if (rc < 0) {
                close(fd);
                free(u);
                return rc;
        }
        /* Bigger socket buffers absorb bursts. Root may pass net.core.rmem_max (a whole
         * train of 64K datagrams needs it); refused sizes only cost loss, counted. */
        int bytes = SOCK_BYTES;
        struct ds_error ignored;
        if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof(bytes)) < 0 ||
            setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof(bytes)) < 0)
                (void)ds_net_set_buffers(fd, SOCK_BYTES, &ignored);
        *out = u;
        return 0;
}

static int udp_connect(struct ds_link **out, const struct ds_link_config *config,
                       struct ds_error *err)
{
        int fd = ds_net_connect(config->host, config->port, SOCK_DGRAM, config->timeout_ms, err);
        if (fd < 0)
                return fd;
        struct udp_link *u;
        int rc = udp_new(&u, fd, TX_SLOTS, err);
        if (rc < 0)
                return rc;
        u->dg.session = dgram_session();
        snprintf(u->base.peer, sizeof(u->base.peer), "%s:%u", config->host, config->port);
        *out = &u->base;
        return 0;
}

static int udp_listen(struct ds_link_listener **out, const struct ds_link_config *config,
                      struct ds_error *err)
{
        struct udp_listener *l = calloc(1, sizeof(*l));
        if (!l)
                return ds_fail(err, -ENOMEM, "udp listener");
        l->fd = ds_net_listen(config->host, config->port, SOCK_DGRAM, err);
        if (l->fd < 0) {
                int rc = l->fd;
                free(l);
                return rc;
        }
        /* Each peer's socket binds this same address, connected to the peer; the kernel
         * prefers a connected socket, so nothing is split between receivers. */
        int one = 1;
        l->local_len = sizeof(l->local);
        if (setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
            getsockname(l->fd, (struct sockaddr *)&l->local, &l->local_len) < 0) {
                int rc = ds_fail(err, -errno, "udp getsockname");
                close(l->fd);
                free(l);
                return rc;
        }
        pthread_mutex_init(&l->lock, NULL);
        l->base.ops = &ds_link_udp;
        *out = &l->base;
        return 0;
}

static int peer_find(struct udp_listener *l, const struct sockaddr_storage *addr, uint32_t session)
{
        for (int i = 0; i < MAX_PEERS; i++)
                if (l->peers[i].used && l->peers[i].session == session &&
                    memcmp(&l->peers[i].addr, addr, sizeof(*addr)) == 0)
                        return i;
        return -1;
}

/* A socket on the listener's own address, connected to the peer: the kernel then hands
 * it that peer's datagrams, and everyone else's still go to the listener. */
static int open_peer_socket(struct udp_listener *l, const struct sockaddr_storage *peer,
                            socklen_t peer_len, struct ds_error *err)
{
        int fd = socket(l->local.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return ds_fail(err, -errno, "udp socket");
        int one = 1, zero = 0;
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
            (l->local.ss_family == AF_INET6 &&
             setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) < 0) ||
            bind(fd, (struct sockaddr *)&l->local, l->local_len) < 0 ||
            connect(fd, (const struct sockaddr *)peer, peer_len) < 0) {
                int rc = ds_fail(err, -errno, "udp socket for a new peer");
                close(fd);
                return rc;
        }
        return fd;
}

static int udp_accept(struct ds_link_listener *listener, struct ds_link **out, int timeout_ms,
                      struct ds_error *err)
{
        struct udp_listener *l = (struct udp_listener *)listener;
        int ready = ds_poll_one(l->fd, POLLIN, timeout_ms);
        if (ready <= 0)
                return ready < 0 ? ds_fail(err, ready, "udp poll") : -ETIMEDOUT;
        struct sockaddr_storage peer = {0};
        socklen_t peer_len = sizeof(peer);
        ssize_t n = recvfrom(l->fd, l->frame, sizeof(l->frame), MSG_DONTWAIT,
                             (struct sockaddr *)&peer, &peer_len);
        if (n < 0)
                return errno == EAGAIN ? -ETIMEDOUT : ds_fail(err, -errno, "udp recvfrom");
        struct ds_wire_hdr h;
        enum ds_wire_reject bad = ds_wire_parse(l->frame, (size_t)n, DS_WIRE_MSG_MAX, 0, &h);
        if (bad != DS_WIRE_OK) {
                l->base.malformed[bad]++;
                return -ETIMEDOUT;
        }
        pthread_mutex_lock(&l->lock);
        int known = peer_find(l, &peer, h.session);
        int slot = -1;
        for (int i = 0; known < 0 && i < MAX_PEERS && slot < 0; i++)
                if (!l->peers[i].used)
                        slot = i;
        pthread_mutex_unlock(&l->lock);
        if (known >= 0) /* raced ahead of its own socket: the session repeats it anyway */
                return -ETIMEDOUT;
        if (h.type != DS_WIRE_HELLO || slot < 0) {
                l->base.malformed[DS_WIRE_SESSION_BAD]++;
                return -ETIMEDOUT;
        }
        int fd = open_peer_socket(l, &peer, peer_len, err);
        if (fd < 0)
                return fd;
        /* Anyone may send a hello, so a peer not yet admitted holds a few slots; the data's
         * come in prepare(), once the server's budget has taken them (rx_fixed). */
        struct udp_link *u;
        int rc = udp_new(&u, fd, HELLO_SLOTS, err);
        if (rc < 0)
                return rc;
        u->base.rx_fixed = (uint64_t)RX_SLOTS * SLOT_BYTES;
        u->dg.session = h.session;
        u->listener = l;
        u->peer = peer;
        ds_net_format((struct sockaddr *)&peer, peer_len, u->base.peer, sizeof(u->base.peer));
        u->held = ds_pool_get(u->slots);
        memcpy(u->held, l->frame, (size_t)n);
        u->held_len = (size_t)n;
        pthread_mutex_lock(&l->lock);
        l->peers[slot].addr = peer;
        l->peers[slot].session = h.session;
        l->peers[slot].used = true;
        pthread_mutex_unlock(&l->lock);
        *out = &u->base;
        return 0;
}

static void udp_unlisten(struct ds_link_listener *listener)
{
        struct udp_listener *l = (struct udp_listener *)listener;
        close(l->fd);
        pthread_mutex_destroy(&l->lock);
        free(l);
}

/* A receiver admitted: its few handshake slots give way to RX_SLOTS for the data. The
 * handshake has given every slot back (the session releases the hello before admitting
 * it) but a datagram held for later, which moves. */
static int grow_slots(struct udp_link *u, struct ds_error *err)
{
        struct ds_pool *slots;
        int rc = ds_pool_create(&slots, SLOT_BYTES, RX_SLOTS, 0, err);
        if (rc < 0)
                return rc;
        if (u->held) {
                uint8_t *moved = ds_pool_get(slots);
                memcpy(moved, u->held, u->held_len);
                u->held = moved;
        }
        ds_pool_destroy(u->slots);
        u->slots = slots;
        return 0;
}

static int udp_prepare(struct ds_link *link, const struct ds_link_params *params,
                       struct ds_link_offer *mine, struct ds_error *err)
{
        struct udp_link *u = (struct udp_link *)link;
        if (params->send_pool)
                return 0;
        int rc = u->base.rx_fixed ? grow_slots(u, err) : 0;
        if (rc == 0)
                rc = dgram_prepare(&u->dg, params->msg_size, err);
        if (rc < 0)
                return rc;
        /* What the socket buffer really holds (net.core.rmem_max may cap it), in messages.
         * The kernel charges a datagram far more than its bytes: measured on veth, loss
         * began near 10 trains of four 64K datagrams in a 16 MiB buffer, so each is
         * counted at twice its size rounded up to a power of two, against half the buffer. */
        int rcvbuf = 0;
        socklen_t len = sizeof(rcvbuf);
        if (getsockopt(u->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &len) < 0)
                return ds_fail(err, -errno, "udp: SO_RCVBUF");
        uint64_t frames = (params->msg_size + u->frag_max - 1) / u->frag_max;
        uint64_t datagram = params->msg_size < u->frag_max ? params->msg_size : u->frag_max;
        uint64_t charge = 4096;
        while (charge < datagram + DS_WIRE_HDR_LEN + 1024)
                charge <<= 1;
        uint64_t window = (uint64_t)rcvbuf / 2 / (frames * 2 * charge);
        mine->window = window ? (uint32_t)window : 1;
        return 0;
}

static int udp_send_failed(struct ds_link *link, int errnum, struct ds_error *err)
{
        if (errnum == EINTR)
                return 0;
        if (errnum == ECONNREFUSED) /* the port answered ICMP unreachable */
                return ds_fail(err, -ECONNREFUSED, "udp: nobody is receiving at %s", link->peer);
        return ds_fail(err, -errnum, "udp send to %s", link->peer);
}

static struct dgram_tx udp_tx(const struct udp_link *u)
{
        return (struct dgram_tx){
            .fd = u->fd, .frag_max = u->frag_max, .batch = BATCH, .send_failed = udp_send_failed};
}

static int udp_send(struct ds_link *link, const struct ds_msg *msgs, unsigned n,
                    struct ds_error *err)
{
        struct udp_link *u = (struct udp_link *)link;
        struct dgram_tx tx = udp_tx(u);
        return dgram_send(&u->dg, &tx, msgs, n, err);
}

static int udp_send_ctl(struct ds_link *link, uint8_t type, const void *payload, size_t len,
                        struct ds_error *err)
{
        struct udp_link *u = (struct udp_link *)link;
        struct dgram_tx tx = udp_tx(u);
        return dgram_send_ctl(&u->dg, &tx, type, payload, len, err);
}

/* Takes one datagram in slot; returns false when it must wait (FULL). */
static bool take_slot(struct udp_link *u, uint8_t *slot, size_t len, struct ds_msg *msg,
                      unsigned *got)
{
        switch (dgram_take(&u->dg, slot, len, msg)) {
        case DGRAM_INPLACE:
                msg->cookie = (uintptr_t)slot;
                (*got)++;
                return true;
        case DGRAM_OWNED:
                (*got)++;
                ds_pool_put(u->slots, slot);
                return true;
        case DGRAM_NONE:
                ds_pool_put(u->slots, slot);
                return true;
        default:
                u->held = slot;
                u->held_len = len;
                return false;
        }
}

static int udp_recv(struct ds_link *link, struct ds_msg *msgs, unsigned max, int timeout_ms,
                    struct ds_error *err)
{
        struct udp_link *u = (struct udp_link *)link;
        unsigned got = 0;
        if (u->held) {
                uint8_t *slot = u->held;
                u->held = NULL;
                if (!take_slot(u, slot, u->held_len, &msgs[got], &got))
                        return 0;
        }
        int ready = ds_poll_one(u->fd, POLLIN, got ? 0 : timeout_ms);
        if (ready < 0)
                return ds_fail(err, ready, "udp poll");
        while (ready && got < max) {
                uint8_t *slots[BATCH];
                struct iovec iov[BATCH];
                struct mmsghdr mm[BATCH];
                unsigned k = 0;
                while (k < BATCH && k < max - got && (slots[k] = ds_pool_get(u->slots))) {
                        iov[k] = (struct iovec){slots[k], SLOT_BYTES};
                        mm[k] = (struct mmsghdr){.msg_hdr = {.msg_iov = &iov[k], .msg_iovlen = 1}};
                        k++;
                }
                if (k == 0)
                        break; /* the caller holds every slot */
                int r = recvmmsg(u->fd, mm, k, MSG_DONTWAIT, NULL);
                int e = errno;
                for (unsigned i = r > 0 ? (unsigned)r : 0; i < k; i++)
                        ds_pool_put(u->slots, slots[i]);
                if (r < 0) {
                        if (e == EAGAIN || e == EINTR)
                                break;
                        ds_link_release(link, msgs, got);
                        if (e == ECONNREFUSED)
                                return ds_fail(err, -ECONNREFUSED, "udp: nobody is receiving at %s",
                                               u->base.peer);
                        return ds_fail(err, -e, "udp recv from %s", u->base.peer);
                }
                for (int i = 0; i < r; i++)
                        if (!take_slot(u, slots[i], mm[i].msg_len, &msgs[got], &got)) {
                                for (int j = i + 1; j < r; j++) /* too full: drop, counted */
                                        ds_pool_put(u->slots, slots[j]);
                                u->base.stats.fragments_lost += (uint64_t)(r - i - 1);
                                return (int)got;
                        }
                if ((unsigned)r < k)
                        break;
        }
        return (int)got;
}

static void udp_release(struct ds_link *link, const struct ds_msg *msgs, unsigned n)
{
        struct udp_link *u = (struct udp_link *)link;
        for (unsigned i = 0; i < n; i++) {
                if (msgs[i].cookie)
                        ds_pool_put(u->slots, (void *)msgs[i].cookie);
                else
                        dgram_release(&u->dg, &msgs[i]);
        }
}

static void udp_close(struct ds_link *link)
{
        struct udp_link *u = (struct udp_link *)link;
        if (u->listener) {
                pthread_mutex_lock(&u->listener->lock);
                int i = peer_find(u->listener, &u->peer, u->dg.session);
                if (i >= 0)
                        u->listener->peers[i].used = false;
                pthread_mutex_unlock(&u->listener->lock);
        }
        close(u->fd);
        dgram_free(&u->dg);
        ds_pool_destroy(u->slots);
        free(u);
}

const struct ds_link_ops ds_link_udp = {
    .name = "udp",
    .caps = DS_LINK_BOUNDARIES | DS_LINK_ZERO_COPY_RX | DS_LINK_CTL_UNRELIABLE,
    .listen = udp_listen,
    .accept = udp_accept,
    .unlisten = udp_unlisten,
    .connect = udp_connect,
    .prepare = udp_prepare,
    .send = udp_send,
    .send_ctl = udp_send_ctl,
    .recv = udp_recv,
    .release = udp_release,
    .close = udp_close,
};
