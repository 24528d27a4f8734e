/* The verbs link, set-up and tear-down: librdmacm finds the device and GID from an IP
 * address, then one step at a time (each failure names its step, as rc_pingpong.c does):
 * protection domain, completion channels and queues, an RC QP, the control frames'
 * registration; at prepare() the send pool or the receive ring is registered once, and
 * the offers swapped in the hello carry what the peer needs (link_verbs.h). */
#include "link_verbs.h"

#include <dragstrip/stop.h>

#include <dragstrip/net.h>
#include <dragstrip/pool.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_TIMEOUT_MS 5000
#define RD_ATOMIC_MAX      16 /* RDMA READs in flight per QP, if the device allows */
#define OFFER_SENDER       'S'
#define OFFER_RECEIVER     'R'
#define OFFER_EVENTS       1u /* sender's offer flag: the receiver should sleep too */
#define SENDER_OFFER_LEN   22 /* kind, flags, pool address, rkey, pool bytes */
#define RECEIVER_OFFER_LEN 22 /* kind, flags, slots, stride, ring address, rkey */

struct verbs_listener {
        struct ds_link_listener base;
        struct rdma_event_channel *channel;
        struct rdma_cm_id *id;
        bool events;
        int timeout_ms;
};

static int set_nonblock(int fd)
{
        int flags = fcntl(fd, F_GETFL);
        if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
                return -errno;
        return 0;
}

static int timeout_or_default(int timeout_ms)
{
        return timeout_ms > 0 ? timeout_ms : DEFAULT_TIMEOUT_MS;
}

/* Waits for the next event on a (non-blocking) channel; fails unless it is want. The
 * caller acks *out when it asked for it. */
static int cm_wait(struct rdma_event_channel *channel, enum rdma_cm_event_type want, int timeout_ms,
                   const char *step, const char *peer, struct rdma_cm_event **out,
                   struct ds_error *err)
{
        uint64_t deadline = ds_now_ns() + (uint64_t)timeout_ms * 1000000u;
        struct rdma_cm_event *event;
        for (;;) {
                if (rdma_get_cm_event(channel, &event) == 0)
                        break;
                if (errno != EAGAIN)
                        return ds_fail(err, -errno, "%s %s: rdma_get_cm_event", step, peer);
                uint64_t now = ds_now_ns();
                int ready = now >= deadline ? 0
                                            : ds_poll_one(channel->fd, POLLIN,
                                                          (int)((deadline - now) / 1000000u) + 1);
                if (ready < 0)
                        return ds_fail(err, ready, "%s %s: poll", step, peer);
                if (ready == 0)
                        return ds_fail(err, -ETIMEDOUT, "%s %s: no answer in %d ms", step, peer,
                                       timeout_ms);
        }
        if (event->event == want) {
                if (out)
                        *out = event;
                else
                        rdma_ack_cm_event(event);
                return 0;
        }
        enum rdma_cm_event_type got = event->event;
        int status = event->status;
        rdma_ack_cm_event(event);
        int rc = got == RDMA_CM_EVENT_REJECTED      ? -ECONNREFUSED
                 : got == RDMA_CM_EVENT_UNREACHABLE ? -EHOSTUNREACH
                 : got == RDMA_CM_EVENT_ADDR_ERROR  ? -EADDRNOTAVAIL
                                                    : -EPROTO;
        return ds_fail(err, rc, "%s %s: %s (status %d)", step, peer, rdma_event_str(got), status);
}

static struct rdma_event_channel *channel_new(struct ds_error *err)
{
        struct rdma_event_channel *channel = rdma_create_event_channel();
        if (!channel) {
                ds_fail(err, errno ? -errno : -ENODEV,
                        "rdma_create_event_channel (is rdma_ucm loaded, /dev/infiniband there?)");
                return NULL;
        }
        int rc = set_nonblock(channel->fd);
        if (rc < 0) {
                rdma_destroy_event_channel(channel);
                ds_fail(err, rc, "rdma event channel: O_NONBLOCK");
                return NULL;
        }
        return channel;
}

static struct verbs_link *link_new(struct ds_error *err)
{
        struct verbs_link *v = calloc(1, sizeof(*v));
        if (!v) {
                ds_fail(err, -ENOMEM, "verbs link");
                return NULL;
        }
        pthread_mutex_init(&v->lock, NULL);
        v->base.ops = &ds_link_verbs;
        v->base.caps = ds_link_verbs.caps;
        return v;
}

