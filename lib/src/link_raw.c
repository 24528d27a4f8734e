/* The raw link: Ethernet frames of EtherType 0x88B5 on one interface, no IP needed.
 *
 * Frames go out by sendmmsg() on an AF_PACKET socket (bypassing the qdisc) and come in
 * through a TPACKET_V3 ring mapped into our memory, so a message that fits in one frame
 * is handed to sink where the kernel put it: the only copy is the kernel's. A longer
 * message goes as a train of frames and is gathered into one buffer (one copy, counted).
 * A sender only ever receives control frames (credits, acks, final counts); it reads
 * them by recv() rather than through a ring, because a ring hands a part-filled block
 * over only when its timer runs out, and a credit that waits for that stalls the stream.
 *
 * Every stream has its own socket whose BPF filter passes only its session's frames; the
 * listener's filter passes everything else (hellos, strays and junk, which it counts), so
 * a fast stream's data is never copied into the listener's ring. */
#include <dragstrip/link.h>

#include "link_dgram.h"
#include "link_raw.h"

#include <dragstrip/error.h>
#include <dragstrip/stop.h>

#include <errno.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#ifdef DS_HAVE_PCAP
#define RAW_PCAP_CAP DS_LINK_PCAP
#else
#define RAW_PCAP_CAP 0 /* no libpcap to write traces with (link_raw_pcap.c) */
#endif

#define RAW_MAX_MSG   (256u << 20)
#define LISTENER_RING (2u << 20) /* room for a burst of strays and junk between accepts */
#define NAP_US        100        /* a reader that was just handed data waits this long first */
#define BATCH         64

struct raw_listener;

struct raw_link {
        struct ds_link base;
        struct raw_port port;
        int ifindex;
        unsigned mtu;
        uint8_t mac[6];
        uint8_t eth[ETH_HDR]; /* the header of every frame we send: to the peer, from us */
        struct dgram dg;
        uint8_t hello[ETH_HDR + DS_WIRE_HDR_LEN + DS_WIRE_CTL_MAX]; /* replayed */
        size_t hello_len;
        bool sender;    /* no ring: control frames are read by recv() into ctl_frame */
        bool streaming; /* the last recv() found data: the next wait naps (raw_recv) */
        uint8_t ctl_frame[FRAME_HDR + DS_WIRE_CTL_MAX];
        struct raw_listener *listener;
};

struct raw_listener {
        struct ds_link_listener base;
        struct raw_port port;
        int ifindex;
        unsigned mtu;
        uint8_t mac[6];
        pthread_mutex_t lock; /* sessions, shared with links */
        uint32_t sessions[MAX_SESSIONS];
        unsigned nsessions;
        struct raw_trace *trace; /* NULL: not tracing */
};

/* ---- links ------------------------------------------------------------------- */

static int parse_mac(const char *text, uint8_t mac[6])
{
        unsigned v[6];
        char end;
        if (!text || sscanf(text, "%2x:%2x:%2x:%2x:%2x:%2x%c", &v[0], &v[1], &v[2], &v[3], &v[4],
                            &v[5], &end) != 6)
                return -EINVAL;
        for (int i = 0; i < 6; i++)
                mac[i] = (uint8_t)v[i];
        return 0;
}

/* A link on iface, not yet with a socket. Returns NULL with *rc and err set on failure. */
static struct raw_link *raw_new(const char *iface, int *rc, struct ds_error *err)
{
        struct raw_link *r = calloc(1, sizeof(*r));
        if (!r) {
                *rc = ds_fail(err, -ENOMEM, "raw link");
                return NULL;
        }
        r->port.fd = -1;
        r->base.ops = &ds_link_raw;
        r->base.caps = ds_link_raw.caps;
        r->base.max_msg = RAW_MAX_MSG;
        r->dg.link = &r->base;
        *rc = raw_iface_info(iface, &r->ifindex, &r->mtu, r->mac, err);
        if (*rc < 0) {
                free(r);
                return NULL;
        }
        return r;
}

static void set_peer(struct raw_link *r, const uint8_t mac[6])
{
        memcpy(r->eth, mac, 6);
        memcpy(r->eth + 6, r->mac, 6);
        r->eth[12] = DS_WIRE_ETHERTYPE >> 8;
        r->eth[13] = DS_WIRE_ETHERTYPE & 0xff;
}

static void raw_close(struct ds_link *link)
{
        struct raw_link *r = (struct raw_link *)link;
        struct raw_listener *l = r->listener;
        if (l) {
                pthread_mutex_lock(&l->lock);
                for (unsigned i = 0; i < l->nsessions; i++)
                        if (l->sessions[i] == r->dg.session)
                                l->sessions[i] = l->sessions[--l->nsessions];
                struct ds_error ignored; /* the old filter only passes less */
                (void)raw_filter_others(l->port.fd, l->sessions, l->nsessions, &ignored);
                pthread_mutex_unlock(&l->lock);
        }
        raw_port_close(&r->port);
        dgram_free(&r->dg);
        free(r);
}

