/* Links: one small interface over verbs, raw Ethernet, TCP and UDP.
 *
 * A link is one connected, ordered channel between a sender (blast) and a receiver
 * (sink). It carries two kinds of messages:
 *   - data messages, up to the negotiated message size, sent from pool buffers and
 *     received by reference (zero-copy where the backend can: a TPACKET_V3 ring slot, an
 *     RDMA-written receive buffer), handed back with ds_link_release();
 *   - control frames (hello, credits, end, final counts; docs/wire.md), small, encoded
 *     and parsed by wire.c and exchanged by session.c, which is the same for every
 *     backend. A backend only carries control frames; it never interprets them.
 *
 * Life of a link:
 *
 *   sender                              receiver
 *   ds_link_connect()                   ds_link_listen(), ds_link_accept()
 *   prepare(params) -> my offer
 *   send_ctl(HELLO with offer)   --->   recv() returns the HELLO (DS_MSG_CTL)
 *                                       prepare(params from hello) -> my offer
 *                                       start(sender's offer)
 *   recv() returns HELLO_ACK     <---   send_ctl(HELLO_ACK with offer)
 *   start(receiver's offer)
 *   send() data ... reap()       --->   recv() data ... release()
 *   recv() returns CREDIT        <---   send_ctl(CREDIT)          (flow credit only)
 *   send_ctl(END)                --->
 *   recv() returns FINAL         <---   send_ctl(FINAL)
 *   ds_link_close()                     ds_link_close()
 *
 * prepare/start exist so that a backend can size and register its buffers once the
 * message size is known and swap what the peer needs (verbs: ring address, rkey, slot
 * count) inside the hello, without a second handshake of its own. The "window" a
 * receiver offers is how many messages it can hold unreleased; the session turns it into
 * credits (cumulative limits, so a lost or repeated credit frame does no harm).
 *
 * Threads: one thread drives a link's send side and one its receive side at a time
 * (blast's two interleaved workers take turns; sink uses one thread per link). Different
 * links are independent. The verbs backend takes a lock of its own in every call, so
 * there a second thread may also reap and release (xftp's disk thread: buffers it reads
 * into, slots it has written out). Nothing here prints or exits.
 *
 * Adding a backend:
 *   1. Write lib/src/link_NAME.c with a struct that embeds `struct ds_link base` first,
 *      static functions for the operations below, and one exported table
 *      `const struct ds_link_ops ds_link_NAME = { .name = "NAME", .caps = ..., ... };`.
 *      Fill base.ops, base.caps and base.max_msg in connect/accept. The caps say what
 *      it needs and can do (an interface, a choice of op, pcap traces): tools and the
 *      session ask them, never the name.
 *   2. Parse every received header with ds_wire_parse() (wire.h) and count rejects in
 *      base.malformed; never trust a length or offset from the wire.
 *   3. Declare the table below, add it to the list in link.c (ds_link_find) and the
 *      source to lib/CMakeLists.txt (behind its DS_WITH_* option if it needs a library).
 *   4. Add it to tests/netns (or tests/vm) so blast/sink run over it in CI. */
#ifndef DRAGSTRIP_LINK_H
#define DRAGSTRIP_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <dragstrip/wire.h>

struct ds_error;
struct ds_pool;

/* What a backend can and cannot do; blast and sink adapt instead of asking for names. */
enum ds_link_cap {
        DS_LINK_RELIABLE = 1 << 0,       /* no loss, no reordering (tcp, verbs RC) */
        DS_LINK_OWN_FLOW = 1 << 1,       /* the transport flow-controls itself (tcp) */
        DS_LINK_BOUNDARIES = 1 << 2,     /* recv() returns whole messages as sent (all ours) */
        DS_LINK_REGISTERED = 1 << 3,     /* send buffers must come from params.send_pool */
        DS_LINK_ZERO_COPY_RX = 1 << 4,   /* recv() may point into the backend's own memory */
        DS_LINK_ASYNC_SEND = 1 << 5,     /* send buffers come back through reap(), not at once */
        DS_LINK_CTL_UNRELIABLE = 1 << 6, /* control frames may be lost: the session retries */
        DS_LINK_NEEDS_IFACE = 1 << 7,    /* runs on one interface: config.iface on both sides */
        DS_LINK_MAC_PEER = 1 << 8,       /* connect's host is the peer's MAC on that interface */
        DS_LINK_CHOOSES_OP = 1 << 9,     /* takes any enum ds_link_op, not only the default */
        DS_LINK_PCAP = 1 << 10,          /* a listener writes what arrives to config.pcap_path */
};

/* Flow control asked for by blast (and adopted by sink through the hello). */
enum ds_flow {
        DS_FLOW_CREDIT = 0, /* the receiver grants credits, like HIPPI's READY (default) */
        DS_FLOW_NONE = 1,   /* run free and count loss */
};