/* Frees whatever of the link was built, in the reverse order. */
static void link_destroy(struct verbs_link *v)
{
        if (v->id && v->id->qp)
                rdma_destroy_qp(v->id);
        if (v->pool_mr)
                ibv_dereg_mr(v->pool_mr);
        if (v->ring_mr)
                ibv_dereg_mr(v->ring_mr);
        if (v->frames_mr)
                ibv_dereg_mr(v->frames_mr);
        if (v->send_cq)
                ibv_destroy_cq(v->send_cq);
        if (v->recv_cq)
                ibv_destroy_cq(v->recv_cq);
        if (v->send_events)
                ibv_destroy_comp_channel(v->send_events);
        if (v->recv_events)
                ibv_destroy_comp_channel(v->recv_events);
        if (v->pd)
                ibv_dealloc_pd(v->pd);
        if (v->id)
                rdma_destroy_id(v->id);
        if (v->cm_channel)
                rdma_destroy_event_channel(v->cm_channel);
        if (v->ring && !v->ring_lent)
                ds_pool_destroy(v->ring);
        free(v->frames);
        pthread_mutex_destroy(&v->lock);
        free(v);
}

static struct ibv_comp_channel *events_new(struct ibv_context *ctx, const char *dev,
                                           struct ds_error *err)
{
        struct ibv_comp_channel *channel = ibv_create_comp_channel(ctx);
        if (!channel) {
                ds_fail(err, errno ? -errno : -ENOMEM, "ibv_create_comp_channel on %s", dev);
                return NULL;
        }
        int rc = set_nonblock(channel->fd);
        if (rc < 0) {
                ibv_destroy_comp_channel(channel);
                ds_fail(err, rc, "completion channel on %s: O_NONBLOCK", dev);
                return NULL;
        }
        return channel;
}

/* The device's part: PD, completion channels and queues, the QP, the control frames.
 * Fills conn with the READ depths this device allows. */
static int build_queues(struct verbs_link *v, struct rdma_conn_param *conn, struct ds_error *err)
{
        struct ibv_context *ctx = v->id->verbs;
        const char *dev = ibv_get_device_name(ctx->device);
        struct ibv_device_attr dattr;
        struct ibv_port_attr pattr;
        int rc = ibv_query_device(ctx, &dattr);
        if (rc)
                return ds_fail(err, -rc, "ibv_query_device %s", dev);
        if (dattr.max_qp_wr < VB_DEPTH || dattr.max_cqe < VB_DEPTH)
                return ds_fail(err, -ENOTSUP, "%s allows %d work requests per queue, %d needed",
                               dev, dattr.max_qp_wr, VB_DEPTH);
        rc = ibv_query_port(ctx, v->id->port_num, &pattr);
        if (rc)
                return ds_fail(err, -rc, "ibv_query_port %s port %u", dev, v->id->port_num);
        v->base.max_msg = pattr.max_msg_sz < DS_WIRE_MSG_MAX ? pattr.max_msg_sz : DS_WIRE_MSG_MAX;
        conn->responder_resources =
            (uint8_t)(dattr.max_qp_rd_atom < RD_ATOMIC_MAX ? dattr.max_qp_rd_atom : RD_ATOMIC_MAX);
        conn->initiator_depth =
            (uint8_t)(dattr.max_qp_init_rd_atom < RD_ATOMIC_MAX ? dattr.max_qp_init_rd_atom
                                                                : RD_ATOMIC_MAX);
        conn->retry_count = 7;
        conn->rnr_retry_count = 7; /* a receiver out of buffers makes us wait, never fail */
        /* A lost packet waits out the ACK timeout before its resend: rdma_cm's default on
         * RoCE is 2^17 x 4.096 us, 0.54 s, which soft-RoCE paid several times a run. A
         * kernel without the option (before 4.19) keeps its default: the link works on. */
        uint8_t ack_timeout = VB_ACK_TIMEOUT;
        (void)rdma_set_option(v->id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &ack_timeout,
                              sizeof(ack_timeout));

        if (!(v->pd = ibv_alloc_pd(ctx)))
                return ds_fail(err, errno ? -errno : -ENOMEM, "ibv_alloc_pd on %s", dev);
        if (!(v->send_events = events_new(ctx, dev, err)) ||
            !(v->recv_events = events_new(ctx, dev, err)))
                return -ENOMEM;
        if (!(v->send_cq = ibv_create_cq(ctx, VB_DEPTH, v, v->send_events, 0)) ||
            !(v->recv_cq = ibv_create_cq(ctx, VB_DEPTH, v, v->recv_events, 0)))
                return ds_fail(err, errno ? -errno : -ENOMEM, "ibv_create_cq on %s", dev);
        struct ibv_qp_init_attr qa = {
            .send_cq = v->send_cq,
            .recv_cq = v->recv_cq,
            .cap = {.max_send_wr = VB_DEPTH,
                    .max_recv_wr = VB_DEPTH,
                    .max_send_sge = 1,
                    .max_recv_sge = 1,
                    .max_inline_data = VB_INLINE},
            .qp_type = IBV_QPT_RC,
        };
        if (rdma_create_qp(v->id, v->pd, &qa) < 0) {
                qa.cap.max_inline_data = 0; /* inline is an optimisation; do without */
                if (rdma_create_qp(v->id, v->pd, &qa) < 0)
                        return ds_fail(err, -errno, "rdma_create_qp (RC) on %s", dev);
        }
        v->qp = v->id->qp;
        v->max_inline = qa.cap.max_inline_data;

        size_t bytes = 2u * VB_DEPTH * VB_FRAME;
        if (!(v->frames = aligned_alloc(4096, bytes)))
                return ds_fail(err, -ENOMEM, "verbs control frames");
        memset(v->frames, 0, bytes);
        if (!(v->frames_mr = ibv_reg_mr(v->pd, v->frames, bytes, IBV_ACCESS_LOCAL_WRITE)))
                return ds_fail(err, -errno, "ibv_reg_mr (control frames, %zu bytes) on %s", bytes,
                               dev);
        return 0;
}

