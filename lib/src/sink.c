/* sink: receives, checks and reports, one run after another and several at once. Each
 * link has its own thread; the streams of one blast run are gathered into one report. */
#include <dragstrip/blast.h>

#include <dragstrip/clock.h>
#include <dragstrip/error.h>
#include <dragstrip/live.h>
#include <dragstrip/seqtrack.h>
#include <dragstrip/serve.h>
#include <dragstrip/session.h>
#include <dragstrip/stop.h>
#include <dragstrip/verify.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RECV_BATCH 32
/* A batch is received, checked and given back before the next. Kept to about a core's L2,
 * the same few buffers take every copy while they are in cache (tcp 1 MiB: +9%); with
 * --verify, to half of it, so the check reads what the copy just wrote from L2 instead of
 * going to L3 or memory for it. */
#define BATCH_BYTES        (1u << 20)
#define VERIFY_BATCH_BYTES (512u << 10)
#define POLL_MS            20  /* also how soon a lost grant or tail is made good */
#define LINGER_MS          300 /* stay to answer a repeated END whose FINAL was lost */

/* A hello must arrive within this of the connection (or first datagram): a peer that
 * says nothing, or trickles, holds a thread and a descriptor no longer. */
#define HANDSHAKE_MS 3000
/* Over a link that may lose messages without credits, the farthest a message number may
 * jump ahead of the highest seen; beyond it the number is a lie, not a loss. */
#define SEQ_JUMP_MAX (1u << 24)

_Static_assert(DS_WIRE_FAULTS == DS_FAULT_COUNT, "FINAL carries one count per enum ds_fault");

/* One blast run: its streams' counters summed, reported when the last link in it leaves.
 * Owned by its links: each one admitted holds a reference, so none outlives it. */
struct run {
        uint64_t run_id;
        unsigned streams;  /* as the hellos declare */
        uint32_t msg_size; /* every stream of a run has the same options */
        uint32_t flags;
        unsigned refs;     /* links in the run now */
        unsigned finished; /* streams that ended with END */
        uint8_t *taken;    /* a bit per stream that has a link */
        bool aborted;
        uint64_t first_ns;
        uint64_t last_ns;
        struct ds_live_segment counters; /* private, the run's own */
        struct ds_report report;
        const struct ds_sink_options *o;
        struct run *next;
};

struct sink {
        const struct ds_sink_options *o;
        const atomic_bool *stop;
        FILE *log;
        struct ds_live *live;
        struct ds_budget budget;
        pthread_mutex_t lock;
        pthread_cond_t idle_cv;
        struct run *runs;
        unsigned threads; /* link threads still running */
        bool once_taken;
        uint64_t once_run;
        bool once_done;
        bool once_aborted;
        /* frames rejected outside any run (listener, links that never said hello):
         * charged to the next run reported */
        _Atomic uint64_t orphan_malformed;
};

/* One link and what it holds: its run and its share of the memory budget. */
struct peer {
        struct sink *sink;
        struct ds_link *link;
        struct run *run;
        uint64_t budget;
};

static bool stopped(const struct sink *k)
{
        return (k->stop && *k->stop) || ds_stopping();
}

/* A run's options: the sink's own, and what its blast asked for beyond msg_size. */
static void run_params(struct ds_json *json, void *ctx)
{
        const struct run *r = ctx;
        ds_json_u64(json, "port", r->o->where.port);
        ds_json_bool(json, "once", r->o->once);
        ds_json_double(json, "idle_s", r->o->idle_ms / 1e3);
        ds_json_u64(json, "max_peers", r->o->max_peers);
        ds_json_bool(json, "verify", (r->flags & DS_HELLO_VERIFY) != 0);
}

/* Under the lock: adds the link to the run its hello names, creating the run for its
 * first stream. Returns DS_ACK_OK, or why not. */