/* How data crosses a link with DS_LINK_CHOOSES_OP (verbs); others accept only
 * DS_OP_DEFAULT. */
enum ds_link_op {
        DS_OP_DEFAULT = 0, /* the backend's best: verbs RDMA WRITE WITH IMMEDIATE */
        DS_OP_WRITE = 1,
        DS_OP_SEND = 2,
        DS_OP_READ = 3,
};

/* Where to meet. Strings are borrowed and must outlive the call. */
struct ds_link_config {
        const char *host;      /* connect: the peer (host/IP, or MAC); listen: NULL = any */
        const char *iface;     /* DS_LINK_NEEDS_IFACE: the interface (both sides) */
        uint16_t port;         /* tcp, udp, verbs: the port */
        int timeout_ms;        /* connect/handshake bound; 0: backend default */
        bool events;           /* verbs: sleep on completion events instead of busy-polling */
        const char *pcap_path; /* DS_LINK_PCAP listener: write what arrives to this file */
};

/* The options of one run, negotiated by the hello (session.c), given to prepare(). */
struct ds_link_params {
        uint32_t msg_size; /* bytes per data message */
        enum ds_flow flow;
        enum ds_link_op op;
        uint32_t window;           /* messages the sender wants in flight (0: backend's) */
        struct ds_pool *send_pool; /* sender: where every sent buffer comes from */
        /* Receiver, verbs: buffers lent for the receive ring, made ahead by the caller (so
         * that no page is made while the sender waits) and outliving the link; used when
         * they hold the ring (enough buffers of msg_size), else the link makes its own. */
        struct ds_pool *recv_pool;
};

/* What one side's prepare() wants the peer's start() to see. */
#define DS_LINK_OFFER_MAX DS_WIRE_OFFER_MAX
struct ds_link_offer {
        uint32_t window;                 /* receiver: messages it can hold unreleased; sender: 0 */
        uint8_t len;                     /* bytes used in blob */
        uint8_t blob[DS_LINK_OFFER_MAX]; /* backend-private, e.g. verbs addr/rkey/slots */
};

enum ds_msg_kind { DS_MSG_DATA = 0, DS_MSG_CTL = 1 };

/* One message handed across the interface. For send(): buf is a pool buffer holding len
 * bytes, seq its number in this link's stream (0, 1, 2, ...). From recv(): buf points to
 * len bytes owned by the link until release(); for DS_MSG_CTL it is the control payload
 * (already checked by ds_wire_parse, still to be decoded by ds_wire_ctl_decode). */
struct ds_msg {
        void *buf;
        uint32_t len;
        uint8_t kind;     /* enum ds_msg_kind */
        uint8_t ctl_type; /* DS_MSG_CTL: enum ds_wire_type */
        uint64_t seq;
        uintptr_t cookie; /* the backend's handle for release(); callers leave it alone */
};

/* Counters every backend keeps in its base; read them at any time from the link's thread. */
struct ds_link_stats {
        uint64_t frames_sent;
        uint64_t frames_received;
        uint64_t bytes_copied; /* payload bytes the backend had to copy in user space */
        uint64_t malformed[DS_WIRE_REJECT_COUNT]; /* frames rejected, by reason */
        uint64_t fragments_lost; /* raw: trains that arrived incomplete (counted once each) */
};

struct ds_link_ops;

/* The part of every link the interface can see; a backend's struct embeds it first. */
struct ds_link {
        const struct ds_link_ops *ops;
        unsigned caps;    /* enum ds_link_cap */
        uint32_t max_msg; /* largest data message this link can carry */
        char peer[64];    /* who is at the other end, for reports */
        struct ds_link_stats stats;
        /* Receive buffers prepare() allocates whatever the message size (udp's datagram
         * slots), counted by ds_link_rx_bytes; 0 for most backends. */
        uint64_t rx_fixed;
};

struct ds_link_listener {
        const struct ds_link_ops *ops;
        /* Frames the listener rejected before any link owned them (udp, raw), by reason;
         * written by accept(), read by the same thread. */
        uint64_t malformed[DS_WIRE_REJECT_COUNT];
};

/* A backend. Every function returns 0 (or a count) or a negative errno with err filled. */
struct ds_link_ops {
        const char *name; /* "tcp", "udp", "raw", "verbs" */
        unsigned caps;    /* enum ds_link_cap, before any connection */

        int (*listen)(struct ds_link_listener **out, const struct ds_link_config *config,
                      struct ds_error *err);
        /* One new peer, or -ETIMEDOUT after timeout_ms (negative: forever). A backend
         * that learns of the peer from its first frame (udp, raw) hands that frame out
         * again as the new link's first recv(). */
        int (*accept)(struct ds_link_listener *listener, struct ds_link **out, int timeout_ms,
                      struct ds_error *err);
        void (*unlisten)(struct ds_link_listener *listener);
        int (*connect)(struct ds_link **out, const struct ds_link_config *config,
                       struct ds_error *err);