static int verbs_listen(struct ds_link_listener **out, const struct ds_link_config *config,
                        struct ds_error *err)
{
        struct verbs_listener *l = calloc(1, sizeof(*l));
        if (!l)
                return ds_fail(err, -ENOMEM, "verbs listener");
        l->base.ops = &ds_link_verbs;
        l->events = config->events;
        l->timeout_ms = timeout_or_default(config->timeout_ms);
        const char *host = config->host ? config->host : "0.0.0.0";
        char port[8];
        snprintf(port, sizeof(port), "%u", config->port);
        struct rdma_addrinfo hints = {.ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_TCP};
        struct rdma_addrinfo *res = NULL;
        int rc = 0;
        if (!(l->channel = channel_new(err)))
                rc = -ENODEV;
        else if (rdma_create_id(l->channel, &l->id, l, RDMA_PS_TCP) < 0)
                rc = ds_fail(err, -errno, "rdma_create_id");
        else if (rdma_getaddrinfo(host, port, &hints, &res) != 0)
                rc = ds_fail(err, errno ? -errno : -EINVAL, "rdma_getaddrinfo %s:%s", host, port);
        else if (rdma_bind_addr(l->id, res->ai_src_addr) < 0)
                rc = ds_fail(err, -errno, "rdma_bind_addr %s:%s", host, port);
        else if (rdma_listen(l->id, 16) < 0)
                rc = ds_fail(err, -errno, "rdma_listen %s:%s", host, port);
        if (res)
                rdma_freeaddrinfo(res);
        if (rc < 0) {
                ds_link_unlisten(&l->base);
                return rc;
        }
        *out = &l->base;
        return 0;
}

static void verbs_unlisten(struct ds_link_listener *listener)
{
        struct verbs_listener *l = (struct verbs_listener *)listener;
        if (l->id)
                rdma_destroy_id(l->id);
        if (l->channel)
                rdma_destroy_event_channel(l->channel);
        free(l);
}

/* The rest of an accept, once the request's id is ours: a channel of its own (so that
 * each link's thread sees only its events), queues, one receive frame for the hello. */
