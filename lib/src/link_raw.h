/* The raw link's parts, shared by its files: the port (an AF_PACKET socket and its
 * TPACKET_V3 receive ring, link_raw_ring.c), the BPF filters that sort frames between
 * sockets (link_raw_filter.c) and the pcap trace of what a listener receives
 * (link_raw_pcap.c); the links, the listener and the ops table are link_raw.c. Private
 * to lib/: no ds_ prefix. */
#ifndef DRAGSTRIP_LINK_RAW_H
#define DRAGSTRIP_LINK_RAW_H

#include <dragstrip/wire.h>

#include <linux/if_packet.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ds_error;

#define ETH_HDR      14u
#define FRAME_HDR    (ETH_HDR + DS_WIRE_HDR_LEN)
#define MAX_SESSIONS 64 /* streams a listener serves at once, each with its own socket */

/* One AF_PACKET socket and its receive ring. */
struct raw_port {
        int fd;
        uint8_t *map;
        size_t map_len;
        unsigned block_size;
        unsigned nblocks;
        unsigned cur;      /* block being read */
        unsigned left;     /* frames of cur still to read, 0: cur not yet opened */
        uint8_t *pkt;      /* next frame of cur */
        unsigned *held;    /* frames of each block out with the caller */
        uint64_t opened;   /* blocks opened so far (cur is opened - 1 mod nblocks) */
        uint64_t returned; /* blocks given back */
};

/* The interface's index, MTU and MAC, or a negative errno. */
int raw_iface_info(const char *iface, int *ifindex, unsigned *mtu, uint8_t mac[6],
                   struct ds_error *err);
/* Opens p's packet socket with no protocol yet (so nothing arrives before the filter is
 * on), for the caller to filter, ring and bind. */
int raw_port_socket(struct raw_port *p, struct ds_error *err);
int raw_port_bind(struct raw_port *p, int ifindex, struct ds_error *err);
/* Unmaps the ring and closes the socket; safe on a port never opened (fd -1). */
void raw_port_close(struct raw_port *p);

/* Plans a ring of about ring_bytes in which one block holds a whole frame of frame_len. */
void raw_ring_plan(struct raw_port *p, unsigned frame_len, size_t ring_bytes);
/* Plans a receiving stream's ring for messages of frames_per_msg frames of frame_len. */
void raw_stream_ring_plan(struct raw_port *p, unsigned frame_len, uint32_t frames_per_msg);
/* Sets up and maps the planned ring. */
int raw_ring_map(struct raw_port *p, struct ds_error *err);
/* The messages of frames_per_msg frames of frame_len that the ring holds, whatever the
 * kernel does with its blocks: the receiver's window. */
uint32_t raw_ring_window(const struct raw_port *p, unsigned frame_len, uint32_t frames_per_msg);
/* The next frame, without consuming it: its bytes (from the Ethernet header), length,
 * block and ring header. Returns false when the ring holds nothing more now. */
bool raw_ring_peek(struct raw_port *p, uint8_t **frame, unsigned *len, unsigned *block,
                   struct tpacket3_hdr **hdr_out);
/* Moves past the frame raw_ring_peek showed; hold: the caller keeps a pointer into it
 * until raw_ring_unhold(block). */
void raw_ring_next(struct raw_port *p, bool hold);
void raw_ring_unhold(struct raw_port *p, unsigned block);

/* Attaches a filter passing only the frames of one session. */
int raw_filter_session(int fd, uint32_t session, struct ds_error *err);
/* Attaches (or replaces) a filter passing everything but the data frames of the n
 * sessions (at most MAX_SESSIONS) that have sockets of their own. */
int raw_filter_others(int fd, const uint32_t *sessions, unsigned n, struct ds_error *err);

/* A pcap file of the frames a listener and its links receive. */
struct raw_trace;

/* Starts a trace written to path; *out is NULL when path is (no trace). -ENOTSUP in a
 * build without libpcap (DS_LINK_PCAP unset). */
int raw_trace_open(struct raw_trace **out, const char *path, struct ds_error *err);
/* Writes one received frame, from any thread; t may be NULL. */
void raw_trace_frame(struct raw_trace *t, const struct tpacket3_hdr *h, const uint8_t *frame);
/* Closes the file; t may be NULL. */
void raw_trace_close(struct raw_trace *t);

#endif