static uint32_t run_join(struct sink *k, struct peer *p, const struct ds_wire_hello *h)
{
        struct run *r = k->runs;
        while (r && r->run_id != h->run_id)
                r = r->next;
        if (r && (r->streams != h->streams || r->msg_size != h->msg_size || r->flags != h->flags))
                return DS_ACK_CONFLICT;
        if (!r) {
                r = calloc(1, sizeof(*r));
                uint8_t *taken = calloc((h->streams + 7u) / 8u, 1);
                if (!r || !taken) {
                        free(r);
                        free(taken);
                        return DS_ACK_FAILED;
                }
                *r = (struct run){.run_id = h->run_id,
                                  .streams = h->streams,
                                  .msg_size = h->msg_size,
                                  .flags = h->flags,
                                  .taken = taken,
                                  .o = k->o,
                                  .next = k->runs};
                struct ds_report_config config = k->o->report;
                config.tool = "sink";
                config.role = "recv";
                config.link = p->link->ops->name;
                config.msg_size = h->msg_size;
                config.params = run_params;
                config.params_ctx = r;
                ds_report_init(&r->report, &config, &r->counters);
                ds_report_start(&r->report);
                k->runs = r;
        }
        uint8_t bit = (uint8_t)(1u << (h->stream % 8u));
        if (r->taken[h->stream / 8u] & bit)
                return DS_ACK_CONFLICT; /* a second link claims a stream already served */
        r->taken[h->stream / 8u] |= bit;
        r->refs++;
        p->run = r;
        return DS_ACK_OK;
}

/* The admission rule: --max-msg, the memory budget, --once (the first run and its
 * streams, nobody else) and one link per stream of a run. */
static uint32_t admit(struct ds_session *s, void *ctx)
{
        struct peer *p = ctx;
        struct sink *k = p->sink;
        const struct ds_wire_hello *h = &s->hello;
        if (k->o->max_msg && k->o->max_msg < s->ack.max_msg)
                s->ack.max_msg = k->o->max_msg;
        if (h->msg_size > s->ack.max_msg)
                return DS_ACK_TOO_BIG;
        /* What the link allocates once it is prepared, and the --verify reference. */
        uint64_t need = ds_link_rx_bytes(s->link, h->msg_size) +
                        ((h->flags & DS_HELLO_VERIFY) ? (uint64_t)h->msg_size : 0);
        if (!ds_budget_take(&k->budget, need))
                return DS_ACK_NO_MEMORY;
        p->budget = need;
        uint32_t status = DS_ACK_OK;
        pthread_mutex_lock(&k->lock);
        if (k->o->once) {
                if (!k->once_taken) {
                        k->once_taken = true;
                        k->once_run = h->run_id;
                }
                if (h->run_id != k->once_run || k->once_done)
                        status = DS_ACK_BUSY;
        }
        if (status == DS_ACK_OK)
                status = run_join(k, p, h);
        pthread_mutex_unlock(&k->lock);
        if (status != DS_ACK_OK) {
                ds_budget_give(&k->budget, p->budget);
                p->budget = 0;
        }
        return status;
}

struct stream_result {
        uint64_t first_ns, last_ns;
        bool aborted;
        bool ended;                /* END arrived and was answered */
        struct ds_live_slot *slot; /* the stream's published counters, or NULL */
};

static void report_extra(struct ds_json *json, void *ctx)
{
        const struct run *r = ctx;
        ds_json_u64(json, "streams", r->streams);
        ds_json_u64(json, "streams_ended", r->finished);
        ds_json_bool(json, "aborted", r->aborted);
}

/* A link leaves its run: when it was the last, print the run and forget it. A run some
 * of whose streams never came, or never ended, is reported aborted. */