static int accept_request(struct verbs_listener *l, struct verbs_link *v,
                          const struct rdma_conn_param *request, struct ds_error *err)
{
        struct sockaddr *peer = rdma_get_peer_addr(v->id);
        ds_net_format(peer, sizeof(struct sockaddr_in6), v->base.peer, sizeof(v->base.peer));
        struct rdma_conn_param conn;
        memset(&conn, 0, sizeof(conn));
        if (!(v->cm_channel = channel_new(err)))
                return -ENODEV;
        if (rdma_migrate_id(v->id, v->cm_channel) < 0)
                return ds_fail(err, -errno, "rdma_migrate_id for %s", v->base.peer);
        int rc = build_queues(v, &conn, err);
        if (rc < 0)
                return rc;
        if (conn.responder_resources > request->initiator_depth)
                conn.responder_resources = request->initiator_depth;
        if (conn.initiator_depth > request->responder_resources)
                conn.initiator_depth = request->responder_resources;
        /* Only the hello may arrive before prepare() knows what the buffers are; the send
         * op replaces frames by ring buffers, so none may be left in the queue before them. */
        v->rq_target = 1;
        if ((rc = vb_post_frames(v, err)) < 0)
                return rc;
        v->rq_target = 0;
        if (rdma_accept(v->id, &conn) < 0)
                return ds_fail(err, -errno, "rdma_accept %s", v->base.peer);
        v->events = l->events;
        return cm_wait(v->cm_channel, RDMA_CM_EVENT_ESTABLISHED, l->timeout_ms, "rdma_accept",
                       v->base.peer, NULL, err);
}

static int verbs_accept(struct ds_link_listener *listener, struct ds_link **out, int timeout_ms,
                        struct ds_error *err)
{
        struct verbs_listener *l = (struct verbs_listener *)listener;
        struct rdma_cm_event *event;
        int rc = cm_wait(l->channel, RDMA_CM_EVENT_CONNECT_REQUEST,
                         timeout_ms < 0 ? INT32_MAX : timeout_ms, "rdma_listen", "", &event, err);
        if (rc == -EPROTO)
                return -EAGAIN; /* another event on the listening id: nothing to accept */
        if (rc < 0)
                return rc;
        struct rdma_cm_id *id = event->id;
        struct rdma_conn_param request = event->param.conn;
        rdma_ack_cm_event(event);
        struct verbs_link *v = link_new(err);
        if (!v) {
                rdma_reject(id, NULL, 0);
                rdma_destroy_id(id);
                return -ENOMEM;
        }
        v->id = id;
        id->context = v;
        rc = accept_request(l, v, &request, err);
        if (rc < 0) {
                if (rc != -ETIMEDOUT && rc != -ECONNREFUSED && rc != -EPROTO)
                        rdma_reject(id, NULL, 0);
                link_destroy(v);
                /* A peer that vanished in the handshake is not the listener's failure. */
                return rc == -ETIMEDOUT || rc == -EPROTO ? -EAGAIN : rc;
        }
        v->connected = true;
        *out = &v->base;
        return 0;
}

static int connect_steps(struct verbs_link *v, const struct ds_link_config *config,
                         struct ds_error *err)
{
        int timeout = timeout_or_default(config->timeout_ms);
        const char *peer = v->base.peer;
        char port[8];
        snprintf(port, sizeof(port), "%u", config->port);
        struct rdma_addrinfo hints = {.ai_port_space = RDMA_PS_TCP};
        struct rdma_addrinfo *res;
        if (!(v->cm_channel = channel_new(err)))
                return -ENODEV;
        if (rdma_create_id(v->cm_channel, &v->id, v, RDMA_PS_TCP) < 0)
                return ds_fail(err, -errno, "rdma_create_id");
        if (rdma_getaddrinfo(config->host, port, &hints, &res) != 0)
                return ds_fail(err, errno ? -errno : -EINVAL, "rdma_getaddrinfo %s", peer);
        int rc = rdma_resolve_addr(v->id, NULL, res->ai_dst_addr, timeout);
        rdma_freeaddrinfo(res);
        if (rc < 0)
                return ds_fail(err, -errno, "rdma_resolve_addr %s (no RDMA device routes there?)",
                               peer);
        if ((rc = cm_wait(v->cm_channel, RDMA_CM_EVENT_ADDR_RESOLVED, timeout, "rdma_resolve_addr",
                          peer, NULL, err)) < 0)
                return rc;
        if (rdma_resolve_route(v->id, timeout) < 0)
                return ds_fail(err, -errno, "rdma_resolve_route %s", peer);
        if ((rc = cm_wait(v->cm_channel, RDMA_CM_EVENT_ROUTE_RESOLVED, timeout,
                          "rdma_resolve_route", peer, NULL, err)) < 0)
                return rc;
        struct rdma_conn_param conn;
        memset(&conn, 0, sizeof(conn));
        if ((rc = build_queues(v, &conn, err)) < 0)
                return rc;
        v->rq_target = VB_CTL_RECVS;
        if ((rc = vb_post_frames(v, err)) < 0)
                return rc;
        if (rdma_connect(v->id, &conn) < 0)
                return ds_fail(err, -errno, "rdma_connect %s", peer);
        rc = cm_wait(v->cm_channel, RDMA_CM_EVENT_ESTABLISHED, timeout, "rdma_connect", peer, NULL,
                     err);
        if (rc == -ECONNREFUSED)
                return ds_fail(err, rc, "rdma_connect %s (is a verbs listener there?)", peer);
        return rc;
}

