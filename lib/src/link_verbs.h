/* The verbs link's insides, shared by its set-up (link_verbs_setup.c: rdma_cm, queues,
 * registration, offers) and its data path (link_verbs_data.c); not a public interface.
 *
 * One link is one RC queue pair found by librdmacm from an IP address. Control frames
 * (docs/wire.md) travel as SENDs, header included, into small receive frames. Data
 * depends on the op the hello chose:
 *   write (default)  RDMA WRITEs into consecutive slots of the receiver's ring; the last
 *                    of each posted batch (and any message shorter than the negotiated
 *                    size) goes WITH IMMEDIATE: the slot (low 8 bits) and the low 24
 *                    bits of its seq. Its completion stands for the whole batch, since
 *                    RC places the writes in order: one receive completion per batch;
 *   send             SEND WITH IMMEDIATE (imm: low 32 bits of seq) into ring buffers the
 *                    receiver posted;
 *   read             the sender SENDs a 16-byte notice (offset, length in its registered
 *                    pool) and the receiver pulls the message with RDMA READ.
 * Flow control is the link's own (DS_LINK_OWN_FLOW): the sender has credit for as many
 * messages as the ring has slots; the receiver returns credit, a quarter ring at a time,
 * as a zero-length SEND WITH IMMEDIATE carrying the low 32 bits of its released count.
 * Waiting busy-polls for a moment, then sleeps on completion events; the last request of
 * every posted batch is solicited and receive queues wake only for those (or errors), so
 * a sleeping peer wakes once a batch, not once a message. */
#ifndef DRAGSTRIP_LINK_VERBS_H
#define DRAGSTRIP_LINK_VERBS_H

#include <dragstrip/clock.h>
#include <dragstrip/error.h>
#include <dragstrip/link.h>

#include "link_priv.h"

#include <endian.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define VB_DEPTH        512   /* entries in each work queue and completion queue */
#define VB_FRAME        256   /* bytes per small buffer: a control frame or a READ notice */
#define VB_CTL_RECVS    16    /* receive frames kept posted for control frames and credits */
#define VB_SLOTS_MAX    255   /* ring slots: the WRITE immediate carries the slot in 8 bits */
#define VB_SPARE        4     /* send op: ring buffers beyond the slots, for control frames */
#define VB_ACK_TIMEOUT  14    /* 2^14 x 4.096 us = 67 ms before a resend, as perftest */
#define VB_SIGNAL_EVERY 16    /* at most this many unsignaled sends in a row */
#define VB_POLL_BATCH   32    /* completions taken per ibv_poll_cq */
#define VB_INLINE       64    /* inline bytes asked of the QP (notices, small messages) */
#define VB_NOTICE_LEN   16    /* read op: u64 offset, u32 length, u32 zero */
#define VB_RXQ          512   /* arrivals waiting to be handed out (power of two) */
#define VB_STALL_MS     10000 /* a peer that returns no credit this long is gone */

/* A send is signaled once this many bytes have gone unsignaled too (besides every
 * VB_SIGNAL_EVERY sends): a sender's buffer comes back only with a signal, and a large
 * one should not wait for the sends after it. */
#define VB_SIGNAL_BYTES (1u << 20)

/* The wr_id of a receive: which buffer it filled. */
#define VB_WR_SLOT (1ull << 32) /* send op, receiver: a ring slot, index in the low bits */

enum vb_sq_kind {
        VB_SQ_DATA,   /* write/send data: its buffer is free when this completes */
        VB_SQ_NOTICE, /* read op notice: the buffer waits for the receiver's credit */
        VB_SQ_READ,   /* receiver's RDMA READ: the message is in the ring when it completes */
        VB_SQ_OTHER,  /* control frame or credit */
};

/* One arrival, in order: a data message or a control frame. With the read op, a data
 * message is ready once its READ (number read_no) has completed. */
struct vb_arrival {
        struct ds_msg msg;
        uint64_t read_no;
};

struct verbs_link {
        struct ds_link base;
        pthread_mutex_t lock; /* the send side and the receive side may be two threads */