static int raw_connect(struct ds_link **out, const struct ds_link_config *config,
                       struct ds_error *err)
{
        uint8_t peer[6];
        if (parse_mac(config->host, peer) < 0)
                return ds_fail(err, -EINVAL, "raw: '%s' is not a MAC address (aa:bb:cc:dd:ee:ff)",
                               config->host ? config->host : "");
        int rc;
        struct raw_link *r = raw_new(config->iface, &rc, err);
        if (!r)
                return rc;
        set_peer(r, peer);
        r->dg.session = dgram_session();
        snprintf(r->base.peer, sizeof(r->base.peer), "%s on %s", config->host, config->iface);
        r->sender = true;
        rc = raw_port_socket(&r->port, err);
        if (rc == 0)
                rc = raw_filter_session(r->port.fd, r->dg.session, err);
        if (rc == 0)
                rc = raw_port_bind(&r->port, r->ifindex, err);
        if (rc < 0) {
                raw_close(&r->base);
                return rc;
        }
        *out = &r->base;
        return 0;
}

static uint32_t frag_max(const struct raw_link *r)
{
        return r->mtu - DS_WIRE_HDR_LEN;
}

static int raw_prepare(struct ds_link *link, const struct ds_link_params *params,
                       struct ds_link_offer *mine, struct ds_error *err)
{
        struct raw_link *r = (struct raw_link *)link;
        if (params->send_pool)
                return 0;
        uint32_t fmax = frag_max(r);
        uint32_t frames = (params->msg_size + fmax - 1) / fmax;
        unsigned frame_len =
            ETH_HDR + DS_WIRE_HDR_LEN + (params->msg_size < fmax ? params->msg_size : fmax);
        raw_stream_ring_plan(&r->port, frame_len, frames);
        int rc = raw_ring_map(&r->port, err);
        if (rc == 0)
                rc = raw_port_bind(&r->port, r->ifindex, err);
        if (rc == 0)
                rc = dgram_prepare(&r->dg, params->msg_size, err);
        if (rc < 0)
                return rc;
        mine->window = raw_ring_window(&r->port, frame_len, frames);
        return 0;
}

static int raw_send_failed(struct ds_link *link, int errnum, struct ds_error *err)
{
        struct raw_link *r = (struct raw_link *)link;
        if (errnum == EINTR || errnum == ENOBUFS || errnum == EAGAIN) {
                /* The device queue is full: wait our turn, lose nothing. */
                struct pollfd pfd = {.fd = r->port.fd, .events = POLLOUT};
                (void)poll(&pfd, 1, 1);
                return 0;
        }
        if (errnum == ENETDOWN || errnum == ENXIO)
                return ds_fail(err, -EPIPE, "raw: interface went away");
        return ds_fail(err, -errnum, "raw: send");
}

static struct dgram_tx raw_tx(const struct raw_link *r)
{
        return (struct dgram_tx){.fd = r->port.fd,
                                 .prefix = r->eth,
                                 .prefix_len = ETH_HDR,
                                 .frag_max = frag_max(r),
                                 .batch = BATCH,
                                 .send_failed = raw_send_failed};
}

static int raw_send(struct ds_link *link, const struct ds_msg *msgs, unsigned n,
                    struct ds_error *err)
{
        struct raw_link *r = (struct raw_link *)link;
        struct dgram_tx tx = raw_tx(r);
        return dgram_send(&r->dg, &tx, msgs, n, err);
}

static int raw_send_ctl(struct ds_link *link, uint8_t type, const void *payload, size_t len,
                        struct ds_error *err)
{
        struct raw_link *r = (struct raw_link *)link;
        struct dgram_tx tx = raw_tx(r);
        return dgram_send_ctl(&r->dg, &tx, type, payload, len, err);
}

/* A sender's drain: control frames from the socket, each copied out by dgram_take
 * (data is refused: a sender never negotiated a message size). Stops while every control
 * slot is out, so that no frame is read without a place to go. */
static unsigned drain_ctl(struct raw_link *r, struct ds_msg *msgs, unsigned max)
{
        unsigned got = 0;
        while (got < max && !ctl_ring_full(&r->dg.ctl)) {
                ssize_t n =
                    recv(r->port.fd, r->ctl_frame, sizeof(r->ctl_frame), MSG_DONTWAIT | MSG_TRUNC);
                if (n < 0)
                        break; /* nothing more now; a dead interface shows on send */
                size_t len = (size_t)n < sizeof(r->ctl_frame) ? (size_t)n : sizeof(r->ctl_frame);
                if (len < ETH_HDR) {
                        r->base.stats.malformed[DS_WIRE_SHORT]++;
                        continue;
                }
                if (dgram_take(&r->dg, r->ctl_frame + ETH_HDR, len - ETH_HDR, &msgs[got]) ==
                    DGRAM_OWNED)
                        got++;
        }
        return got;
}

