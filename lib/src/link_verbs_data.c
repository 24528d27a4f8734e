/* The verbs link's data path: posting data, control frames and credits, taking
 * completions in batches, and waiting for them by busy-polling or on completion events.
 * Every entry point holds the link's lock and lets go of it only while it waits, so a
 * sending thread and a receiving thread can share a link (link.h). */
#include "link_verbs.h"

#include <dragstrip/pool.h>
#include <dragstrip/stop.h>
#include <dragstrip/wire.h>

#include <errno.h>
#include <poll.h>
#include <sched.h>

#define CM_CHECK_NS 1000000u /* busy-polling looks for a disconnect once a millisecond */
/* Busy-polling sleeps on completion events after this long without a completion. */
#define SPIN_NS 200000u

/* Work requests built up and posted with one call. */
struct sq_batch {
        struct ibv_send_wr wr[VB_POLL_BATCH];
        struct ibv_sge sge[VB_POLL_BATCH];
        unsigned n;
};

struct rq_batch {
        struct ibv_recv_wr wr[VB_POLL_BATCH];
        struct ibv_sge sge[VB_POLL_BATCH];
        unsigned n;
};

static uint8_t *rx_frame(struct verbs_link *v, uint64_t index)
{
        return v->frames + (index % VB_DEPTH) * VB_FRAME;
}

/* The send frame that belongs to send queue entry wr_id. */
static uint8_t *tx_frame(struct verbs_link *v, uint64_t wr_id)
{
        return v->frames + (VB_DEPTH + wr_id % VB_DEPTH) * VB_FRAME;
}

static uint64_t deadline_of(int timeout_ms)
{
        return timeout_ms < 0 ? UINT64_MAX : ds_now_ns() + (uint64_t)timeout_ms * 1000000u;
}

/* Keeps the first fatal error (err already filled); the link is unusable after it. */
static int link_fail(struct verbs_link *v, int rc, const struct ds_error *err)
{
        if (!v->failed) {
                v->failed = rc;
                if (err)
                        v->fail_err = *err;
        }
        return rc;
}

static int check_failed(const struct verbs_link *v, struct ds_error *err)
{
        if (v->failed && err)
                *err = v->fail_err;
        return v->failed;
}

/* A peer that breaks the data protocol cannot be resynchronised (it may already have
 * written over a slot in use): count it and give up on the link. */
static int reject(struct verbs_link *v, enum ds_wire_reject why, const char *what,
                  struct ds_error *err)
{
        v->base.stats.malformed[why]++;
        return link_fail(v, ds_fail(err, -EPROTO, "verbs: %s %s", v->base.peer, what), err);
}

static int wc_fail(struct verbs_link *v, const struct ibv_wc *wc, const char *queue,
                   struct ds_error *err)
{
        /* Flushed work and exhausted retries are how RC tells of a peer that left. */
        if (wc->status == IBV_WC_WR_FLUSH_ERR || wc->status == IBV_WC_RETRY_EXC_ERR)
                return link_fail(v,
                                 ds_fail(err, -EPIPE, "verbs: %s closed the link (%s)",
                                         v->base.peer, ibv_wc_status_str(wc->status)),
                                 err);
        return link_fail(v,
                         ds_fail(err, -EIO, "verbs: %s completion with %s: %s (vendor error 0x%x)",
                                 queue, v->base.peer, ibv_wc_status_str(wc->status),
                                 wc->vendor_err),
                         err);
}

/* The whole number nearest to near whose low bits are low (immediates carry only those). */
static uint64_t widen(uint64_t near, uint64_t low, unsigned bits)
{
        uint64_t span = 1ull << bits;
        uint64_t ahead = (low - near) & (span - 1);
        if (ahead < span / 2 || near < span - ahead)
                return near + ahead;
        return near - (span - ahead);
}

static unsigned sq_room(const struct verbs_link *v)
{
        return VB_DEPTH - (unsigned)(v->sq_posted - v->sq_done);
}