static void run_leave(struct sink *k, struct run *r, const struct stream_result *res)
{
        pthread_mutex_lock(&k->lock);
        if (res->first_ns && (!r->first_ns || res->first_ns < r->first_ns))
                r->first_ns = res->first_ns;
        if (res->last_ns > r->last_ns)
                r->last_ns = res->last_ns;
        r->aborted |= res->aborted;
        r->finished += res->ended;
        bool last = --r->refs == 0;
        if (last) {
                r->aborted |= r->finished < r->streams;
                struct run **p = &k->runs;
                while (*p != r)
                        p = &(*p)->next;
                *p = r->next;
                if (k->o->once && r->run_id == k->once_run) {
                        k->once_done = true;
                        k->once_aborted = r->aborted;
                }
        }
        pthread_mutex_unlock(&k->lock);
        if (!last)
                return;
        ds_live_fault(&r->counters, DS_FAULT_MALFORMED, atomic_exchange(&k->orphan_malformed, 0));
        struct ds_result result;
        if (r->first_ns)
                r->report.start_ns = r->first_ns;
        ds_report_finish_at(&r->report, r->first_ns ? r->last_ns : r->report.start_ns, &result);
        result.interrupted = stopped(k);
        ds_report_print(&r->report, &result, report_extra, r);
        free(r->taken);
        free(r);
}

/* The number (exclusive) no message of this stream can have reached yet, n messages
 * into a batch: what was credited, what the hello declared, and on a link that neither
 * loses nor reorders, the next in order. */
static uint64_t seq_bound(const struct ds_session *s, const struct ds_seqtrack *t, unsigned n)
{
        uint64_t next = t->any ? t->highest + 1 : 0;
        uint64_t bound = (s->link->caps & DS_LINK_RELIABLE) ? next + n
                         : s->credits                       ? s->granted
                                                            : next + SEQ_JUMP_MAX;
        if (s->hello.count && s->hello.count < bound)
                bound = s->hello.count;
        return bound;
}

/* END's count of messages when it holds: no fewer than were seen, within seq_bound, and
 * its bytes those messages' worth. Otherwise the claim is counted and 0 returned (what
 * was seen stands). */
static uint64_t end_claim(struct ds_session *s, const struct ds_seqtrack *t)
{
        const struct ds_wire_end *e = &s->end;
        uint64_t seen = t->any ? t->highest + 1 : 0;
        uint64_t size = s->hello.msg_size;
        if (e->messages >= seen && e->messages <= seq_bound(s, t, 0) &&
            e->messages <= UINT64_MAX / size && e->bytes == e->messages * size)
                return e->messages;
        s->link->stats.malformed[DS_WIRE_CLAIM_BAD]++;
        return 0;
}

/* Checks and counts one batch, then gives it back. Returns 0 or an error. */
static int take_batch(struct ds_session *s, struct run *r, struct sink *k, struct ds_msg *msgs,
                      int n, struct ds_seqtrack *track, const struct ds_pattern *pattern,
                      struct stream_result *res, struct ds_error *err)
{
        uint64_t data = 0, bytes = 0, corrupt = 0, lies = 0;
        uint64_t bound = seq_bound(s, track, (unsigned)n);
        int rc = 0;
        for (int i = 0; i < n && rc == 0; i++) {
                if (msgs[i].kind == DS_MSG_CTL) {
                        rc = ds_session_handle(s, &msgs[i], err);
                        continue;
                }
                if (msgs[i].seq >= bound) { /* never sent, whatever it says */
                        lies++;
                        continue;
                }
                data++;
                bytes += msgs[i].len;
                ds_seqtrack_add(track, msgs[i].seq);
                if (pattern->ref &&
                    !ds_pattern_check(pattern, msgs[i].buf, msgs[i].len, msgs[i].seq))
                        corrupt++;
        }
        ds_link_release(s->link, msgs, (unsigned)n);
        s->link->stats.malformed[DS_WIRE_CLAIM_BAD] += lies;
        if (data) {
                uint64_t now = ds_now_ns();
                if (!res->first_ns)
                        res->first_ns = now;
                res->last_ns = now;
                ds_live_add(&r->counters, data, bytes);
                ds_live_stream_add(ds_live_segment(k->live), res->slot, data, bytes);
                if (corrupt) {
                        ds_live_fault(&r->counters, DS_FAULT_CORRUPT, corrupt);
                        ds_live_fault(ds_live_segment(k->live), DS_FAULT_CORRUPT, corrupt);
                        ds_live_slot_fault(res->slot, DS_FAULT_CORRUPT, corrupt);
                }
        }
        /* Credit follows the highest number seen, not the count received: a message lost
         * on the way no longer occupies the receiver, and must not hold its credit. */
        uint64_t accounted = track->any ? track->highest + 1 : 0;
        if (rc == 0 && accounted > s->released)
                rc = ds_session_released(s, accounted - s->released, err);
        return rc;
}