/* Reads frames from the ring into msgs; returns how many messages were filled. */
static unsigned drain(struct raw_link *r, struct ds_msg *msgs, unsigned max)
{
        if (r->sender)
                return drain_ctl(r, msgs, max);
        unsigned got = 0;
        uint8_t *frame;
        unsigned len, block;
        struct tpacket3_hdr *th;
        while (got < max && raw_ring_peek(&r->port, &frame, &len, &block, &th)) {
                raw_trace_frame(r->listener ? r->listener->trace : NULL, th, frame);
                if (len < ETH_HDR) {
                        r->base.stats.malformed[DS_WIRE_SHORT]++;
                        raw_ring_next(&r->port, false);
                        continue;
                }
                enum dgram_verdict v =
                    dgram_take(&r->dg, frame + ETH_HDR, len - ETH_HDR, &msgs[got]);
                if (v == DGRAM_FULL)
                        break;
                if (v == DGRAM_INPLACE)
                        msgs[got].cookie = (uintptr_t)block + 1;
                raw_ring_next(&r->port, v == DGRAM_INPLACE);
                if (v != DGRAM_NONE)
                        got++;
        }
        return got;
}

static int raw_recv(struct ds_link *link, struct ds_msg *msgs, unsigned max, int timeout_ms,
                    struct ds_error *err)
{
        struct raw_link *r = (struct raw_link *)link;
        unsigned got = 0;
        if (r->hello_len && max > 0) {
                enum dgram_verdict v =
                    dgram_take(&r->dg, r->hello + ETH_HDR, r->hello_len - ETH_HDR, &msgs[0]);
                r->hello_len = 0;
                got = v == DGRAM_OWNED;
        }
        if (!r->port.map && !r->sender) /* a receiver before prepare: only the hello so far */
                return (int)got;
        got += drain(r, msgs + got, max - got);
        if (got == 0 && timeout_ms != 0 && r->streaming) {
                /* Data is flowing: nap on a timer rather than in poll(), so the sender (whose
                 * CPU runs the receive path on veth) finds nobody to wake for each block. */
                struct timespec nap = {0, NAP_US * 1000};
                nanosleep(&nap, NULL);
                got = drain(r, msgs, max);
        }
        r->streaming = got > 0 && !r->sender;
        if (got == 0 && timeout_ms != 0) {
                int ready = ds_poll_one(r->port.fd, POLLIN, timeout_ms);
                if (ready < 0)
                        return ds_fail(err, ready, "raw: poll");
                got = drain(r, msgs, max);
        }
        return (int)got;
}

static void raw_release(struct ds_link *link, const struct ds_msg *msgs, unsigned n)
{
        struct raw_link *r = (struct raw_link *)link;
        for (unsigned i = 0; i < n; i++) {
                if (msgs[i].cookie)
                        raw_ring_unhold(&r->port, (unsigned)(msgs[i].cookie - 1));
                else
                        dgram_release(&r->dg, &msgs[i]);
        }
}

/* ---- the listener --------------------------------------------------------------- */

static void raw_unlisten(struct ds_link_listener *listener)
{
        struct raw_listener *l = (struct raw_listener *)listener;
        raw_port_close(&l->port);
        raw_trace_close(l->trace);
        pthread_mutex_destroy(&l->lock);
        free(l);
}

static int raw_listen(struct ds_link_listener **out, const struct ds_link_config *config,
                      struct ds_error *err)
{
        struct raw_listener *l = calloc(1, sizeof(*l));
        if (!l)
                return ds_fail(err, -ENOMEM, "raw listener");
        pthread_mutex_init(&l->lock, NULL);
        l->port.fd = -1;
        l->base.ops = &ds_link_raw;
        int rc = raw_iface_info(config->iface, &l->ifindex, &l->mtu, l->mac, err);
        if (rc == 0)
                rc = raw_port_socket(&l->port, err);
        if (rc == 0)
                rc = raw_filter_others(l->port.fd, NULL, 0, err);
        if (rc == 0) {
                raw_ring_plan(&l->port, l->mtu + ETH_HDR, LISTENER_RING);
                rc = raw_ring_map(&l->port, err);
        }
        if (rc == 0)
                rc = raw_port_bind(&l->port, l->ifindex, err);
        if (rc == 0)
                rc = raw_trace_open(&l->trace, config->pcap_path, err);
        if (rc < 0) {
                raw_unlisten(&l->base);
                return rc;
        }
        *out = &l->base;
        return 0;
}