/* Appends one work request; the caller fills in what its opcode needs. */
static struct ibv_send_wr *sq_add(struct verbs_link *v, struct sq_batch *b, enum vb_sq_kind kind,
                                  enum ibv_wr_opcode opcode, const void *addr, uint32_t len,
                                  uint32_t lkey)
{
        unsigned i = b->n++;
        uint64_t wr_id = v->sq_posted + i;
        v->sq_kind[wr_id % VB_DEPTH] = (uint8_t)kind;
        b->sge[i] = (struct ibv_sge){.addr = (uintptr_t)addr, .length = len, .lkey = lkey};
        struct ibv_send_wr *wr = &b->wr[i];
        *wr = (struct ibv_send_wr){
            .wr_id = wr_id, .sg_list = &b->sge[i], .num_sge = len ? 1 : 0, .opcode = opcode};
        /* Small payloads travel inside the work request: no DMA read of the buffer. */
        if (len && len <= v->max_inline && opcode != IBV_WR_RDMA_READ)
                wr->send_flags = IBV_SEND_INLINE;
        if (i)
                b->wr[i - 1].next = wr;
        return wr;
}

/* Posts the batch with one call. Completions are batched too: one signal per
 * VB_SIGNAL_EVERY requests or VB_SIGNAL_BYTES bytes, and on the last of each batch, which
 * covers those before. A buffer goes back to its sender only with a signal: 6 of xftp's 8
 * buffers of 4 MiB posted together came back together, after the sixth was sent, and its
 * disk thread waited for them. The last is also solicited: a peer asleep on its receive
 * queue wakes once a batch. */
static int sq_flush(struct verbs_link *v, struct sq_batch *b, struct ds_error *err)
{
        if (b->n == 0)
                return 0;
        struct ibv_send_wr *last = &b->wr[b->n - 1];
        if (last->opcode != IBV_WR_RDMA_READ)
                last->send_flags |= IBV_SEND_SOLICITED;
        unsigned unsignaled = 0; /* the last of every batch is signaled: none carry over */
        uint64_t unsignaled_bytes = 0;
        for (unsigned i = 0; i < b->n; i++) {
                unsignaled_bytes += b->sge[i].length;
                if (++unsignaled >= VB_SIGNAL_EVERY || unsignaled_bytes >= VB_SIGNAL_BYTES ||
                    i == b->n - 1) {
                        b->wr[i].send_flags |= IBV_SEND_SIGNALED;
                        unsignaled = 0;
                        unsignaled_bytes = 0;
                }
        }
        struct ibv_send_wr *bad;
        int rc = ibv_post_send(v->qp, b->wr, &bad);
        if (rc)
                return link_fail(v, ds_fail(err, -rc, "ibv_post_send to %s", v->base.peer), err);
        v->sq_posted += b->n;
        b->n = 0;
        return 0;
}

static void rq_add(struct rq_batch *b, uint64_t wr_id, const void *addr, uint32_t len,
                   uint32_t lkey)
{
        unsigned i = b->n++;
        b->sge[i] = (struct ibv_sge){.addr = (uintptr_t)addr, .length = len, .lkey = lkey};
        b->wr[i] = (struct ibv_recv_wr){.wr_id = wr_id, .sg_list = &b->sge[i], .num_sge = 1};
        if (i)
                b->wr[i - 1].next = &b->wr[i];
}

static void rq_add_slot(struct verbs_link *v, struct rq_batch *b, uint32_t slot)
{
        rq_add(b, VB_WR_SLOT | slot, ds_pool_buf(v->ring, slot),
               (uint32_t)ds_pool_buf_size(v->ring), v->ring_mr->lkey);
}

static int rq_flush(struct verbs_link *v, struct rq_batch *b, struct ds_error *err)
{
        if (b->n == 0)
                return 0;
        struct ibv_recv_wr *bad;
        int rc = ibv_post_recv(v->qp, b->wr, &bad);
        b->n = 0;
        if (rc)
                return link_fail(v, ds_fail(err, -rc, "ibv_post_recv for %s", v->base.peer), err);
        return 0;
}

int vb_post_frames(struct verbs_link *v, struct ds_error *err)
{
        while (v->rq_posted < v->rq_target) {
                struct rq_batch b = {.n = 0};
                while (b.n < VB_POLL_BATCH && v->rq_posted + b.n < v->rq_target) {
                        uint64_t frame = v->rq_next++ % VB_DEPTH;
                        rq_add(&b, frame, rx_frame(v, frame), VB_FRAME, v->frames_mr->lkey);
                }
                unsigned n = b.n;
                int rc = rq_flush(v, &b, err);
                if (rc < 0)
                        return rc;
                v->rq_posted += n;
        }
        return 0;
}

int vb_post_ring(struct verbs_link *v, struct ds_error *err)
{
        struct rq_batch b = {.n = 0};
        for (uint32_t slot = 0; slot < v->ring_count; slot++) {
                rq_add_slot(v, &b, slot);
                int rc = b.n == VB_POLL_BATCH ? rq_flush(v, &b, err) : 0;
                if (rc < 0)
                        return rc;
        }
        return rq_flush(v, &b, err);
}