        /* Optional (NULL: nothing to do). Size and register buffers for params, fill
         * mine (window and blob) for the peer. */
        int (*prepare)(struct ds_link *link, const struct ds_link_params *params,
                       struct ds_link_offer *mine, struct ds_error *err);
        /* Optional. The peer's offer has arrived; data may flow after this returns. */
        int (*start)(struct ds_link *link, const struct ds_link_offer *peer, struct ds_error *err);

        /* Queues n data messages in order. Returns how many were taken (0..n; fewer when
         * the transport is full: call again), or a negative errno (-EPIPE: peer gone).
         * Without DS_LINK_ASYNC_SEND the buffers are free again when send returns. */
        int (*send)(struct ds_link *link, const struct ds_msg *msgs, unsigned n,
                    struct ds_error *err);
        /* Optional (ASYNC_SEND only). Up to max buffers whose sends completed, waiting at
         * most timeout_ms for the first. Returns the count. */
        int (*reap)(struct ds_link *link, void **bufs, unsigned max, int timeout_ms,
                    struct ds_error *err);
        /* Sends one control frame: a payload made by ds_wire_ctl_encode, len bytes. The
         * backend adds its framing; it may copy (control frames are small and rare). */
        int (*send_ctl)(struct ds_link *link, uint8_t type, const void *payload, size_t len,
                        struct ds_error *err);

        /* Up to max messages (data and control, in arrival order), waiting at most
         * timeout_ms for the first (0: do not wait; negative: forever). Returns the count
         * (0 on timeout, or early when what arrived made no whole message: the wrapper
         * ds_link_recv then waits out the rest), -EPIPE when the peer closed, or a
         * negative errno. Malformed frames are counted in stats.malformed and skipped. */
        int (*recv)(struct ds_link *link, struct ds_msg *msgs, unsigned max, int timeout_ms,
                    struct ds_error *err);
        /* Gives received messages back, oldest first, in the order recv returned them. */
        void (*release)(struct ds_link *link, const struct ds_msg *msgs, unsigned n);

        void (*close)(struct ds_link *link);
};

extern const struct ds_link_ops ds_link_tcp;
extern const struct ds_link_ops ds_link_udp;
extern const struct ds_link_ops ds_link_raw;
#ifdef DS_HAVE_VERBS
extern const struct ds_link_ops ds_link_verbs;
#endif

/* The backend called name, or NULL. */
const struct ds_link_ops *ds_link_find(const char *name);
/* The names this build knows, space-separated, for usage() and error messages. */
const char *ds_link_names(void);

/* Parse --flow (credit, none) and --op (write, send, read). Return 0 or -EINVAL. */
int ds_flow_parse(const char *text, enum ds_flow *flow);
int ds_link_op_parse(const char *text, enum ds_link_op *op);

/* Thin wrappers over the table, so callers read ds_link_send(link, ...). Optional
 * operations that are NULL succeed and do nothing (reap returns 0). */
int ds_link_listen(const struct ds_link_ops *ops, struct ds_link_listener **out,
                   const struct ds_link_config *config, struct ds_error *err);
int ds_link_accept(struct ds_link_listener *listener, struct ds_link **out, int timeout_ms,
                   struct ds_error *err);
void ds_link_unlisten(struct ds_link_listener *listener);
int ds_link_connect(const struct ds_link_ops *ops, struct ds_link **out,
                    const struct ds_link_config *config, struct ds_error *err);
int ds_link_prepare(struct ds_link *link, const struct ds_link_params *params,
                    struct ds_link_offer *mine, struct ds_error *err);
int ds_link_start(struct ds_link *link, const struct ds_link_offer *peer, struct ds_error *err);
int ds_link_send(struct ds_link *link, const struct ds_msg *msgs, unsigned n, struct ds_error *err);
int ds_link_reap(struct ds_link *link, void **bufs, unsigned max, int timeout_ms,
                 struct ds_error *err);
int ds_link_send_ctl(struct ds_link *link, uint8_t type, const void *payload, size_t len,
                     struct ds_error *err);
int ds_link_recv(struct ds_link *link, struct ds_msg *msgs, unsigned max, int timeout_ms,
                 struct ds_error *err);
void ds_link_release(struct ds_link *link, const struct ds_msg *msgs, unsigned n);
void ds_link_close(struct ds_link *link);

/* The bytes of receive buffers link takes for messages of msg_size once a hello asks for
 * them (what a server's memory budget must allow): the messages' and its rx_fixed. */
uint64_t ds_link_rx_bytes(const struct ds_link *link, uint32_t msg_size);

/* All malformed frames this link has rejected, summed over reasons. */
uint64_t ds_link_malformed(const struct ds_link *link);

#endif
