/* The raw link's ports: an AF_PACKET socket on one interface and its TPACKET_V3 receive
 * ring, mapped into our memory so that a frame is read where the kernel put it. */
#include "link_raw.h"

#include <dragstrip/error.h>

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#define RING_MAX     (64u << 20) /* the most a receiving stream's ring takes */
#define SMALL_BLOCKS 8           /* rings that only see control frames */
#define MIN_BLOCK    (64u << 10)
#define BLOCK_FRAMES 4    /* a stream's block holds at least this many frames */
#define WINDOW_FULL  8    /* its window spans at least this many full blocks */
#define WINDOW_MIN   16   /* and at least this many messages */
#define BLOCK_TOV_MS 2    /* a part-filled block is handed over after this */
#define FRAME_SLACK  128u /* tpacket3 header, sockaddr_ll and alignment per frame */

static struct tpacket_block_desc *block_at(const struct raw_port *p, unsigned i)
{
        return (struct tpacket_block_desc *)(p->map + (size_t)i * p->block_size);
}

/* Sizes a ring so that one block holds at least one whole frame of frame_len bytes. */
void raw_ring_plan(struct raw_port *p, unsigned frame_len, size_t ring_bytes)
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
 * The window (raw_ring_window) must still span several full blocks, or each grant waits for
 * a block's timer. */
void raw_stream_ring_plan(struct raw_port *p, unsigned frame_len, uint32_t frames_per_msg)
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

int raw_ring_map(struct raw_port *p, struct ds_error *err)
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
        p->cur = p->left = 0;
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
bool raw_ring_peek(struct raw_port *p, uint8_t **frame, unsigned *len, unsigned *block,
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
                        return raw_ring_peek(p, frame, len, block, hdr_out);
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
void raw_ring_next(struct raw_port *p, bool hold)
{
        struct tpacket3_hdr *h = (struct tpacket3_hdr *)p->pkt;
        if (hold)
                p->held[p->cur]++;
        p->pkt += h->tp_next_offset;
        if (--p->left == 0)
                ring_return(p);
}

void raw_ring_unhold(struct raw_port *p, unsigned block)
{
        p->held[block]--;
        ring_return(p);
}

/* Messages that fit in the ring whatever the kernel does with its blocks, with room for
 * the one more a silence may grant (ds_session_idle) and the block the kernel opens next. */
uint32_t raw_ring_window(const struct raw_port *p, unsigned frame_len, uint32_t frames_per_msg)
{
        unsigned per_block = (p->block_size - 64) / (frame_len + FRAME_SLACK);
        uint32_t room = (p->nblocks - 1) / blocks_per_msg(per_block, frames_per_msg);
        return room > 1 ? room - 1 : 1;
}

int raw_iface_info(const char *iface, int *ifindex, unsigned *mtu, uint8_t mac[6],
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
int raw_port_socket(struct raw_port *p, struct ds_error *err)
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

int raw_port_bind(struct raw_port *p, int ifindex, struct ds_error *err)
{
        struct sockaddr_ll sll = {.sll_family = AF_PACKET,
                                  .sll_protocol = htons(DS_WIRE_ETHERTYPE),
                                  .sll_ifindex = ifindex};
        if (bind(p->fd, (struct sockaddr *)&sll, sizeof(sll)) < 0)
                return ds_fail(err, -errno, "raw: bind to interface %d", ifindex);
        return 0;
}

void raw_port_close(struct raw_port *p)
{
        ring_unmap(p);
        if (p->fd >= 0)
                close(p->fd);
        p->fd = -1;
}