/* Send completions: every request up to a signaled one is done. */
static int poll_send_cq(struct verbs_link *v, struct ds_error *err)
{
        struct ibv_wc wc[VB_POLL_BATCH];
        int n = ibv_poll_cq(v->send_cq, VB_POLL_BATCH, wc);
        if (n < 0)
                return link_fail(v, ds_fail(err, -EIO, "ibv_poll_cq (sends to %s)", v->base.peer),
                                 err);
        for (int i = 0; i < n; i++) {
                if (wc[i].status != IBV_WC_SUCCESS)
                        return wc_fail(v, &wc[i], "send", err);
                for (; v->sq_done <= wc[i].wr_id && v->sq_done < v->sq_posted; v->sq_done++) {
                        uint8_t kind = v->sq_kind[v->sq_done % VB_DEPTH];
                        v->tx_done += kind == VB_SQ_DATA;
                        v->reads_done += kind == VB_SQ_READ;
                }
        }
        return n;
}

static int enqueue(struct verbs_link *v, const struct ds_msg *msg, uint64_t read_no,
                   struct ds_error *err)
{
        if (v->rxq_tail - v->rxq_head >= VB_RXQ)
                return reject(v, DS_WIRE_SESSION_BAD, "sends beyond its credit", err);
        struct vb_arrival *a = &v->rxq[v->rxq_tail++ % VB_RXQ];
        a->msg = *msg;
        a->read_no = read_no;
        return 0;
}

static int deliver(struct verbs_link *v, uint32_t slot, uint32_t len, uint64_t seq,
                   uint64_t read_no, struct ds_error *err)
{
        v->data_in++;
        v->next_seq = seq + 1;
        v->base.stats.frames_received++;
        struct ds_msg msg = {.buf = ds_pool_buf(v->ring, slot),
                             .len = len,
                             .kind = DS_MSG_DATA,
                             .seq = seq,
                             .cookie = slot};
        return enqueue(v, &msg, read_no, err);
}

static int check_len(struct verbs_link *v, uint32_t len, struct ds_error *err)
{
        if (len == 0)
                return reject(v, DS_WIRE_LENGTH_BAD, "sent an empty message", err);
        if (len > v->msg_size)
                return reject(v, DS_WIRE_TOO_BIG, "sent a message above the negotiated size", err);
        return 0;
}

/* Write op: a batch of messages is already in consecutive slots. The immediate of its last
 * says which slot that is and its number; the ones before it came as plain writes, each a
 * whole message, and RC placed them before the last. */
static int on_write(struct verbs_link *v, const struct ibv_wc *wc, struct ds_error *err)
{
        if (v->sender || !v->started || v->op != DS_OP_WRITE)
                return reject(v, DS_WIRE_TYPE_BAD, "wrote data where none was due", err);
        uint32_t imm = be32toh(wc->imm_data);
        uint64_t last = widen(v->next_seq, imm >> 8, 24);
        if (last < v->next_seq || last - v->next_seq >= v->credited + v->slots - v->data_in)
                return reject(v, DS_WIRE_SESSION_BAD, "sends beyond its credit", err);
        uint64_t count = last - v->next_seq + 1;
        if ((imm & 0xffu) != (v->data_in + count - 1) % v->slots)
                return reject(v, DS_WIRE_OFFSET_BAD, "wrote outside the slot its credit allowed",
                              err);
        int rc = check_len(v, wc->byte_len, err);
        for (uint64_t seq = v->next_seq; rc == 0 && seq <= last; seq++)
                rc = deliver(v, (uint32_t)(v->data_in % v->slots),
                             seq == last ? wc->byte_len : v->msg_size, seq, 0, err);
        return rc;
}

/* Read op: a notice of where the message lies in the sender's pool; pull it into the
 * next slot. It is handed out once the READ completes. */
