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

#include <dragstrip/error.h>
#include <dragstrip/stop.h>

#include <arpa/inet.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#ifdef DS_HAVE_PCAP
#include <pcap/pcap.h>
#define RAW_PCAP_CAP DS_LINK_PCAP
#else
#define RAW_PCAP_CAP 0 /* no libpcap to write traces with */
#endif

#define ETH_HDR      14u
#define FRAME_HDR    (ETH_HDR + DS_WIRE_HDR_LEN)
#define RAW_MAX_MSG  (256u << 20)
#define RING_MAX     (64u << 20) /* the most a receiving stream's ring takes */
#define SMALL_BLOCKS 8           /* rings that only see control frames */
#define MIN_BLOCK    (64u << 10)
#define BLOCK_FRAMES 4    /* a stream's block holds at least this many frames */
#define WINDOW_FULL  8    /* its window spans at least this many full blocks */
#define WINDOW_MIN   16   /* and at least this many messages */
#define BLOCK_TOV_MS 2    /* a part-filled block is handed over after this */
#define NAP_US       100  /* a reader that was just handed data waits this long first */
#define FRAME_SLACK  128u /* tpacket3 header, sockaddr_ll and alignment per frame */
#define BATCH        64
#define MAX_SESSIONS 64

/* One AF_PACKET socket and its receive ring. */
struct raw_port {
        int fd;
        uint8_t *map;
        size_t map_len;
        unsigned block_size;
        unsigned nblocks;
        unsigned cur;      /* block being read */
        unsigned ret;      /* oldest block not yet given back to the kernel */
        unsigned left;     /* frames of cur still to read, 0: cur not yet opened */
        uint8_t *pkt;      /* next frame of cur */
        unsigned *held;    /* frames of each block out with the caller */
        uint64_t opened;   /* blocks opened so far (cur is opened - 1 mod nblocks) */
        uint64_t returned; /* blocks given back */
};

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
        pthread_mutex_t lock; /* sessions and the pcap file, shared with links */
        uint32_t sessions[MAX_SESSIONS];
        unsigned nsessions;
#ifdef DS_HAVE_PCAP
        pcap_t *pcap;
        pcap_dumper_t *dumper;
#endif
};

/* ---- the ring ---------------------------------------------------------------- */

static struct tpacket_block_desc *block_at(const struct raw_port *p, unsigned i)
{
        return (struct tpacket_block_desc *)(p->map + (size_t)i * p->block_size);
}

static int filter_attach(int fd, struct sock_filter *code, unsigned len, struct ds_error *err)
{
        struct sock_fprog prog = {.len = (unsigned short)len, .filter = code};
        if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) < 0)
                return ds_fail(err, -errno, "raw: BPF filter");
        return 0;
}

/* Passes only frames of one session. */
static int filter_session(int fd, uint32_t session, struct ds_error *err)
{
        struct sock_filter code[] = {
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ETH_HDR + 4),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, session, 0, 1),
            BPF_STMT(BPF_RET | BPF_K, 0x40000),
            BPF_STMT(BPF_RET | BPF_K, 0),
        };
        return filter_attach(fd, code, 4, err);
}

/* Passes everything but the data frames of the sessions that have sockets of their own,
 * short frames included (a load past the end would make BPF drop them uncounted):
 *   0 ld len; 1 jge 22 else pass; 2 ldh magic; 3 jeq MAGIC else pass; 4 ldb type;
 *   5 jeq DATA else pass; 6 ld session; 7.. jeq session_k then drop; pass: ret all; drop */
static int filter_others(int fd, const uint32_t *sessions, unsigned n, struct ds_error *err)
{
        struct sock_filter code[9 + MAX_SESSIONS];
        unsigned pass = 7 + n, drop = 8 + n;
        code[0] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_LEN, 0);
        code[1] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, ETH_HDR + 8, 0,
                                               (uint8_t)(pass - 2));
        code[2] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_H | BPF_ABS, ETH_HDR);
        code[3] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, DS_WIRE_MAGIC, 0,
                                               (uint8_t)(pass - 4));
        code[4] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_B | BPF_ABS, ETH_HDR + 3);
        code[5] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, DS_WIRE_DATA, 0,
                                               (uint8_t)(pass - 6));
        code[6] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ETH_HDR + 4);
        for (unsigned k = 0; k < n; k++)
                code[7 + k] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, sessions[k],
                                                           (uint8_t)(drop - (7 + k) - 1), 0);
        code[pass] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0x40000);
        code[drop] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0);
        return filter_attach(fd, code, 9 + n, err);
}