static bool session_known(struct raw_listener *l, uint32_t session)
{
        bool known = false;
        pthread_mutex_lock(&l->lock);
        for (unsigned i = 0; i < l->nsessions && !known; i++)
                known = l->sessions[i] == session;
        pthread_mutex_unlock(&l->lock);
        return known;
}

/* A new stream said hello in frame: its own socket, filtered to its session, and the
 * listener stops seeing its data. */
static int adopt(struct raw_listener *l, const uint8_t *frame, unsigned len, uint32_t session,
                 struct ds_link **out, struct ds_error *err)
{
        char ifname[IF_NAMESIZE];
        int rc;
        struct raw_link *r = raw_new(if_indextoname((unsigned)l->ifindex, ifname), &rc, err);
        if (!r)
                return rc;
        set_peer(r, frame + 6);
        memcpy(r->hello, frame, len);
        r->hello_len = len;
        r->dg.session = session;
        snprintf(r->base.peer, sizeof(r->base.peer), "%02x:%02x:%02x:%02x:%02x:%02x", frame[6],
                 frame[7], frame[8], frame[9], frame[10], frame[11]);
        rc = raw_port_socket(&r->port, err);
        if (rc == 0)
                rc = raw_filter_session(r->port.fd, session, err);
        pthread_mutex_lock(&l->lock);
        if (rc == 0 && l->nsessions == MAX_SESSIONS)
                rc = ds_fail(err, -EBUSY, "raw: %d streams at once is the most", MAX_SESSIONS);
        if (rc == 0) {
                l->sessions[l->nsessions++] = session;
                rc = raw_filter_others(l->port.fd, l->sessions, l->nsessions, err);
                r->listener = l;
        }
        pthread_mutex_unlock(&l->lock);
        if (rc < 0) {
                raw_close(&r->base);
                return rc;
        }
        *out = &r->base;
        return 0;
}

/* Looks at one frame the listener's filter passed. Returns 1 with *out for a new
 * stream, 0 when the frame was ignored or counted, or a negative errno. */
static int listener_frame(struct raw_listener *l, const uint8_t *frame, unsigned len,
                          struct ds_link **out, struct ds_error *err)
{
        struct ds_wire_hdr h;
        enum ds_wire_reject bad =
            len < ETH_HDR ? DS_WIRE_SHORT
                          : ds_wire_parse(frame + ETH_HDR, len - ETH_HDR, DS_WIRE_MSG_MAX, 0, &h);
        if (bad != DS_WIRE_OK) {
                l->base.malformed[bad]++;
                return 0;
        }
        if (session_known(l, h.session)) /* control for a stream's own socket too */
                return 0;
        if (h.type != DS_WIRE_HELLO || len > ETH_HDR + DS_WIRE_HDR_LEN + DS_WIRE_CTL_MAX) {
                l->base.malformed[DS_WIRE_SESSION_BAD]++;
                return 0;
        }
        int rc = adopt(l, frame, len, h.session, out, err);
        return rc < 0 ? rc : 1;
}

static int raw_accept(struct ds_link_listener *listener, struct ds_link **out, int timeout_ms,
                      struct ds_error *err)
{
        struct raw_listener *l = (struct raw_listener *)listener;
        bool waited = false;
        for (;;) {
                uint8_t *frame;
                unsigned len, block;
                struct tpacket3_hdr *th;
                while (raw_ring_peek(&l->port, &frame, &len, &block, &th)) {
                        raw_trace_frame(l->trace, th, frame);
                        int rc = listener_frame(l, frame, len, out, err);
                        raw_ring_next(&l->port, false);
                        if (rc != 0)
                                return rc < 0 ? rc : 0;
                }
                if (waited)
                        return -ETIMEDOUT;
                int ready = ds_poll_one(l->port.fd, POLLIN, timeout_ms);
                if (ready < 0)
                        return ds_fail(err, ready, "raw: poll");
                waited = true;
        }
}

const struct ds_link_ops ds_link_raw = {
    .name = "raw",
    .caps = DS_LINK_BOUNDARIES | DS_LINK_ZERO_COPY_RX | DS_LINK_CTL_UNRELIABLE |
            DS_LINK_NEEDS_IFACE | DS_LINK_MAC_PEER | RAW_PCAP_CAP,
    .listen = raw_listen,
    .accept = raw_accept,
    .unlisten = raw_unlisten,
    .connect = raw_connect,
    .prepare = raw_prepare,
    .send = raw_send,
    .send_ctl = raw_send_ctl,
    .recv = raw_recv,
    .release = raw_release,
    .close = raw_close,
};