static int on_notice(struct verbs_link *v, const struct ibv_wc *wc, const uint8_t *notice,
                     struct sq_batch *reads, struct ds_error *err)
{
        if (wc->byte_len != VB_NOTICE_LEN)
                return reject(v, DS_WIRE_LENGTH_BAD, "sent a read notice of the wrong size", err);
        uint64_t offset = vb_get64(notice);
        uint32_t len = vb_get32(notice + 8);
        int rc = check_len(v, len, err);
        if (rc < 0)
                return rc;
        if (offset > v->peer_bytes || len > v->peer_bytes - offset)
                return reject(v, DS_WIRE_OFFSET_BAD, "pointed outside its registered pool", err);
        if (sq_room(v) <= reads->n)
                return reject(v, DS_WIRE_SESSION_BAD, "sends beyond its credit", err);
        uint32_t slot = (uint32_t)(v->data_in % v->slots);
        struct ibv_send_wr *wr = sq_add(v, reads, VB_SQ_READ, IBV_WR_RDMA_READ,
                                        ds_pool_buf(v->ring, slot), len, v->ring_mr->lkey);
        wr->wr.rdma.remote_addr = v->peer_addr + offset;
        wr->wr.rdma.rkey = v->peer_rkey;
        uint64_t seq = widen(v->next_seq, be32toh(wc->imm_data), 32);
        return deliver(v, slot, len, seq, v->reads_posted++, err);
}

/* Sender: the receiver's released count, in the low 32 bits of an immediate. */
static void on_credit(struct verbs_link *v, const struct ibv_wc *wc)
{
        uint64_t released = widen(v->peer_released, be32toh(wc->imm_data), 32);
        if (!v->started || released < v->peer_released || released > v->sent) {
                v->base.stats.malformed[DS_WIRE_CTL_BAD]++;
                return;
        }
        v->peer_released = released;
        if (v->op == DS_OP_READ) /* released messages have been read: their buffers are free */
                v->tx_done = released;
}

static int on_ctl(struct verbs_link *v, const uint8_t *frame, uint32_t len, struct ds_error *err)
{
        struct ds_wire_hdr h;
        /* max_msg 0: data never comes framed on this link */
        enum ds_wire_reject bad = ds_wire_parse(frame, len, 0, 0, &h);
        if (bad != DS_WIRE_OK) {
                v->base.stats.malformed[bad]++;
                return 0;
        }
        struct ds_msg msg;
        if (ctl_ring_take(&v->ctl, &h, frame + DS_WIRE_HDR_LEN, &msg) < 0)
                return link_fail(
                    v, ds_fail(err, -EPROTO, "verbs: %s floods control frames", v->base.peer), err);
        return enqueue(v, &msg, 0, err);
}

/* One receive completion. Frames are re-posted by the caller; ring buffers that hold no
 * data (a control frame under the send op) go back on slots at once. */
static int on_recv(struct verbs_link *v, const struct ibv_wc *wc, struct sq_batch *reads,
                   struct rq_batch *slots, struct ds_error *err)
{
        bool in_slot = (wc->wr_id & VB_WR_SLOT) != 0;
        uint32_t index = (uint32_t)wc->wr_id;
        if (!in_slot)
                v->rq_posted--;
        if (wc->status != IBV_WC_SUCCESS)
                return wc_fail(v, wc, "receive", err);
        const uint8_t *buf = in_slot ? ds_pool_buf(v->ring, index) : rx_frame(v, index);
        if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM)
                return on_write(v, wc, err);
        if (!(wc->wc_flags & IBV_WC_WITH_IMM)) {
                if (in_slot)
                        rq_add_slot(v, slots, index);
                return on_ctl(v, buf, wc->byte_len, err);
        }
        if (v->sender) {
                on_credit(v, wc);
                return 0;
        }
        if (v->started && v->op == DS_OP_SEND && in_slot) {
                int rc = check_len(v, wc->byte_len, err);
                if (rc < 0)
                        return rc;
                uint64_t seq = widen(v->next_seq, be32toh(wc->imm_data), 32);
                return deliver(v, index, wc->byte_len, seq, 0, err);
        }
        if (v->started && v->op == DS_OP_READ && !in_slot)
                return on_notice(v, wc, buf, reads, err);
        return reject(v, DS_WIRE_TYPE_BAD, "sent data where none was due", err);
}

static int poll_recv_cq(struct verbs_link *v, struct ds_error *err)
{
        struct ibv_wc wc[VB_POLL_BATCH];
        int n = ibv_poll_cq(v->recv_cq, VB_POLL_BATCH, wc);
        if (n < 0)
                return link_fail(
                    v, ds_fail(err, -EIO, "ibv_poll_cq (receives from %s)", v->base.peer), err);
        struct sq_batch reads = {.n = 0};
        struct rq_batch slots = {.n = 0};
        int rc = 0;
        for (int i = 0; i < n && rc == 0; i++)
                rc = on_recv(v, &wc[i], &reads, &slots, err);
        if (rc == 0)
                rc = sq_flush(v, &reads, err);
        if (rc == 0)
                rc = rq_flush(v, &slots, err);
        if (rc == 0)
                rc = vb_post_frames(v, err);
        return rc < 0 ? rc : n;
}