/* Sizes a ring so that one block holds at least one whole frame of frame_len bytes. */
static void ring_plan(struct raw_port *p, unsigned frame_len, size_t ring_bytes)
{
        unsigned need = frame_len + FRAME_SLACK + 64; /* 64: the block descriptor */
        unsigned block = MIN_BLOCK;
        while (block < need)
                block <<= 1;
        p->block_size = block;
        p->nblocks = (unsigned)(ring_bytes / block);
        if (p->nblocks < SMALL_BLOCKS)
                p->nblocks = SMALL_BLOCKS;
}

/* Blocks one message takes in the worst case: a block may be handed over holding a
 * single frame (its timer ran out), and a train may start anywhere in a block. */
static uint32_t blocks_per_msg(unsigned per_block, uint32_t frames_per_msg)
{
        return frames_per_msg == 1 ? 1 : (frames_per_msg + per_block - 1) / per_block + 1;
}

/* Sizes a receiving stream's ring. On veth the sender's CPU runs the receive path: it
 * copies each frame into the ring and wakes the reader once per block. So a block holds
 * several frames (fewer wake-ups), and the ring is no bigger than the window needs (the
 * copy runs faster into a ring that stays in the cache): 64000-byte frames get 34
 * blocks of 256 KiB, 8.5 MiB, where 512 blocks of 128 KiB ran about 12% slower.
 * The window (ring_window) must still span several full blocks, or each grant waits for
 * a block's timer. */
static void stream_ring_plan(struct raw_port *p, unsigned frame_len, uint32_t frames_per_msg)
{
        unsigned slot = frame_len + FRAME_SLACK;
        unsigned block = MIN_BLOCK;
        while (block < BLOCK_FRAMES * slot + 64) /* 64: the block descriptor */
                block <<= 1;
        unsigned per_block = (block - 64) / slot;
        uint64_t msgs = ((uint64_t)WINDOW_FULL * per_block + frames_per_msg - 1) / frames_per_msg;
        if (msgs < WINDOW_MIN)
                msgs = WINDOW_MIN;
        uint64_t nblocks = 1 + (msgs + 1) * blocks_per_msg(per_block, frames_per_msg);
        if (nblocks > RING_MAX / block)
                nblocks = RING_MAX / block;
        p->block_size = block;
        p->nblocks = (unsigned)nblocks;
}

static int ring_map(struct raw_port *p, struct ds_error *err)
{
        struct tpacket_req3 req = {
            .tp_block_size = p->block_size,
            .tp_block_nr = p->nblocks,
            .tp_frame_size = p->block_size,
            .tp_frame_nr = p->nblocks,
            .tp_retire_blk_tov = BLOCK_TOV_MS,
        };
        if (setsockopt(p->fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof(req)) < 0)
                return ds_fail(err, -errno, "raw: receive ring of %u blocks of %u bytes",
                               p->nblocks, p->block_size);
        p->map_len = (size_t)p->block_size * p->nblocks;
        void *map =
            mmap(NULL, p->map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, p->fd, 0);
        if (map == MAP_FAILED)
                return ds_fail(err, -errno, "raw: mapping the receive ring");
        p->map = map;
        p->held = calloc(p->nblocks, sizeof(*p->held));
        if (!p->held)
                return ds_fail(err, -ENOMEM, "raw: ring bookkeeping");
        p->cur = p->ret = p->left = 0;
        p->opened = p->returned = 0;
        return 0;
}

static void ring_unmap(struct raw_port *p)
{
        if (p->map)
                munmap(p->map, p->map_len);
        free(p->held);
        p->map = NULL;
        p->held = NULL;
}

/* Gives back, in order, every block that is read through and holds nothing out. */
static void ring_return(struct raw_port *p)
{
        while (p->returned < p->opened) {
                unsigned b = (unsigned)(p->returned % p->nblocks);
                bool reading = b == p->cur && p->left > 0;
                if (reading || p->held[b])
                        return;
                __atomic_store_n(&block_at(p, b)->hdr.bh1.block_status, TP_STATUS_KERNEL,
                                 __ATOMIC_RELEASE);
                p->returned++;
        }
}

/* The next frame, without consuming it: its bytes (from the Ethernet header), length and
 * block. Returns false when the ring holds nothing more now. */
static bool ring_peek(struct raw_port *p, uint8_t **frame, unsigned *len, unsigned *block,
                      struct tpacket3_hdr **hdr_out)
{
        if (p->left == 0) {
                if (p->opened - p->returned >= p->nblocks)
                        return false; /* the caller holds the whole ring */
                unsigned b = (unsigned)(p->opened % p->nblocks);
                struct tpacket_block_desc *bd = block_at(p, b);
                if (!(__atomic_load_n(&bd->hdr.bh1.block_status, __ATOMIC_ACQUIRE) &
                      TP_STATUS_USER))
                        return false;
                p->cur = b;
                p->opened++;
                p->left = bd->hdr.bh1.num_pkts;
                p->pkt = (uint8_t *)bd + bd->hdr.bh1.offset_to_first_pkt;
                if (p->left == 0) {
                        ring_return(p);
                        return ring_peek(p, frame, len, block, hdr_out);
                }
        }
        struct tpacket3_hdr *h = (struct tpacket3_hdr *)p->pkt;
        *frame = p->pkt + h->tp_mac;
        *len = h->tp_snaplen;
        *block = p->cur;
        *hdr_out = h;
        return true;
}

