/* A data channel over RDMA verbs: the byte stream of a transfer's MODE E blocks carried
 * by lib/'s verbs link (link.h: rdma_cm, one RC queue pair per stream, RDMA WRITE WITH
 * IMMEDIATE into the receiver's registered slots, credits returned as slots are freed)
 * instead of a TCP connection, behind the same table of operations (xconn.h), so that
 * the transfer pipeline (xfer.h) moves the same blocks, offsets and EOF/EOD over it.
 *
 * Roles follow the data: the side that sends the file connects (rdma_cm) to the other,
 * which listens; the sender says hello as stream i of n of one run (session.h), and the
 * receiver checks the hello (message size, window, streams) before it registers a byte.
 * Each stream takes XFTP_VERBS_WINDOW registered buffers of XFTP_VERBS_MSG bytes on each
 * side (the receiver's slots, the sender's send buffers), registered once per stream.
 *
 * Those buffers are a session's (struct xftp_verbs_buffers), made once and lent to the
 * links of each transfer, which register them (cheap: pages made are pages pinned fast).
 * A message is one MODE E block, its data first and its header after it, so that the data
 * lands page-aligned at the start of a slot (the hello says so: DS_HELLO_MODEE). No copy
 * in user space: the sender's pipeline reads the file into the registered send buffers
 * (take_buf) and each block is sent from there; the receiver's reads a block's header
 * with recv and writes its data from the slot (lend), which goes back to the sender as
 * credit once written (give_back). Bytes that come otherwise (-R sends in pieces, blocks
 * larger than a buffer) are framed by copy, a large block cut into several. Waits are 100 ms
 * slices, as xconn.h asks of a backend without a socket (fd is -1).
 *
 * The end: a sender's close says END and waits (at most the channel's timeout) for the
 * FINAL the receiver's close sends before it disconnects, so that no byte in flight is
 * flushed by the disconnect; a receiver reads an END as the peer's close. drop closes at
 * once. */
#ifndef XFTP_XVERBS_H
#define XFTP_XVERBS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "dataconn.h"
#include "modee.h"
#include "xfer.h"

struct ds_error;
struct ds_pool;
struct xftp_conn;

#define XFTP_VERBS_MSG    (XFTP_XFER_BLOCK + 4096u) /* largest message: a block and its header */
#define XFTP_VERBS_WINDOW 8u /* messages in flight per stream: receive slots, send buffers */

/* A session's buffers for the channel: per stream one pool of XFTP_VERBS_WINDOW buffers
 * of XFTP_VERBS_MSG, the send buffers when it sends, the receive slots when it receives,
 * lent to the links of its transfers. They are made ahead, while the peer does something
 * else: mapping and touching a stream's 33 MiB took 70 ms in the test VM, with the peer
 * waiting, where registering them takes under 1 ms. xftp makes them (and loads the verbs
 * libraries) in a thread while it logs in and keeps them for the connection's transfers;
 * xftpd in a thread after RPSV or RPRT, for that transfer. Zero is empty. The warming
 * thread owns the struct until reserve, free or a link (xftp_verbs_opts) joins it: nobody
 * reads it meanwhile. */
struct xftp_verbs_buffers {
        struct ds_pool *pool[XFTP_MODEE_MAX_STREAMS];
        unsigned count;  /* pools made, for streams 0..count-1 */
        unsigned wanted; /* what the warming thread makes */
        bool warming;    /* warmer runs, or ran and is not yet joined */
        pthread_t warmer;
};

/* Starts making pools for streams (at most XFTP_MODEE_MAX_STREAMS) in a thread, with the
 * verbs libraries loaded first; reserve or free joins it. Best effort: what fails here,
 * reserve does again and says why. */
void xftp_verbs_buffers_warm(struct xftp_verbs_buffers *b, unsigned streams);
/* Waits for the warming thread, if any: the pools it made are then the caller's to read
 * (they are lent on, as made, without a wait for more). */
void xftp_verbs_buffers_join(struct xftp_verbs_buffers *b);
/* Pools for streams 0..streams-1, made now where missing. Returns 0 or a negative errno. */
int xftp_verbs_buffers_reserve(struct xftp_verbs_buffers *b, unsigned streams,
                               struct ds_error *err);
/* The bytes of one stream's pool: what a memory budget counts for each made. */
uint64_t xftp_verbs_buffers_stream_bytes(void);
void xftp_verbs_buffers_free(struct xftp_verbs_buffers *b);

struct xftp_verbs_opts {
        int timeout_ms;    /* each set-up step, the hello, and a sender's wait at close */
        atomic_bool *stop; /* may be NULL; when set, a set-up wait ends with -EINTR */
        /* may be NULL: each stream then makes its own; else stream i borrows pool[i]
         * where there is one. A warming thread still making them is joined once a link's
         * rdma_cm connection is made (a sender before it says hello, a receiver when the
         * hello came, before its answer): their making overlaps the handshake. */
        struct xftp_verbs_buffers *buffers;
};

/* Whether this build has verbs and an RDMA device serves local's host (the address a
 * control connection arrived on): a listener bound there for a moment. */
bool xftp_verbs_available(const struct xftp_addr *local);

/* The registered bytes one stream takes on either side at most: what a memory budget
 * counts per stream, its buffers' pool (xftp_verbs_buffers_stream_bytes) included. */
uint64_t xftp_verbs_stream_bytes(void);

/* Loads the verbs libraries and their drivers' list, which libibverbs and librdmacm do
 * at their first call (0.06 s in the test VM): done ahead, no set-up waits for it. */
void xftp_verbs_load(void);

struct xftp_verbs_listener;

/* Listens (rdma_cm) on local's host at a port of lo..hi (both 0: 49152..65535), each
 * tried at most once from a random one on, 64 at most. Returns 0 and *out, -EADDRINUSE
 * when every port tried was taken, or another negative errno with err filled. */
int xftp_verbs_listen(struct xftp_verbs_listener **out, const struct xftp_addr *local, uint16_t lo,
                      uint16_t hi, struct ds_error *err);
uint16_t xftp_verbs_port(const struct xftp_verbs_listener *listener);
void xftp_verbs_unlisten(struct xftp_verbs_listener *listener);

/* The receiver: accepts n links from peer's host (others are turned away and do not
 * extend the wait; peer NULL: from any host, for a server-to-server copy), each of which must say
 * hello as a distinct stream of one run of n streams, with messages of at most XFTP_VERBS_MSG;
 * conns[i] gets stream i. Returns 0, or a negative errno (-ETIMEDOUT, -EINTR on stop, -EPROTO for a
 * hello refused) with err filled and every accepted link closed. */
int xftp_verbs_accept(struct xftp_verbs_listener *listener, const struct xftp_addr *peer,
                      struct xftp_conn *conns, unsigned n, const struct xftp_verbs_opts *opts,
                      struct ds_error *err);

/* The sender: n links to addr (host and port), stream i of n into conns[i]. Returns 0,
 * or a negative errno with err filled and every link closed. */
int xftp_verbs_connect(const struct xftp_addr *addr, struct xftp_conn *conns, unsigned n,
                       const struct xftp_verbs_opts *opts, struct ds_error *err);

#endif
