/* One timed transfer over a dragstrip link, for linkmatrix (pairtest.h). */
#include "pairtest.h"

#include <dragstrip/clock.h>
#include <dragstrip/error.h>
#include <dragstrip/pool.h>
#include <dragstrip/seqtrack.h>
#include <dragstrip/session.h>

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#define BATCH       16         /* messages per send() or recv() call */
#define BATCH_BYTES (1u << 20) /* a batch stays about a core's L2, as in blast and sink */
#define POLL_MS     20
#define LINGER_MS   300 /* answer a repeated END whose FINAL was lost (udp, raw) */

static bool stopped(const struct pair_options *o)
{
        return o->stop && atomic_load(o->stop);
}

static unsigned batch_for(uint32_t msg_size)
{
        unsigned fit = BATCH_BYTES / msg_size;
        return fit == 0 ? 1 : fit < BATCH ? fit : BATCH;
}

static void fill_result(struct pair_result *result, uint64_t bytes, uint64_t lost, uint64_t ns)
{
        result->bytes = bytes;
        result->lost = lost;
        result->seconds = (double)ns / 1e9;
        result->MB_per_s = ns ? (double)bytes * 1e3 / (double)ns : 0; /* 10^6 B per 10^9 ns */
}

/* Sends batches until the time is up. Buffers go back to the free stack at once on a
 * link that copies during send(), or as reap() returns them on an asynchronous one. */
static int send_for(const struct pair_options *o, struct ds_link *link, struct ds_session *s,
                    struct ds_pool *pool, uint64_t *sent, struct ds_error *err)
{
        unsigned count = ds_pool_count(pool), batch = batch_for(o->msg_size), nfree = count;
        void *free_bufs[2 * BATCH];
        for (unsigned i = 0; i < count; i++)
                free_bufs[i] = ds_pool_buf(pool, i);
        uint64_t deadline = ds_now_ns() + (uint64_t)(o->seconds * 1e9);
        while (ds_now_ns() < deadline && !stopped(o)) {
                int64_t avail = ds_session_credit(s, *sent, true, err);
                if (avail < 0)
                        return (int)avail;
                unsigned b = avail < batch ? (unsigned)avail : batch;
                if (b > nfree)
                        b = nfree;
                struct ds_msg msgs[BATCH];
                for (unsigned i = 0; i < b; i++)
                        msgs[i] = (struct ds_msg){
                            .buf = free_bufs[--nfree], .len = o->msg_size, .seq = *sent + i};
                for (unsigned done = 0; done < b;) {
                        int n = ds_link_send(link, msgs + done, b - done, err);
                        if (n < 0)
                                return n;
                        done += (unsigned)n;
                }
                *sent += b;
                if (link->caps & DS_LINK_ASYNC_SEND) {
                        int n =
                            ds_link_reap(link, free_bufs + nfree, count - nfree, b ? 0 : 100, err);
                        if (n < 0)
                                return n;
                        nfree += (unsigned)n;
                } else {
                        for (unsigned i = 0; i < b; i++)
                                free_bufs[nfree++] = msgs[i].buf;
                }
        }
        return 0;
}

int pair_send(const struct pair_options *o, const struct ds_link_config *where, uint64_t tag,
              struct pair_result *result, struct ds_error *err)
{
        struct ds_link *link;
        int rc = ds_link_connect(o->link, &link, where, err);
        if (rc < 0)
                return rc;
        struct ds_pool *pool = NULL;
        if (o->msg_size > link->max_msg)
                rc = ds_fail(err, -EMSGSIZE, "-l %u: the %s link carries at most %u bytes",
                             o->msg_size, o->link->name, link->max_msg);
        if (rc == 0)
                rc = ds_pool_create(&pool, o->msg_size, 2 * batch_for(o->msg_size), 0, err);
        struct ds_session s;
        struct ds_wire_hello hello = {
            .msg_size = o->msg_size,
            .duration_ms = (uint32_t)ds_duration_ms(o->seconds),
            .flow = DS_FLOW_CREDIT,
            .op = DS_OP_DEFAULT,
            .streams = 1,
            .run_id = tag,
        };
        if (rc == 0)
                rc = ds_session_open(&s, link, &hello, pool, o->timeout_ms, err);
        uint64_t sent = 0;
        if (rc == 0)
                rc = send_for(o, link, &s, pool, &sent, err);
        struct ds_wire_final final;
        if (rc == 0)
                rc = ds_session_close(&s, sent, sent * o->msg_size, &final, err);
        if (rc == 0)
                fill_result(result, final.bytes, final.faults[0], final.recv_ns);
        ds_link_close(link);
        if (pool)
                ds_pool_destroy(pool);
        return rc;
}

struct wanted {
        const uint64_t *tags;
        bool *taken;
        unsigned ntags;
        int matched;
};