/* Takes whatever both queues hold, without waiting. Returns the count or an error. */
static int progress(struct verbs_link *v, struct ds_error *err)
{
        int sent = poll_send_cq(v, err);
        if (sent < 0)
                return sent;
        int received = poll_recv_cq(v, err);
        if (received < 0)
                return received;
        if (sent + received)
                v->idle_since_ns = 0;
        return sent + received;
}

static void check_cm(struct verbs_link *v)
{
        struct rdma_cm_event *event;
        while (rdma_get_cm_event(v->cm_channel, &event) == 0) {
                if (event->event == RDMA_CM_EVENT_DISCONNECTED ||
                    event->event == RDMA_CM_EVENT_DEVICE_REMOVAL)
                        v->peer_gone = true;
                rdma_ack_cm_event(event);
        }
}

static void take_cq_events(struct ibv_comp_channel *channel)
{
        struct ibv_cq *cq;
        void *context;
        while (ibv_get_cq_event(channel, &cq, &context) == 0)
                ibv_ack_cq_events(cq, 1);
}

/* Sleeps on completion events until something happens or the deadline (ns) passes. */
static int await_events(struct verbs_link *v, uint64_t deadline, struct ds_error *err)
{
        /* Receives wake us once per batch of the peer's (sq_flush); errors always do. */
        if (ibv_req_notify_cq(v->send_cq, 0) || ibv_req_notify_cq(v->recv_cq, 1))
                return link_fail(v, ds_fail(err, -EIO, "ibv_req_notify_cq"), err);
        int n = progress(v, err); /* what completed before the queues were armed */
        if (n != 0)
                return n < 0 ? n : 0;
        struct pollfd fds[3] = {{.fd = v->send_events->fd, .events = POLLIN},
                                {.fd = v->recv_events->fd, .events = POLLIN},
                                {.fd = v->cm_channel->fd, .events = POLLIN}};
        uint64_t now = ds_now_ns();
        uint64_t wait_ns = deadline == UINT64_MAX ? 0 : deadline > now ? deadline - now : 0;
        /* In slices (stop.h): a signal wakes whichever thread it hits, seldom this one, so
         * a stop is seen when the slice ends; the callers' loops wait on. */
        int ms = deadline == UINT64_MAX || wait_ns >= DS_STOP_SLICE_MS * 1000000ull
                     ? DS_STOP_SLICE_MS
                     : (int)((wait_ns + 999999u) / 1000000u);
        pthread_mutex_unlock(&v->lock);
        int ready = poll(fds, 3, ms);
        int poll_errno = errno;
        pthread_mutex_lock(&v->lock);
        if (ready < 0 && poll_errno != EINTR)
                return link_fail(v, ds_fail(err, -poll_errno, "verbs: poll"), err);
        take_cq_events(v->send_events);
        take_cq_events(v->recv_events);
        if (fds[2].revents)
                check_cm(v);
        return 0;
}

/* Waits a little for a completion: sleeping on events, or one turn of busy-polling. A
 * busy-poller that has seen nothing for SPIN_NS sleeps too: when the peer's work is done
 * by this machine's CPUs (soft-RoCE), spinning would take the CPU that work needs. */
static int await(struct verbs_link *v, uint64_t deadline, struct ds_error *err)
{
        uint64_t now = ds_now_ns();
        if (!v->idle_since_ns)
                v->idle_since_ns = now;
        if (v->events || now - v->idle_since_ns >= SPIN_NS)
                return await_events(v, deadline, err);
        if (now >= v->cm_check_ns) {
                check_cm(v);
                v->cm_check_ns = now + CM_CHECK_NS;
        }
        /* Soft-RoCE does its work in kernel threads: a poller that never yields takes the
         * CPU they need on a small machine. One system call, and only when idle. */
        pthread_mutex_unlock(&v->lock);
        sched_yield();
        pthread_mutex_lock(&v->lock);
        return 0;
}

/* The deadline of a wait for the peer (credit, completions) that a caller cannot bound
 * itself: the stall limit, or once a stop (stop.h) is asked, DS_STOP_SLICE_MS from when
 * the wait first saw it, so that a peer that stopped answering does not hold a stopping
 * process for the whole stall limit while an exchange that still moves (blast's END, the
 * sink's FINAL) has its slice to finish. *stop_ns is the wait's own, 0 at its start. */