        struct rdma_event_channel *cm_channel; /* this link's own (accept migrates to it) */
        struct rdma_cm_id *id;
        struct ibv_pd *pd;
        struct ibv_comp_channel *send_events, *recv_events;
        struct ibv_cq *send_cq, *recv_cq;
        struct ibv_qp *qp;
        uint8_t *frames; /* VB_DEPTH receive frames, then VB_DEPTH send frames */
        struct ibv_mr *frames_mr;
        uint32_t max_inline;
        bool sender, events, connected, peer_gone;
        int failed; /* the first fatal error; every later call returns it */
        struct ds_error fail_err;
        uint64_t cm_check_ns;   /* busy-poll: when to look for a disconnect next */
        uint64_t idle_since_ns; /* busy-poll: since when no completion came (0: one just did) */

        /* The run, fixed by prepare/start. */
        bool started;
        enum ds_link_op op;
        uint32_t msg_size;
        struct ibv_mr *pool_mr; /* sender: the caller's send pool */
        uintptr_t pool_base;
        size_t pool_bytes;
        struct ds_pool *ring; /* receiver */
        bool ring_lent;       /* the ring is params->recv_pool, the caller's to free */
        struct ibv_mr *ring_mr;
        uint32_t slots;      /* receiver: credit it gives; sender: credit it has */
        uint32_t ring_count; /* ring buffers (send op: slots + VB_SPARE) */
        uint64_t peer_addr;  /* write: the receiver's ring; read: the sender's pool */
        uint32_t peer_rkey;
        uint32_t peer_stride; /* write: bytes between ring slots */
        uint64_t peer_bytes;  /* read: size of the sender's pool */

        /* Send queue: entry i % VB_DEPTH is the WR with wr_id i; its send frame too. */
        uint8_t sq_kind[VB_DEPTH];
        uint64_t sq_posted, sq_done;

        /* Receive frames, posted round the VB_DEPTH frames. */
        uint64_t rq_next;
        unsigned rq_posted, rq_target;

        /* Sender: buffers by message, handed back through reap() once done. */
        void *tx_buf[VB_DEPTH];
        uint64_t sent, tx_done, reaped, peer_released;

        /* Receiver. */
        uint64_t data_in;  /* data messages arrived (the write op's slot is data_in % slots) */
        uint64_t next_seq; /* the seq expected next, to widen the immediate's low bits */
        uint64_t released, credited, reads_posted, reads_done;
        struct vb_arrival rxq[VB_RXQ];
        uint64_t rxq_head, rxq_tail;
        struct ctl_ring ctl;
};

/* Big-endian fields of offers and notices, which may sit anywhere in a buffer. */
static inline void vb_put32(uint8_t *p, uint32_t x)
{
        x = htobe32(x);
        memcpy(p, &x, 4);
}

static inline void vb_put64(uint8_t *p, uint64_t x)
{
        x = htobe64(x);
        memcpy(p, &x, 8);
}

static inline uint32_t vb_get32(const uint8_t *p)
{
        uint32_t x;
        memcpy(&x, p, 4);
        return be32toh(x);
}

static inline uint64_t vb_get64(const uint8_t *p)
{
        uint64_t x;
        memcpy(&x, p, 8);
        return be64toh(x);
}

/* link_verbs_data.c */
int vb_send(struct ds_link *link, const struct ds_msg *msgs, unsigned n, struct ds_error *err);
int vb_reap(struct ds_link *link, void **bufs, unsigned max, int timeout_ms, struct ds_error *err);
int vb_send_ctl(struct ds_link *link, uint8_t type, const void *payload, size_t len,
                struct ds_error *err);
int vb_recv(struct ds_link *link, struct ds_msg *msgs, unsigned max, int timeout_ms,
            struct ds_error *err);
void vb_release(struct ds_link *link, const struct ds_msg *msgs, unsigned n);
/* Posts receive frames until rq_target are out. Returns 0 or a negative errno. */
int vb_post_frames(struct verbs_link *v, struct ds_error *err);
/* Posts every ring buffer as a receive (send op, receiver). */
int vb_post_ring(struct verbs_link *v, struct ds_error *err);
/* Waits until our sends have completed (so a close does not flush the last FINAL). */
void vb_drain(struct verbs_link *v, int timeout_ms);

#endif