static int verbs_connect(struct ds_link **out, const struct ds_link_config *config,
                         struct ds_error *err)
{
        struct verbs_link *v = link_new(err);
        if (!v)
                return -ENOMEM;
        v->sender = true;
        v->events = config->events;
        snprintf(v->base.peer, sizeof(v->base.peer), "%s:%u", config->host, config->port);
        int rc = connect_steps(v, config, err);
        if (rc < 0) {
                link_destroy(v);
                return rc;
        }
        v->connected = true;
        *out = &v->base;
        return 0;
}

static int prepare_sender(struct verbs_link *v, const struct ds_link_params *params,
                          struct ds_link_offer *mine, struct ds_error *err)
{
        struct ds_pool *pool = params->send_pool;
        if (!pool)
                return ds_fail(err, -EINVAL, "verbs: the sender needs a send pool to register");
        v->pool_base = (uintptr_t)ds_pool_base(pool);
        v->pool_bytes = ds_pool_bytes(pool);
        int access = v->op == DS_OP_READ ? IBV_ACCESS_REMOTE_READ : 0;
        if (!(v->pool_mr = ibv_reg_mr(v->pd, ds_pool_base(pool), v->pool_bytes, access)))
                return ds_fail(err, -errno, "ibv_reg_mr (send pool, %zu bytes)", v->pool_bytes);
        mine->len = SENDER_OFFER_LEN;
        mine->blob[0] = OFFER_SENDER;
        mine->blob[1] = v->events ? OFFER_EVENTS : 0;
        vb_put64(mine->blob + 2, v->pool_base);
        vb_put32(mine->blob + 10, v->pool_mr->rkey);
        vb_put64(mine->blob + 14, v->pool_bytes);
        return 0;
}

/* The ring: slots for the credit, one registration, receives posted as the op needs. */
static int prepare_receiver(struct verbs_link *v, const struct ds_link_params *params,
                            struct ds_link_offer *mine, struct ds_error *err)
{
        uint32_t slots = link_rx_buffers(params->msg_size);
        if (params->window && params->window < slots)
                slots = params->window;
        if (slots > VB_SLOTS_MAX)
                slots = VB_SLOTS_MAX;
        v->slots = slots;
        bool send_op = v->op == DS_OP_SEND;
        /* Under the send op control frames land in ring buffers too, so they must fit. */
        size_t size = send_op && params->msg_size < VB_FRAME ? VB_FRAME : params->msg_size;
        v->ring_count = slots + (send_op ? VB_SPARE : 0);
        struct ds_pool *lent = params->recv_pool;
        int rc = 0;
        if (lent && ds_pool_buf_size(lent) >= size && ds_pool_count(lent) >= v->ring_count) {
                v->ring = lent;
                v->ring_lent = true;
        } else {
                rc = ds_pool_create(&v->ring, size, v->ring_count, 0, err);
        }
        if (rc < 0)
                return rc;
        int access = IBV_ACCESS_LOCAL_WRITE | (v->op == DS_OP_WRITE ? IBV_ACCESS_REMOTE_WRITE : 0);
        if (!(v->ring_mr =
                  ibv_reg_mr(v->pd, ds_pool_base(v->ring), ds_pool_bytes(v->ring), access)))
                return ds_fail(err, -errno, "ibv_reg_mr (receive ring, %zu bytes)",
                               ds_pool_bytes(v->ring));
        if (send_op) {
                rc = vb_post_ring(v, err);
        } else {
                v->rq_target = slots + VB_CTL_RECVS;
                rc = vb_post_frames(v, err);
        }
        if (rc < 0)
                return rc;
        mine->window = slots;
        mine->len = RECEIVER_OFFER_LEN;
        mine->blob[0] = OFFER_RECEIVER;
        mine->blob[1] = 0;
        vb_put32(mine->blob + 2, slots);
        vb_put32(mine->blob + 6, (uint32_t)ds_pool_buf_size(v->ring));
        vb_put64(mine->blob + 10, (uintptr_t)ds_pool_base(v->ring));
        vb_put32(mine->blob + 18, v->ring_mr->rkey);
        return 0;
}