static uint64_t wait_deadline(uint64_t stall_deadline, uint64_t *stop_ns)
{
        if (!*stop_ns && ds_stopping())
                *stop_ns = ds_now_ns() + (uint64_t)DS_STOP_SLICE_MS * 1000000u;
        return *stop_ns && *stop_ns < stall_deadline ? *stop_ns : stall_deadline;
}

/* Nothing was posted: the link stays whole, and its caller sees -EINTR as from any
 * wait a stop ended. */
static int stopped_waiting(const struct verbs_link *v, const char *what, struct ds_error *err)
{
        return ds_fail(err, -EINTR, "verbs: stopped waiting for %s from %s", what, v->base.peer);
}

static int sq_wait_room(struct verbs_link *v, unsigned need, struct ds_error *err)
{
        uint64_t stall = deadline_of(VB_STALL_MS), stop_ns = 0;
        while (sq_room(v) < need) {
                uint64_t deadline = wait_deadline(stall, &stop_ns);
                int rc = progress(v, err);
                if (rc < 0)
                        return rc;
                if (rc > 0)
                        continue;
                if (stop_ns && ds_now_ns() >= stop_ns)
                        return stopped_waiting(v, "send completions", err);
                if (ds_now_ns() >= stall)
                        return link_fail(v,
                                         ds_fail(err, -ETIMEDOUT,
                                                 "verbs: sends to %s do not complete",
                                                 v->base.peer),
                                         err);
                if ((rc = await(v, deadline, err)) < 0)
                        return rc;
        }
        return 0;
}

/* How many of n messages may go now (credit, send queue, buffers not yet reaped),
 * waiting up to the stall limit for credit when there is none. */
static int send_room(struct verbs_link *v, unsigned n, unsigned *room, struct ds_error *err)
{
        uint64_t stall = deadline_of(VB_STALL_MS), stop_ns = 0;
        for (;;) {
                uint64_t deadline = wait_deadline(stall, &stop_ns);
                int rc = progress(v, err);
                if (rc < 0)
                        return rc;
                uint64_t unreaped = VB_DEPTH - (v->sent - v->reaped);
                uint64_t credit = v->peer_released + v->slots - v->sent;
                uint64_t r = n < VB_POLL_BATCH ? n : VB_POLL_BATCH;
                r = r < unreaped ? r : unreaped;
                r = r < credit ? r : credit;
                r = r < sq_room(v) ? r : sq_room(v);
                if (r > 0 || n == 0 || unreaped == 0) { /* unreaped: the caller must reap */
                        *room = (unsigned)r;
                        return 0;
                }
                if (v->peer_gone)
                        return link_fail(
                            v, ds_fail(err, -EPIPE, "verbs: %s closed the link", v->base.peer),
                            err);
                if (stop_ns && ds_now_ns() >= stop_ns)
                        return stopped_waiting(v, "credit", err);
                if (ds_now_ns() >= stall)
                        return link_fail(v,
                                         ds_fail(err, -ETIMEDOUT,
                                                 "verbs: %s returned no credit for %d ms",
                                                 v->base.peer, VB_STALL_MS),
                                         err);
                if ((rc = await(v, deadline, err)) < 0)
                        return rc;
        }
}

static int check_msgs(const struct verbs_link *v, const struct ds_msg *msgs, unsigned n,
                      struct ds_error *err)
{
        for (unsigned i = 0; i < n; i++) {
                uintptr_t at = (uintptr_t)msgs[i].buf;
                if (msgs[i].len == 0 || msgs[i].len > v->msg_size || at < v->pool_base ||
                    at - v->pool_base > v->pool_bytes - msgs[i].len)
                        return ds_fail(err, -EINVAL,
                                       "verbs send: %u bytes at %p are not a message in the "
                                       "registered pool",
                                       msgs[i].len, msgs[i].buf);
                /* The write op numbers unmarked messages by their place (add_data). */
                if (v->op == DS_OP_WRITE && msgs[i].seq != v->sent + i)
                        return ds_fail(err, -EINVAL,
                                       "verbs send: message %llu comes as number %llu; a link's "
                                       "messages go in order from 0",
                                       (unsigned long long)msgs[i].seq,
                                       (unsigned long long)(v->sent + i));
        }
        return 0;
}

/* Appends message number (this link's count) to the batch. The write op marks (with an
 * immediate) only a batch's last message and any shorter than the negotiated size: the
 * receiver takes one completion per batch, and knows the unmarked ones' length. */