/* Receives until END, a closed link, a stop, or a blast silent for idle_ms. Only data
 * counts as life: control frames alone, or a record trickled a byte at a time, do not
 * keep a link. A run bounded by time must end near its declared duration. */
static int receive(struct ds_session *s, struct run *r, struct sink *k, bool tick,
                   struct stream_result *res, struct ds_seqtrack *track, struct ds_error *err)
{
        struct ds_pattern pattern = {0};
        if ((s->hello.flags & DS_HELLO_VERIFY) &&
            ds_pattern_init(&pattern, s->hello.msg_size, err) < 0)
                return -ENOMEM;
        uint32_t fit = (pattern.ref ? VERIFY_BATCH_BYTES : BATCH_BYTES) / s->hello.msg_size;
        unsigned batch = fit == 0 ? 1 : fit < RECV_BATCH ? fit : RECV_BATCH;
        uint64_t heard = ds_now_ns(), idle_ns = (uint64_t)k->o->idle_ms * 1000000u;
        uint64_t d = s->hello.duration_ms;
        uint64_t must_end =
            d ? heard + (d + d / 8 + (uint64_t)k->o->idle_ms + 10000) * 1000000u : UINT64_MAX;
        int rc = 0;
        while (!s->ended) {
                if (stopped(k)) {
                        rc = ds_fail(err, -ECANCELED, "stopped");
                        break;
                }
                struct ds_msg msgs[RECV_BATCH];
                int n = ds_link_recv(s->link, msgs, batch, POLL_MS, err);
                if (tick)
                        ds_report_tick(&r->report);
                if (n < 0) {
                        rc = n;
                        break;
                }
                uint64_t before = res->last_ns;
                if (n > 0 && (rc = take_batch(s, r, k, msgs, n, track, &pattern, res, err)) < 0)
                        break;
                if (res->last_ns != before) {
                        heard = res->last_ns;
                        if (heard > must_end) {
                                rc = ds_fail(err, -ETIMEDOUT, "%s ran past its duration",
                                             s->link->peer);
                                break;
                        }
                        continue;
                }
                if (ds_now_ns() - heard >= idle_ns) {
                        ds_fail(err, 0, "no data for %.1f s (--idle)", k->o->idle_ms / 1e3);
                        rc = -ETIMEDOUT;
                        break;
                }
                if (n == 0 && (rc = ds_session_idle(s, err)) < 0)
                        break;
        }
        ds_pattern_free(&pattern);
        return rc;
}

static void linger(struct sink *k, struct ds_session *s)
{
        struct ds_error err;
        uint64_t until = ds_now_ns() + (uint64_t)LINGER_MS * 1000000u;
        while (ds_now_ns() < until && !stopped(k)) {
                struct ds_msg msgs[RECV_BATCH];
                int n = ds_link_recv(s->link, msgs, RECV_BATCH, POLL_MS, &err);
                if (n < 0)
                        return;
                for (int i = 0; i < n; i++)
                        if (msgs[i].kind == DS_MSG_CTL)
                                ds_session_handle(s, &msgs[i], &err);
                ds_link_release(s->link, msgs, (unsigned)n);
        }
}

/* A stream's faults, known once it ends, in the published totals and its slot. */
static void publish_faults(struct ds_live_segment *seg, struct ds_live_slot *slot, uint64_t lost,
                           const struct ds_seqtrack *track, uint64_t malformed)
{
        const uint64_t n[] = {[DS_FAULT_LOST] = lost,
                              [DS_FAULT_DUP] = track->dup,
                              [DS_FAULT_REORDERED] = track->reordered,
                              [DS_FAULT_MALFORMED] = malformed};
        for (int f = 0; f < (int)(sizeof(n) / sizeof(n[0])); f++) {
                ds_live_fault(seg, (enum ds_fault)f, n[f]);
                ds_live_slot_fault(slot, (enum ds_fault)f, n[f]);
        }
}