static int verbs_prepare(struct ds_link *link, const struct ds_link_params *params,
                         struct ds_link_offer *mine, struct ds_error *err)
{
        struct verbs_link *v = (struct verbs_link *)link;
        if (v->ring || v->pool_mr)
                return ds_fail(err, -EALREADY, "verbs link to %s is prepared already", link->peer);
        if (params->msg_size == 0 || params->msg_size > link->max_msg)
                return ds_fail(err, -EMSGSIZE, "verbs: messages of %u bytes (this link: 1 to %u)",
                               params->msg_size, link->max_msg);
        v->op = params->op == DS_OP_DEFAULT ? DS_OP_WRITE : params->op;
        v->msg_size = params->msg_size;
        pthread_mutex_lock(&v->lock);
        int rc = v->sender ? prepare_sender(v, params, mine, err)
                           : prepare_receiver(v, params, mine, err);
        pthread_mutex_unlock(&v->lock);
        return rc;
}

/* The peer's offer, checked before anything trusts it. Returns 0 or -EPROTO. */
static int take_offer(struct verbs_link *v, const struct ds_link_offer *peer)
{
        const uint8_t *b = peer->blob;
        if (v->sender) {
                uint32_t slots = peer->len == RECEIVER_OFFER_LEN ? vb_get32(b + 2) : 0;
                uint32_t stride = slots ? vb_get32(b + 6) : 0;
                if (b[0] != OFFER_RECEIVER || slots == 0 || slots > VB_SLOTS_MAX ||
                    stride < v->msg_size)
                        return -EPROTO;
                v->slots = slots;
                v->peer_stride = stride;
                v->peer_addr = vb_get64(b + 10);
                v->peer_rkey = vb_get32(b + 18);
                return 0;
        }
        if (peer->len != SENDER_OFFER_LEN || b[0] != OFFER_SENDER ||
            (v->op == DS_OP_READ && vb_get64(b + 14) == 0))
                return -EPROTO;
        v->events |= (b[1] & OFFER_EVENTS) != 0;
        v->peer_addr = vb_get64(b + 2);
        v->peer_rkey = vb_get32(b + 10);
        v->peer_bytes = vb_get64(b + 14);
        return 0;
}

static int verbs_start(struct ds_link *link, const struct ds_link_offer *peer, struct ds_error *err)
{
        struct verbs_link *v = (struct verbs_link *)link;
        pthread_mutex_lock(&v->lock);
        int rc = take_offer(v, peer);
        v->started = rc == 0;
        pthread_mutex_unlock(&v->lock);
        if (rc < 0) {
                link->stats.malformed[DS_WIRE_CTL_BAD]++;
                return ds_fail(err, rc, "%s %s made no usable verbs offer",
                               v->sender ? "sink" : "blast", link->peer);
        }
        return 0;
}

static void verbs_close(struct ds_link *link)
{
        struct verbs_link *v = (struct verbs_link *)link;
        if (v->connected) {
                /* Disconnecting moves the QP to error, which would flush a last FINAL or
                 * credit still in the send queue. */
                vb_drain(v, 1000);
                rdma_disconnect(v->id);
        }
        link_destroy(v);
}

const struct ds_link_ops ds_link_verbs = {
    .name = "verbs",
    .caps = DS_LINK_RELIABLE | DS_LINK_OWN_FLOW | DS_LINK_BOUNDARIES | DS_LINK_REGISTERED |
            DS_LINK_ZERO_COPY_RX | DS_LINK_ASYNC_SEND | DS_LINK_CHOOSES_OP,
    .listen = verbs_listen,
    .accept = verbs_accept,
    .unlisten = verbs_unlisten,
    .connect = verbs_connect,
    .prepare = verbs_prepare,
    .start = verbs_start,
    .send = vb_send,
    .reap = vb_reap,
    .send_ctl = vb_send_ctl,
    .recv = vb_recv,
    .release = vb_release,
    .close = verbs_close,
};
