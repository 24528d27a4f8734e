/* sink: receives, checks and reports, one run after another and several at once. Each
 * link has its own thread; the streams of one blast run are gathered into one report. */
#include <dragstrip/blast.h>

#include <dragstrip/clock.h>
#include <dragstrip/error.h>
#include <dragstrip/live.h>
#include <dragstrip/seqtrack.h>
#include <dragstrip/session.h>
#include <dragstrip/verify.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
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

/* One blast run: its streams' counters summed, reported when the last stream ends. */
struct run {
        uint64_t run_id;
        unsigned streams;
        unsigned finished;
        bool aborted;
        uint64_t first_ns;
        uint64_t last_ns;
        struct ds_live_segment counters; /* private, the run's own */
        struct ds_report report;
        struct run *next;
};

struct sink {
        const struct ds_sink_options *o;
        struct ds_live *live;
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

struct serve {
        struct sink *sink;
        struct ds_link *link;
};

/* The admission rule of --once: the first run and its streams, nobody else. */
static bool admit(const struct ds_wire_hello *hello, void *ctx)
{
        struct sink *k = ctx;
        bool ok = true;
        pthread_mutex_lock(&k->lock);
        if (k->o->once) {
                if (!k->once_taken) {
                        k->once_taken = true;
                        k->once_run = hello->run_id;
                }
                ok = hello->run_id == k->once_run && !k->once_done;
        }
        pthread_mutex_unlock(&k->lock);
        return ok;
}

static struct run *run_join(struct sink *k, const struct ds_wire_hello *hello, const char *link)
{
        pthread_mutex_lock(&k->lock);
        struct run *r = k->runs;
        while (r && r->run_id != hello->run_id)
                r = r->next;
        if (!r && (r = calloc(1, sizeof(*r)))) {
                r->run_id = hello->run_id;
                r->streams = hello->streams;
                struct ds_report_config config = k->o->report;
                config.tool = "sink";
                config.role = "recv";
                config.link = link;
                config.msg_size = hello->msg_size;
                ds_report_init(&r->report, &config, &r->counters);
                ds_report_start(&r->report);
                r->next = k->runs;
                k->runs = r;
        }
        pthread_mutex_unlock(&k->lock);
        return r;
}

struct stream_result {
        uint64_t first_ns, last_ns;
        bool aborted;
        struct ds_live_slot *slot; /* the stream's published counters, or NULL */
};

static void report_extra(struct ds_json *json, void *ctx)
{
        const struct run *r = ctx;
        ds_json_u64(json, "streams", r->streams);
        ds_json_bool(json, "aborted", r->aborted);
}

/* A stream is over: when it was the run's last, print the run and forget it. */
static void run_leave(struct sink *k, struct run *r, const struct stream_result *res)
{
        pthread_mutex_lock(&k->lock);
        if (res->first_ns && (!r->first_ns || res->first_ns < r->first_ns))
                r->first_ns = res->first_ns;
        if (res->last_ns > r->last_ns)
                r->last_ns = res->last_ns;
        r->aborted |= res->aborted;
        bool last = ++r->finished == r->streams;
        if (last) {
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
        ds_report_print(&r->report, &result, report_extra, r);
        free(r);
}

/* Checks and counts one batch, then gives it back. Returns 0 or an error. */
static int take_batch(struct ds_session *s, struct run *r, struct sink *k, struct ds_msg *msgs,
                      int n, struct ds_seqtrack *track, const struct ds_pattern *pattern,
                      struct stream_result *res, struct ds_error *err)
{
        uint64_t data = 0, bytes = 0, corrupt = 0;
        int rc = 0;
        for (int i = 0; i < n && rc == 0; i++) {
                if (msgs[i].kind == DS_MSG_CTL) {
                        rc = ds_session_handle(s, &msgs[i], err);
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

/* Receives until END, a closed link, or a silent blast. */
static int receive(struct ds_session *s, struct run *r, struct sink *k, bool tick,
                   struct stream_result *res, struct ds_seqtrack *track, struct ds_error *err)
{
        struct ds_pattern pattern = {0};
        if ((s->hello.flags & DS_HELLO_VERIFY) &&
            ds_pattern_init(&pattern, s->hello.msg_size, err) < 0)
                return -ENOMEM;
        uint32_t fit = (pattern.ref ? VERIFY_BATCH_BYTES : BATCH_BYTES) / s->hello.msg_size;
        unsigned batch = fit == 0 ? 1 : fit < RECV_BATCH ? fit : RECV_BATCH;
        int silent_ms = 0, rc = 0;
        while (!s->ended) {
                struct ds_msg msgs[RECV_BATCH];
                int n = ds_link_recv(s->link, msgs, batch, POLL_MS, err);
                if (tick)
                        ds_report_tick(&r->report);
                if (n < 0) {
                        rc = n;
                        break;
                }
                if (n == 0) {
                        silent_ms += POLL_MS;
                        if (silent_ms >= k->o->idle_ms) {
                                rc = -ETIMEDOUT;
                                break;
                        }
                        if ((rc = ds_session_idle(s, err)) < 0)
                                break;
                        continue;
                }
                silent_ms = 0;
                if ((rc = take_batch(s, r, k, msgs, n, track, &pattern, res, err)) < 0)
                        break;
        }
        ds_pattern_free(&pattern);
        return rc;
}

static void linger(struct ds_session *s)
{
        struct ds_error err;
        uint64_t until = ds_now_ns() + (uint64_t)LINGER_MS * 1000000u;
        while (ds_now_ns() < until) {
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
static void serve_link(struct sink *k, struct ds_link *link)
{
        struct ds_session s;
        struct ds_error err = {{0}};
        int rc = ds_session_accept(&s, link, admit, k, k->o->idle_ms, &err);
        if (rc < 0) {
                atomic_fetch_add(&k->orphan_malformed, ds_link_malformed(link));
                return;
        }
        struct run *r = run_join(k, &s.hello, link->ops->name);
        if (!r)
                return;
        struct ds_seqtrack track;
        ds_seqtrack_init(&track);
        struct stream_result res = {.slot =
                                        ds_live_slot_open(ds_live_segment(k->live), DS_SLOT_STREAM,
                                                          s.hello.stream, link->peer)};
        rc = receive(&s, r, k, s.hello.stream == 0, &res, &track, &err);
        /* The blast's own count reveals losses at the tail; a blast that vanished sent
         * what we can see, no more. */
        uint64_t lost = ds_seqtrack_lost(&track, s.ended ? s.end.messages : 0);
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
                if (ds_session_finish(&s, &final, &err) == 0 && s.ctl_retry)
                        linger(&s);
        }
        run_leave(k, r, &res);
}

static void *serve_thread(void *arg)
{
        struct serve *sv = arg;
        struct sink *k = sv->sink;
        serve_link(k, sv->link);
        ds_link_close(sv->link);
        free(sv);
        pthread_mutex_lock(&k->lock);
        k->threads--;
        pthread_cond_broadcast(&k->idle_cv);
        pthread_mutex_unlock(&k->lock);
        return NULL;
}

static int spawn(struct sink *k, struct ds_link *link, struct ds_error *err)
{
        struct serve *sv = malloc(sizeof(*sv));
        pthread_attr_t attr;
        pthread_t tid;
        if (!sv) {
                ds_link_close(link);
                return ds_fail(err, -ENOMEM, "sink: serving %s", link->peer);
        }
        *sv = (struct serve){k, link};
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_mutex_lock(&k->lock);
        k->threads++;
        int rc = pthread_create(&tid, &attr, serve_thread, sv);
        if (rc != 0)
                k->threads--;
        pthread_mutex_unlock(&k->lock);
        pthread_attr_destroy(&attr);
        if (rc != 0) {
                ds_link_close(link);
                free(sv);
                return ds_fail(err, -rc, "sink: thread for %s", link->peer);
        }
        return 0;
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

int ds_sink_serve(const struct ds_sink_options *o, const atomic_bool *stop, struct ds_error *err)
{
        struct sink k = {.o = o};
        pthread_mutex_init(&k.lock, NULL);
        pthread_cond_init(&k.idle_cv, NULL);
        struct ds_link_listener *listener = NULL;
        int rc = ds_live_open(&k.live, "sink", "recv", o->link->name, NULL, err);
        if (rc == 0)
                rc = ds_link_listen(o->link, &listener, &o->where, err);
        if (rc == 0)
                ds_live_start(k.live);
        uint64_t seen = 0;
        while (rc == 0 && !(stop && *stop)) {
                struct ds_link *link;
                int a = ds_link_accept(listener, &link, POLL_MS, err);
                uint64_t fresh = listener_rejects(listener, &seen);
                atomic_fetch_add(&k.orphan_malformed, fresh);
                ds_live_fault(ds_live_segment(k.live), DS_FAULT_MALFORMED, fresh);
                if (a == 0)
                        rc = spawn(&k, link, err);
                else if (a != -ETIMEDOUT && a != -EINTR && a != -EAGAIN)
                        rc = a;
                pthread_mutex_lock(&k.lock);
                bool done = o->once && k.once_done && k.threads == 0;
                pthread_mutex_unlock(&k.lock);
                if (done)
                        break;
        }
        /* Links end by themselves (END, a closed peer, or idle_ms of silence). */
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
        if (rc == 0 && k.once_aborted)
                return ds_fail(err, -ECONNABORTED, "the run was cut short (see its report)");
        return rc;
}