static uint32_t admit_tag(struct ds_session *session, void *ctx)
{
        const struct ds_wire_hello *hello = &session->hello;
        struct wanted *want = ctx;
        for (unsigned i = 0; i < want->ntags; i++) {
                if (hello->run_id == want->tags[i] && !want->taken[i] && hello->streams == 1) {
                        want->matched = (int)i;
                        return DS_ACK_OK;
                }
        }
        return DS_ACK_CONFLICT; /* a sender of another round or pair */
}

int pair_accept(const struct pair_options *o, struct ds_link_listener *listener,
                const uint64_t *tags, bool *taken, unsigned ntags, struct pair_link *out,
                struct ds_error *err)
{
        uint64_t deadline = ds_now_ns() + (uint64_t)o->timeout_ms * 1000000u;
        struct wanted want = {tags, taken, ntags, -1};
        int rc = -ETIMEDOUT;
        while (!stopped(o)) {
                uint64_t now = ds_now_ns();
                if (now >= deadline)
                        return ds_fail(err, rc, "no sender arrived");
                int left_ms = (int)((deadline - now) / 1000000u) + 1;
                rc = ds_link_accept(listener, &out->link, left_ms < 100 ? left_ms : 100, err);
                if (rc == -ETIMEDOUT || rc == -EINTR || rc == -EAGAIN)
                        continue;
                if (rc < 0)
                        return rc;
                rc = ds_session_accept(&out->session, out->link, admit_tag, &want, left_ms, err);
                if (rc == 0) {
                        taken[want.matched] = true;
                        return want.matched;
                }
                ds_link_close(out->link); /* a late sender of an earlier round, or a stranger */
        }
        return ds_fail(err, -ECANCELED, "stopped");
}

static int receive_until_end(const struct pair_options *o, struct ds_link *link,
                             struct ds_session *s, struct ds_seqtrack *track, uint64_t span[2],
                             struct ds_error *err)
{
        unsigned batch = batch_for(s->hello.msg_size);
        int silent_ms = 0;
        while (!s->ended) {
                if (stopped(o))
                        return ds_fail(err, -ECANCELED, "stopped");
                struct ds_msg msgs[BATCH];
                int n = ds_link_recv(link, msgs, batch, POLL_MS, err);
                if (n < 0)
                        return n;
                if (n == 0) {
                        silent_ms += POLL_MS;
                        if (silent_ms >= o->timeout_ms)
                                return ds_fail(err, -ETIMEDOUT, "the sender went silent");
                        int rc = ds_session_idle(s, err);
                        if (rc < 0)
                                return rc;
                        continue;
                }
                silent_ms = 0;
                int rc = 0;
                bool data = false;
                for (int i = 0; i < n && rc == 0; i++) {
                        if (msgs[i].kind == DS_MSG_CTL) {
                                rc = ds_session_handle(s, &msgs[i], err);
                        } else {
                                ds_seqtrack_add(track, msgs[i].seq);
                                data = true;
                        }
                }
                ds_link_release(link, msgs, (unsigned)n);
                if (data) {
                        span[1] = ds_now_ns();
                        if (!span[0])
                                span[0] = span[1];
                }
                uint64_t accounted = track->any ? track->highest + 1 : 0;
                if (rc == 0 && accounted > s->released)
                        rc = ds_session_released(s, accounted - s->released, err);
                if (rc < 0)
                        return rc;
        }
        return 0;
}

int pair_receive(const struct pair_options *o, struct pair_link *pl, struct pair_result *result,
                 struct ds_error *err)
{
        struct ds_link *link = pl->link;
        struct ds_session *s = &pl->session;
        struct ds_seqtrack *track = malloc(sizeof(*track)); /* 8 KiB of bitmap */
        if (!track) {
                ds_link_close(link);
                return ds_fail(err, -ENOMEM, "receive accounting");
        }
        ds_seqtrack_init(track);
        uint64_t span[2] = {0, 0};
        int rc = receive_until_end(o, link, s, track, span, err);
        if (rc == 0) {
                uint64_t lost = ds_seqtrack_lost(track, s->end.messages);
                struct ds_wire_final final = {.messages = track->unique + track->dup,
                                              .recv_ns = span[1] - span[0],
                                              .cpu_user_us = DS_WIRE_CPU_UNSAID,
                                              .cpu_sys_us = DS_WIRE_CPU_UNSAID};
                final.bytes = final.messages * s->hello.msg_size;
                final.faults[0] = lost;
                rc = ds_session_finish(s, &final, err);
                fill_result(result, final.bytes, lost, final.recv_ns);
                uint64_t until = ds_now_ns() + (uint64_t)LINGER_MS * 1000000u;
                while (rc == 0 && s->ctl_retry && ds_now_ns() < until) {
                        struct ds_msg msgs[BATCH];
                        int n = ds_link_recv(link, msgs, BATCH, POLL_MS, err);
                        if (n < 0)
                                break;
                        for (int i = 0; i < n; i++)
                                if (msgs[i].kind == DS_MSG_CTL)
                                        ds_session_handle(s, &msgs[i], err);
                        ds_link_release(link, msgs, (unsigned)n);
                }
        }
        free(track);
        ds_link_close(link);
        return rc;
}