static void add_data(struct verbs_link *v, struct sq_batch *b, const struct ds_msg *m,
                     uint64_t number, bool last)
{
        uint32_t lkey = v->pool_mr->lkey;
        struct ibv_send_wr *wr;
        if (v->op == DS_OP_READ) {
                uint8_t *notice = tx_frame(v, v->sq_posted + b->n);
                vb_put64(notice, (uintptr_t)m->buf - v->pool_base);
                vb_put32(notice + 8, m->len);
                vb_put32(notice + 12, 0);
                wr = sq_add(v, b, VB_SQ_NOTICE, IBV_WR_SEND_WITH_IMM, notice, VB_NOTICE_LEN,
                            v->frames_mr->lkey);
                wr->imm_data = htobe32((uint32_t)m->seq);
        } else if (v->op == DS_OP_SEND) {
                wr = sq_add(v, b, VB_SQ_DATA, IBV_WR_SEND_WITH_IMM, m->buf, m->len, lkey);
                wr->imm_data = htobe32((uint32_t)m->seq);
        } else {
                uint32_t slot = (uint32_t)(number % v->slots);
                bool mark = last || m->len != v->msg_size;
                wr = sq_add(v, b, VB_SQ_DATA, mark ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE,
                            m->buf, m->len, lkey);
                if (mark)
                        wr->imm_data = htobe32((uint32_t)m->seq << 8 | slot);
                wr->wr.rdma.remote_addr = v->peer_addr + (uint64_t)slot * v->peer_stride;
                wr->wr.rdma.rkey = v->peer_rkey;
        }
        v->tx_buf[number % VB_DEPTH] = m->buf;
}

int vb_send(struct ds_link *link, const struct ds_msg *msgs, unsigned n, struct ds_error *err)
{
        struct verbs_link *v = (struct verbs_link *)link;
        unsigned room = 0;
        pthread_mutex_lock(&v->lock);
        int rc = check_failed(v, err);
        if (rc == 0 && (!v->sender || !v->started))
                rc = ds_fail(err, -EINVAL, "verbs: send before the hello was answered");
        if (rc == 0)
                rc = check_msgs(v, msgs, n, err);
        if (rc == 0)
                rc = send_room(v, n, &room, err);
        if (rc == 0 && room > 0) {
                struct sq_batch b = {.n = 0};
                for (unsigned i = 0; i < room; i++)
                        add_data(v, &b, &msgs[i], v->sent + i, i == room - 1);
                rc = sq_flush(v, &b, err);
        }
        if (rc == 0) {
                v->sent += room;
                v->base.stats.frames_sent += room;
        }
        pthread_mutex_unlock(&v->lock);
        return rc < 0 ? rc : (int)room;
}

int vb_reap(struct ds_link *link, void **bufs, unsigned max, int timeout_ms, struct ds_error *err)
{
        struct verbs_link *v = (struct verbs_link *)link;
        uint64_t deadline = deadline_of(timeout_ms);
        pthread_mutex_lock(&v->lock);
        int rc;
        for (;;) {
                if ((rc = check_failed(v, err)) < 0 || (rc = progress(v, err)) < 0)
                        break;
                if (v->tx_done > v->reaped || ds_now_ns() >= deadline)
                        break;
                if (v->peer_gone) {
                        rc = ds_fail(err, -EPIPE, "verbs: %s closed the link", v->base.peer);
                        break;
                }
                if ((rc = await(v, deadline, err)) < 0)
                        break;
        }
        if (rc >= 0) {
                unsigned got = 0;
                while (got < max && v->reaped < v->tx_done)
                        bufs[got++] = v->tx_buf[v->reaped++ % VB_DEPTH];
                rc = (int)got;
        }
        pthread_mutex_unlock(&v->lock);
        return rc;
}

int vb_send_ctl(struct ds_link *link, uint8_t type, const void *payload, size_t len,
                struct ds_error *err)
{
        struct verbs_link *v = (struct verbs_link *)link;
        if (len > DS_WIRE_CTL_MAX)
                return ds_fail(err, -EINVAL, "control payload of %zu bytes", len);
        pthread_mutex_lock(&v->lock);
        int rc = check_failed(v, err);
        if (rc == 0)
                rc = sq_wait_room(v, 1, err);
        if (rc == 0) {
                /* one copy: control frames are small and rare */
                uint8_t *frame = tx_frame(v, v->sq_posted);
                struct ds_wire_hdr h = {
                    .type = type, .msg_len = (uint32_t)len, .frag_len = (uint32_t)len};
                ds_wire_encode(frame, &h);
                memcpy(frame + DS_WIRE_HDR_LEN, payload, len);
                struct sq_batch b = {.n = 0};
                sq_add(v, &b, VB_SQ_OTHER, IBV_WR_SEND, frame, (uint32_t)(DS_WIRE_HDR_LEN + len),
                       v->frames_mr->lkey);
                rc = sq_flush(v, &b, err);
        }
        pthread_mutex_unlock(&v->lock);
        return rc;
}