/* One link, one stream of a run: hello, receive, final counts. */
static void serve_link(struct peer *p)
{
        struct sink *k = p->sink;
        struct ds_link *link = p->link;
        struct ds_session s;
        struct ds_error err = {{0}};
        struct stream_result res = {0};
        int rc = ds_session_accept(&s, link, admit, p, HANDSHAKE_MS, &err);
        if (rc < 0) {
                atomic_fetch_add(&k->orphan_malformed, ds_link_malformed(link));
                if (p->run) { /* admitted, then its buffers failed */
                        res.aborted = true;
                        run_leave(k, p->run, &res);
                }
                return;
        }
        struct run *r = p->run;
        struct ds_seqtrack track;
        ds_seqtrack_init(&track);
        res.slot =
            ds_live_slot_open(ds_live_segment(k->live), DS_SLOT_STREAM, s.hello.stream, link->peer);
        rc = receive(&s, r, k, s.hello.stream == 0, &res, &track, &err);
        /* The blast sees only a closed link: the reason is said here. */
        if (rc < 0 && rc != -ECANCELED)
                fprintf(k->log, "sink: %s: stream %u cut: %s\n", link->peer, s.hello.stream,
                        err.text[0] ? err.text : strerror(-rc));
        /* The blast's own count reveals losses at the tail, when it holds; a blast that
         * vanished sent what we can see, no more. */
        uint64_t lost = ds_seqtrack_lost(&track, s.ended ? end_claim(&s, &track) : 0);
        struct ds_live_segment *c = &r->counters;
        ds_live_fault(c, DS_FAULT_LOST, lost);
        ds_live_fault(c, DS_FAULT_DUP, track.dup);
        ds_live_fault(c, DS_FAULT_REORDERED, track.reordered);
        ds_live_fault(c, DS_FAULT_MALFORMED, ds_link_malformed(link));
        publish_faults(ds_live_segment(k->live), res.slot, lost, &track, ds_link_malformed(link));
        ds_live_slot_close(res.slot);
        res.aborted = rc < 0;
        if (rc == 0) {
                struct ds_wire_final final = {.messages = track.unique + track.dup,
                                              .recv_ns = res.last_ns - res.first_ns};
                final.bytes = final.messages * s.hello.msg_size;
                uint64_t faults[DS_WIRE_FAULTS] = {lost, track.dup, track.reordered,
                                                   atomic_load(&c->faults[DS_FAULT_CORRUPT]),
                                                   ds_link_malformed(link)};
                memcpy(final.faults, faults, sizeof(faults));
                /* The process's CPU over the run so far, as the run's own report counts it:
                 * runs at once share it. */
                struct ds_cpu now;
                ds_cpu_now(&now);
                struct ds_cpu used = ds_cpu_since(&r->report.start_cpu, &now);
                final.cpu_user_us = (uint64_t)(used.user_s * 1e6);
                final.cpu_sys_us = (uint64_t)(used.sys_s * 1e6);
                res.ended = true;
                if (ds_session_finish(&s, &final, &err) == 0 && s.ctl_retry)
                        linger(k, &s);
        }
        run_leave(k, r, &res);
}

static void *serve_thread(void *arg)
{
        struct peer *p = arg;
        struct sink *k = p->sink;
        serve_link(p);
        ds_link_close(p->link); /* frees what the budget counted */
        ds_budget_give(&k->budget, p->budget);
        free(p);
        pthread_mutex_lock(&k->lock);
        k->threads--;
        pthread_cond_broadcast(&k->idle_cv);
        pthread_mutex_unlock(&k->lock);
        return NULL;
}

/* A thread for the new link, within --max-peers. Returns 0, -EBUSY when full, or why the
 * thread could not start (the link is closed on every failure). */