/* Moves past the frame ring_peek showed; hold: the caller keeps a pointer into it. */
static void ring_next(struct raw_port *p, bool hold)
{
        struct tpacket3_hdr *h = (struct tpacket3_hdr *)p->pkt;
        if (hold)
                p->held[p->cur]++;
        p->pkt += h->tp_next_offset;
        if (--p->left == 0)
                ring_return(p);
}

static void ring_unhold(struct raw_port *p, unsigned block)
{
        p->held[block]--;
        ring_return(p);
}

/* ---- sockets ------------------------------------------------------------------ */

static int iface_info(const char *iface, int *ifindex, unsigned *mtu, uint8_t mac[6],
                      struct ds_error *err)
{
        struct ifreq ifr = {0};
        if (!iface || strlen(iface) >= sizeof(ifr.ifr_name))
                return ds_fail(err, -EINVAL, "raw: no interface named (the link runs on one)");
        *ifindex = (int)if_nametoindex(iface);
        if (*ifindex == 0)
                return ds_fail(err, -ENODEV, "raw: no interface '%s'", iface);
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return ds_fail(err, -errno, "raw: socket for ioctl");
        strcpy(ifr.ifr_name, iface);
        int rc = 0;
        if (ioctl(fd, SIOCGIFMTU, &ifr) < 0)
                rc = ds_fail(err, -errno, "raw: MTU of %s", iface);
        else
                *mtu = (unsigned)ifr.ifr_mtu;
        if (rc == 0 && ioctl(fd, SIOCGIFHWADDR, &ifr) < 0)
                rc = ds_fail(err, -errno, "raw: MAC address of %s", iface);
        else if (rc == 0)
                memcpy(mac, ifr.ifr_hwaddr.sa_data, 6);
        close(fd);
        if (rc == 0 && *mtu < DS_WIRE_HDR_LEN + DS_WIRE_CTL_MAX)
                rc = ds_fail(err, -EINVAL, "raw: MTU %u of %s is too small", *mtu, iface);
        return rc;
}

/* Opens a packet socket with no protocol yet (so nothing arrives before the filter is
 * on), for the caller to filter, ring and bind. */
static int port_socket(struct raw_port *p, struct ds_error *err)
{
        memset(p, 0, sizeof(*p));
        p->fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
        if (p->fd < 0)
                return ds_fail(err, -errno, "raw: AF_PACKET socket (needs root or CAP_NET_RAW)");
        int v3 = TPACKET_V3, one = 1, sndbuf = 8 << 20;
        if (setsockopt(p->fd, SOL_PACKET, PACKET_VERSION, &v3, sizeof(v3)) < 0)
                return ds_fail(err, -errno, "raw: TPACKET_V3");
        if (setsockopt(p->fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one)) < 0 ||
            setsockopt(p->fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)) < 0)
                return ds_fail(err, -errno, "raw: socket options");
        return 0;
}

static int port_bind(struct raw_port *p, int ifindex, struct ds_error *err)
{
        struct sockaddr_ll sll = {.sll_family = AF_PACKET,
                                  .sll_protocol = htons(DS_WIRE_ETHERTYPE),
                                  .sll_ifindex = ifindex};
        if (bind(p->fd, (struct sockaddr *)&sll, sizeof(sll)) < 0)
                return ds_fail(err, -errno, "raw: bind to interface %d", ifindex);
        return 0;
}

static void port_close(struct raw_port *p)
{
        ring_unmap(p);
        if (p->fd >= 0)
                close(p->fd);
        p->fd = -1;
}

/* ---- pcap traces of what sink received ----------------------------------------- */

static int trace_open(struct raw_listener *l, const char *path, struct ds_error *err)
{
        if (!path)
                return 0;
#ifdef DS_HAVE_PCAP
        l->pcap = pcap_open_dead(DLT_EN10MB, 262144);
        if (!l->pcap)
                return ds_fail(err, -ENOMEM, "pcap trace: libpcap");
        l->dumper = pcap_dump_open(l->pcap, path);
        if (!l->dumper)
                return ds_fail(err, -EIO, "pcap trace %s: %s", path, pcap_geterr(l->pcap));
        return 0;
#else
        (void)l;
        return ds_fail(err, -ENOTSUP, "pcap trace %s: this build has no libpcap", path);
#endif
}