/* Hands out arrivals in order; a message whose READ is still on the way holds back the
 * ones behind it, control frames included (an END must not overtake the data). */
static unsigned hand_out(struct verbs_link *v, struct ds_msg *msgs, unsigned max)
{
        unsigned got = 0;
        while (got < max && v->rxq_head != v->rxq_tail) {
                const struct vb_arrival *a = &v->rxq[v->rxq_head % VB_RXQ];
                if (a->msg.kind == DS_MSG_DATA && v->op == DS_OP_READ &&
                    a->read_no >= v->reads_done)
                        break;
                msgs[got++] = a->msg;
                v->rxq_head++;
        }
        return got;
}

int vb_recv(struct ds_link *link, struct ds_msg *msgs, unsigned max, int timeout_ms,
            struct ds_error *err)
{
        struct verbs_link *v = (struct verbs_link *)link;
        uint64_t deadline = deadline_of(timeout_ms);
        pthread_mutex_lock(&v->lock);
        int rc;
        for (;;) {
                if ((rc = check_failed(v, err)) < 0)
                        break;
                bool gone = v->peer_gone; /* known before this last look at the queues */
                if ((rc = progress(v, err)) < 0)
                        break;
                if ((rc = (int)hand_out(v, msgs, max)) > 0)
                        break;
                if (gone) {
                        rc = ds_fail(err, -EPIPE, "verbs: %s closed the link", v->base.peer);
                        break;
                }
                if (ds_now_ns() >= deadline)
                        break;
                if ((rc = await(v, deadline, err)) < 0)
                        break;
        }
        pthread_mutex_unlock(&v->lock);
        return rc;
}

/* Returns credit once a quarter ring is free: a zero-length SEND whose immediate is the
 * released count, so that the sender, busy-polling or asleep, hears of it. */
static int send_credit(struct verbs_link *v, struct ds_error *err)
{
        int rc = sq_wait_room(v, 1, err);
        if (rc < 0)
                return rc;
        struct sq_batch b = {.n = 0};
        struct ibv_send_wr *wr = sq_add(v, &b, VB_SQ_OTHER, IBV_WR_SEND_WITH_IMM, NULL, 0, 0);
        wr->imm_data = htobe32((uint32_t)v->released);
        rc = sq_flush(v, &b, err);
        if (rc == 0)
                v->credited = v->released;
        return rc;
}

void vb_release(struct ds_link *link, const struct ds_msg *msgs, unsigned n)
{
        struct verbs_link *v = (struct verbs_link *)link;
        struct ds_error err;
        struct rq_batch slots = {.n = 0};
        uint64_t data = 0;
        pthread_mutex_lock(&v->lock);
        for (unsigned i = 0; i < n; i++) {
                if (msgs[i].kind == DS_MSG_CTL) {
                        ctl_ring_release(&v->ctl);
                        continue;
                }
                data++;
                if (v->op == DS_OP_SEND) { /* its ring buffer takes the next SEND */
                        rq_add_slot(v, &slots, (uint32_t)msgs[i].cookie);
                        if (slots.n == VB_POLL_BATCH)
                                rq_flush(v, &slots, &err);
                }
        }
        rq_flush(v, &slots, &err);
        v->released += data;
        uint64_t step = v->slots / 4 ? v->slots / 4 : 1;
        /* A failure here is kept in the link and reported by the next recv(). */
        if (data && !v->failed && v->released - v->credited >= step)
                send_credit(v, &err);
        pthread_mutex_unlock(&v->lock);
}

void vb_drain(struct verbs_link *v, int timeout_ms)
{
        struct ds_error err;
        uint64_t deadline = deadline_of(timeout_ms);
        pthread_mutex_lock(&v->lock);
        while (!v->failed && v->sq_done < v->sq_posted && ds_now_ns() < deadline) {
                if (poll_send_cq(v, &err) == 0) {
                        pthread_mutex_unlock(&v->lock);
                        sched_yield();
                        pthread_mutex_lock(&v->lock);
                }
        }
        pthread_mutex_unlock(&v->lock);
}