static int spawn(struct sink *k, struct ds_link *link)
{
        struct peer *p = calloc(1, sizeof(*p));
        if (!p) {
                ds_link_close(link);
                return -ENOMEM;
        }
        *p = (struct peer){.sink = k, .link = link};
        pthread_mutex_lock(&k->lock);
        int rc = k->threads < k->o->max_peers ? 0 : -EBUSY;
        if (rc == 0 && (rc = ds_spawn_detached(serve_thread, p)) == 0)
                k->threads++;
        pthread_mutex_unlock(&k->lock);
        if (rc != 0) {
                ds_link_close(link);
                free(p);
        }
        return rc;
}

static uint64_t listener_rejects(const struct ds_link_listener *l, uint64_t *seen)
{
        uint64_t sum = 0;
        for (unsigned i = 0; i < DS_WIRE_REJECT_COUNT; i++)
                sum += l->malformed[i];
        uint64_t fresh = sum - *seen;
        *seen = sum;
        return fresh;
}

/* Accepts one peer and starts its thread, surviving shortages and a full house. Returns
 * 0, or a negative errno when the listener is broken. */
static int accept_one(struct sink *k, struct ds_link_listener *listener,
                      struct ds_accept_guard *guard, bool *full, struct ds_error *err)
{
        struct ds_link *link;
        int rc = ds_link_accept(listener, &link, POLL_MS, err);
        if (rc == 0 && (rc = spawn(k, link)) == -EBUSY) {
                if (!*full)
                        fprintf(k->log,
                                "sink: %u peers, as many as it serves at once; "
                                "refusing more until some leave\n",
                                k->o->max_peers);
                *full = true;
                return 0;
        }
        if (rc == 0) {
                *full = false;
                ds_accept_ok(guard);
                return 0;
        }
        return ds_accept_survive(guard, rc, "sink", k->log) ? 0 : rc;
}

int ds_sink_serve(const struct ds_sink_options *o, const atomic_bool *stop, struct ds_error *err)
{
        struct sink k = {.o = o, .stop = stop, .log = o->log ? o->log : stderr};
        ds_budget_init(&k.budget, o->max_mem ? o->max_mem : ds_budget_default());
        pthread_mutex_init(&k.lock, NULL);
        pthread_cond_init(&k.idle_cv, NULL);
        struct ds_link_listener *listener = NULL;
        int rc = ds_live_open(&k.live, "sink", "recv", o->link->name, NULL, err);
        if (rc == 0)
                rc = ds_link_listen(o->link, &listener, &o->where, err);
        if (rc == 0 && o->on_listening)
                o->on_listening(o);
        if (rc == 0)
                ds_live_start(k.live);
        uint64_t seen = 0;
        struct ds_accept_guard guard = {0};
        bool full = false;
        while (rc == 0 && !stopped(&k)) {
                rc = accept_one(&k, listener, &guard, &full, err);
                uint64_t fresh = listener_rejects(listener, &seen);
                atomic_fetch_add(&k.orphan_malformed, fresh);
                ds_live_fault(ds_live_segment(k.live), DS_FAULT_MALFORMED, fresh);
                pthread_mutex_lock(&k.lock);
                bool done = o->once && k.once_done && k.threads == 0;
                pthread_mutex_unlock(&k.lock);
                if (done)
                        break;
        }
        /* Links end by themselves (END, a closed peer, idle_ms of silence, a stop). */
        pthread_mutex_lock(&k.lock);
        while (k.threads > 0)
                pthread_cond_wait(&k.idle_cv, &k.lock);
        pthread_mutex_unlock(&k.lock);
        ds_link_unlisten(listener);
        if (k.live) {
                ds_live_done(k.live);
                ds_live_close(k.live);
        }
        pthread_mutex_destroy(&k.lock);
        pthread_cond_destroy(&k.idle_cv);
        if (rc == 0 && stopped(&k))
                return ds_fail(err, -ECANCELED, "stopped");
        if (rc == 0 && k.once_aborted)
                return ds_fail(err, -ECONNABORTED, "the run was cut short (see its report)");
        return rc;
}