static void trace_frame(struct raw_listener *l, const struct tpacket3_hdr *h, const uint8_t *frame)
{
#ifdef DS_HAVE_PCAP
        if (!l || !l->dumper)
                return;
        struct pcap_pkthdr ph = {.ts = {.tv_sec = h->tp_sec, .tv_usec = h->tp_nsec / 1000},
                                 .caplen = h->tp_snaplen,
                                 .len = h->tp_len};
        pthread_mutex_lock(&l->lock);
        pcap_dump((u_char *)l->dumper, &ph, frame);
        pthread_mutex_unlock(&l->lock);
#else
        (void)l, (void)h, (void)frame;
#endif
}

static void trace_close(struct raw_listener *l)
{
#ifdef DS_HAVE_PCAP
        if (l->dumper)
                pcap_dump_close(l->dumper);
        if (l->pcap)
                pcap_close(l->pcap);
#else
        (void)l;
#endif
}

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
        *rc = iface_info(iface, &r->ifindex, &r->mtu, r->mac, err);
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
                (void)filter_others(l->port.fd, l->sessions, l->nsessions, &ignored);
                pthread_mutex_unlock(&l->lock);
        }
        port_close(&r->port);
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
        rc = port_socket(&r->port, err);
        if (rc == 0)
                rc = filter_session(r->port.fd, r->dg.session, err);
        if (rc == 0)
                rc = port_bind(&r->port, r->ifindex, err);
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

/* Messages that fit in the ring whatever the kernel does with its blocks, with room for
 * the one more a silence may grant (ds_session_idle) and the block the kernel opens next. */
static uint32_t ring_window(const struct raw_port *p, unsigned frame_len, uint32_t frames_per_msg)
{
        unsigned per_block = (p->block_size - 64) / (frame_len + FRAME_SLACK);
        uint32_t room = (p->nblocks - 1) / blocks_per_msg(per_block, frames_per_msg);
        return room > 1 ? room - 1 : 1;
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
        stream_ring_plan(&r->port, frame_len, frames);
        int rc = ring_map(&r->port, err);
        if (rc == 0)
                rc = port_bind(&r->port, r->ifindex, err);
        if (rc == 0)
                rc = dgram_prepare(&r->dg, params->msg_size, err);
        if (rc < 0)
                return rc;
        mine->window = ring_window(&r->port, frame_len, frames);
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
        while (got < max && ring_peek(&r->port, &frame, &len, &block, &th)) {
                trace_frame(r->listener, th, frame);
                if (len < ETH_HDR) {
                        r->base.stats.malformed[DS_WIRE_SHORT]++;
                        ring_next(&r->port, false);
                        continue;
                }
                enum dgram_verdict v =
                    dgram_take(&r->dg, frame + ETH_HDR, len - ETH_HDR, &msgs[got]);
                if (v == DGRAM_FULL)
                        break;
                if (v == DGRAM_INPLACE)
                        msgs[got].cookie = (uintptr_t)block + 1;
                ring_next(&r->port, v == DGRAM_INPLACE);
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
                        ring_unhold(&r->port, (unsigned)(msgs[i].cookie - 1));
                else
                        dgram_release(&r->dg, &msgs[i]);
        }
}

/* ---- the listener --------------------------------------------------------------- */

static void raw_unlisten(struct ds_link_listener *listener)
{
        struct raw_listener *l = (struct raw_listener *)listener;
        port_close(&l->port);
        trace_close(l);
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
        int rc = iface_info(config->iface, &l->ifindex, &l->mtu, l->mac, err);
        if (rc == 0)
                rc = port_socket(&l->port, err);
        if (rc == 0)
                rc = filter_others(l->port.fd, NULL, 0, err);
        if (rc == 0) {
                /* room for a burst of strays and junk between two accept() calls */
                ring_plan(&l->port, l->mtu + ETH_HDR, 32u * MIN_BLOCK);
                rc = ring_map(&l->port, err);
        }
        if (rc == 0)
                rc = port_bind(&l->port, l->ifindex, err);
        if (rc == 0)
                rc = trace_open(l, config->pcap_path, err);
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
        rc = port_socket(&r->port, err);
        if (rc == 0)
                rc = filter_session(r->port.fd, session, err);
        pthread_mutex_lock(&l->lock);
        if (rc == 0 && l->nsessions == MAX_SESSIONS)
                rc = ds_fail(err, -EBUSY, "raw: %d streams at once is the most", MAX_SESSIONS);
        if (rc == 0) {
                l->sessions[l->nsessions++] = session;
                rc = filter_others(l->port.fd, l->sessions, l->nsessions, err);
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
                while (ring_peek(&l->port, &frame, &len, &block, &th)) {
                        trace_frame(l, th, frame);
                        int rc = listener_frame(l, frame, len, out, err);
                        ring_next(&l->port, false);
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
