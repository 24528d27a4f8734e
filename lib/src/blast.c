/* blast: fixed-length messages as fast as the link allows, over one or more streams, each
 * with one worker, or with -2 two interleaved ones (the original blast forked two writers so
 * that one was always in write() while the other got ready). */
#include <dragstrip/blast.h>

#include <dragstrip/clock.h>
#include <dragstrip/error.h>
#include <dragstrip/live.h>
#include <dragstrip/pace.h>
#include <dragstrip/pool.h>
#include <dragstrip/session.h>
#include <dragstrip/verify.h>

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BATCH       16         /* messages per send() call */
#define BATCH_BYTES (1u << 20) /* at most, on links that copy at once (below) */
#define MAX_WORKERS 2

struct stream {
        const struct ds_blast_options *o;
        unsigned index;
        struct ds_link *link;
        struct ds_pool *pool;
        struct ds_session session;
        struct ds_live_segment *seg;
        struct ds_live_slot *slot; /* this stream's own counters, or NULL */
        const atomic_bool *stop;
        unsigned batch;       /* messages per send() call */
        uint64_t quota;       /* messages (count mode) */
        uint64_t deadline_ns; /* duration mode */
        struct ds_pace *pace; /* -R: one schedule for every stream; NULL: flat out */

        pthread_mutex_t credit_lock; /* one worker at a time reserves, waiting for credit */
        pthread_mutex_t lock;        /* the counts, the free stack and the turn */
        pthread_cond_t turn_cv;
        uint64_t reserved; /* messages handed to workers */
        uint64_t sent;
        uint64_t next_ticket;
        uint64_t turn; /* the ticket whose holder may send */
        void **free_bufs;
        unsigned free_count;
        bool failed;
        int rc;
        struct ds_error err;
        uint64_t end_ns;
        struct ds_wire_final final;
};

static void stream_fail(struct stream *st, int rc, const struct ds_error *err)
{
        if (!st->failed) {
                st->failed = true;
                st->rc = rc;
                st->err = *err;
        }
}

static bool should_stop(const struct stream *st)
{
        if (st->failed || (st->stop && *st->stop))
                return true;
        if (st->quota)
                return st->reserved >= st->quota;
        return ds_now_ns() >= st->deadline_ns;
}

/* Reserves the next batch: fills msgs with free buffers and their numbers, takes a turn
 * ticket, and returns how many (0: none free, only reap), or a negative errno when the
 * stream is over (-ECANCELED) or failed. Credit is waited for under credit_lock alone,
 * so that the other worker can hand its buffers back meanwhile. */
static int64_t reserve(struct stream *st, struct ds_msg *msgs, uint64_t *ticket,
                       struct ds_error *err)
{
        pthread_mutex_lock(&st->credit_lock);
        pthread_mutex_lock(&st->lock);
        bool over = should_stop(st);
        uint64_t first = st->reserved; /* only changed here, under credit_lock */
        pthread_mutex_unlock(&st->lock);
        int64_t b = over ? -ECANCELED : ds_session_credit(&st->session, first, true, err);
        pthread_mutex_lock(&st->lock);
        if (b >= 0 && st->failed)
                b = -ECANCELED;
        if (b < 0 && b != -ECANCELED)
                stream_fail(st, (int)b, err);
        if (b >= 0) {
                if (b > st->batch)
                        b = st->batch;
                if (st->quota && st->quota - first < (uint64_t)b)
                        b = (int64_t)(st->quota - first);
                if (b > st->free_count)
                        b = st->free_count;
                for (int64_t i = 0; i < b; i++)
                        msgs[i] = (struct ds_msg){.buf = st->free_bufs[--st->free_count],
                                                  .len = st->o->msg_size,
                                                  .seq = first + (uint64_t)i};
                st->reserved += (uint64_t)b;
                *ticket = st->next_ticket++;
        }
        pthread_mutex_unlock(&st->lock);
        pthread_mutex_unlock(&st->credit_lock);
        return b;
}

/* In this worker's turn: sends the batch (or, with no buffer free, waits for some to
 * come back from an asynchronous link). */
static int send_turn(struct stream *st, struct ds_msg *msgs, unsigned b, struct ds_error *err)
{
        unsigned done = 0;
        while (done < b) {
                int n = ds_link_send(st->link, msgs + done, b - done, err);
                if (n < 0)
                        return n;
                done += (unsigned)n;
        }
        void *back[BATCH * MAX_WORKERS];
        unsigned nback = 0;
        if (st->link->caps & DS_LINK_ASYNC_SEND) {
                int n = ds_link_reap(st->link, back, BATCH * MAX_WORKERS, b ? 0 : 100, err);
                if (n < 0)
                        return n;
                nback = (unsigned)n;
        } else {
                for (unsigned i = 0; i < b; i++)
                        back[nback++] = msgs[i].buf;
        }
        pthread_mutex_lock(&st->lock);
        for (unsigned i = 0; i < nback; i++)
                st->free_bufs[st->free_count++] = back[i];
        st->sent += b;
        pthread_mutex_unlock(&st->lock);
        ds_live_stream_add(st->seg, st->slot, b, (uint64_t)b * st->o->msg_size);
        return 0;
}

static void *worker(void *arg)
{
        struct stream *st = arg;
        struct ds_pattern pattern = {0};
        struct ds_error err = {{0}};
        if (st->o->verify && ds_pattern_init(&pattern, st->o->msg_size, &err) < 0) {
                pthread_mutex_lock(&st->lock);
                stream_fail(st, -ENOMEM, &err);
                pthread_mutex_unlock(&st->lock);
                return NULL;
        }
        for (;;) {
                struct ds_msg msgs[BATCH];
                uint64_t ticket;
                int64_t b = reserve(st, msgs, &ticket, &err);
                if (b < 0)
                        break;

                /* Getting ready happens outside the turn, while the other worker sends. */
                for (int64_t i = 0; i < b && st->o->verify; i++)
                        ds_pattern_stamp(&pattern, msgs[i].buf, msgs[i].seq);
                /* A stop ends a pacing wait, and the batch is not sent. */
                bool paced_out =
                    b > 0 && st->pace && ds_pace_wait(st->pace, (uint64_t)b * st->o->msg_size) < 0;

                pthread_mutex_lock(&st->lock);
                while (st->turn != ticket)
                        pthread_cond_wait(&st->turn_cv, &st->lock);
                bool skip = st->failed || paced_out;
                pthread_mutex_unlock(&st->lock);
                int rc = skip ? 0 : send_turn(st, msgs, (unsigned)b, &err);
                pthread_mutex_lock(&st->lock);
                if (rc < 0)
                        stream_fail(st, rc, &err);
                st->turn++;
                pthread_cond_broadcast(&st->turn_cv);
                pthread_mutex_unlock(&st->lock);
        }
        ds_pattern_free(&pattern);
        return NULL;
}

static void *stream_main(void *arg)
{
        struct stream *st = arg;
        /* One worker is the default: getting a batch ready is a few stores per page even
         * with --verify, so a second worker adds little but handing the turn over, a futex
         * wake and wait per batch (64000-byte raw messages: 4.0 GB/s with two workers, 7.0
         * with one; tcp 1 MiB --verify: 0.89 of plain with two, 1.04 with one). */
        unsigned extra = st->o->workers > 1 ? 1 : 0;
        pthread_t second;
        if (extra && pthread_create(&second, NULL, worker, st) != 0)
                extra = 0; /* one worker still runs the stream, only less overlapped */
        worker(st);
        if (extra)
                pthread_join(second, NULL);
        st->end_ns = ds_now_ns();
        return NULL;
}

/* Connects one stream, fills its buffers and says hello. */
static int stream_open(struct stream *st, uint64_t run_id, struct ds_error *err)
{
        const struct ds_blast_options *o = st->o;
        int rc = ds_link_connect(o->link, &st->link, &o->where, err);
        if (rc < 0)
                return rc;
        if (o->msg_size > st->link->max_msg)
                return ds_fail(err, -EMSGSIZE, "-l %u: the %s link carries at most %u bytes",
                               o->msg_size, o->link->name, st->link->max_msg);
        /* A link that copies during send() hands the buffers straight back, so small batches
         * reuse the same few while they are still in cache: tcp loopback at 1 MiB went
         * from 3990 to 4535 MB/s (medians of 7 alternating runs). An asynchronous link needs the
         * whole batch in flight. */
        st->batch = BATCH;
        if (!(st->link->caps & DS_LINK_ASYNC_SEND) && o->msg_size > BATCH_BYTES / BATCH)
                st->batch = o->msg_size >= BATCH_BYTES ? 1 : BATCH_BYTES / o->msg_size;
        /* A batch's worth per worker: a copying link hands them back as send() returns, an
         * asynchronous one as they complete (reaped while the other batch is in flight). */
        unsigned count = st->batch * MAX_WORKERS;
        rc = ds_pool_create(&st->pool, o->msg_size, count, 0, err);
        if (rc < 0)
                return rc;
        st->free_bufs = calloc(count, sizeof(void *));
        if (!st->free_bufs)
                return ds_fail(err, -ENOMEM, "blast buffers");
        struct ds_pattern pattern = {0};
        if (o->verify && (rc = ds_pattern_init(&pattern, o->msg_size, err)) < 0)
                return rc;
        for (unsigned i = 0; i < count; i++) {
                st->free_bufs[i] = ds_pool_buf(st->pool, i);
                if (o->verify)
                        ds_pattern_fill(&pattern, st->free_bufs[i], 0);
        }
        st->free_count = count;
        ds_pattern_free(&pattern);

        struct ds_wire_hello hello = {
            .flags = o->verify ? DS_HELLO_VERIFY : 0,
            .msg_size = o->msg_size,
            .count = st->quota,
            .duration_ms = st->quota ? 0 : (uint32_t)ds_duration_ms(o->duration_s),
            .flow = (uint8_t)o->flow,
            .op = (uint8_t)o->op,
            .streams = (uint16_t)o->streams,
            .stream = (uint16_t)st->index,
            .run_id = run_id,
            .window = o->window,
        };
        return ds_session_open(&st->session, st->link, &hello, st->pool, o->where.timeout_ms, err);
}

static void stream_close(struct stream *st)
{
        ds_live_slot_close(st->slot);
        ds_link_close(st->link);
        if (st->pool)
                ds_pool_destroy(st->pool);
        free(st->free_bufs);
        pthread_mutex_destroy(&st->credit_lock);
        pthread_mutex_destroy(&st->lock);
        pthread_cond_destroy(&st->turn_cv);
}

static uint64_t new_run_id(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 16);
}

struct run_totals {
        struct ds_wire_final sink; /* summed over streams; CPU: the sink's whole run */
        uint64_t sink_ns;          /* the slowest stream's receive time */
};

/* Each stream's FINAL says the sink's CPU over the run so far: the last says it all. A
 * repeat's figure adds to the others', unless a sink did not say. */
static void add_cpu(uint64_t *total, uint64_t more, bool same_run)
{
        if (*total == DS_WIRE_CPU_UNSAID || more == DS_WIRE_CPU_UNSAID)
                *total = DS_WIRE_CPU_UNSAID;
        else
                *total = same_run ? (more > *total ? more : *total) : *total + more;
}

static double cpu_seconds(uint64_t us)
{
        return us == DS_WIRE_CPU_UNSAID ? NAN : (double)us / 1e6; /* NaN: null in JSON */
}

/* The sink's side of a repeat, as the reporter's figures. */
static struct ds_result sink_result(const struct run_totals *t)
{
        struct ds_result r = {.seconds = (double)t->sink_ns / 1e9,
                              .cpu = {.user_s = cpu_seconds(t->sink.cpu_user_us),
                                      .sys_s = cpu_seconds(t->sink.cpu_sys_us)}};
        r.counters.messages = t->sink.messages;
        r.counters.bytes = t->sink.bytes;
        for (int i = 0; i < DS_FAULT_COUNT; i++)
                r.counters.faults[i] = t->sink.faults[i];
        ds_result_rates(&r);
        return r;
}

static void sink_extra(struct ds_json *json, void *ctx)
{
        struct ds_result r = sink_result(ctx);
        ds_json_open(json, "sink");
        ds_report_json_figures(json, &r);
        ds_json_close(json);
}

/* The sink's side of a repeat, as a second line in text mode. */
static void print_sink_line(const struct ds_report *send_report, const struct run_totals *t)
{
        struct ds_report sink_report = *send_report;
        sink_report.config.role = "sink";
        struct ds_result r = sink_result(t);
        ds_report_print(&sink_report, &r, NULL, NULL);
}

/* The run's options as given, for the report's "params". */
static void blast_params(struct ds_json *json, void *ctx)
{
        static const char *const flows[] = {[DS_FLOW_CREDIT] = "credit", [DS_FLOW_NONE] = "none"};
        static const char *const ops[] = {[DS_OP_DEFAULT] = "default",
                                          [DS_OP_WRITE] = "write",
                                          [DS_OP_SEND] = "send",
                                          [DS_OP_READ] = "read"};
        const struct ds_blast_options *o = ctx;

        ds_json_str(json, "host", o->where.host);
        ds_json_u64(json, "port", o->where.port);
        ds_json_u64(json, "count", o->count);
        ds_json_double(json, "duration_s", o->duration_s);
        ds_json_u64(json, "repeat", o->repeat);
        ds_json_u64(json, "streams", o->streams);
        ds_json_u64(json, "workers", o->workers);
        ds_json_double(json, "rate_bps", o->rate_bps);
        ds_json_bool(json, "verify", o->verify);
        ds_json_str(json, "flow", flows[o->flow]);
        ds_json_str(json, "op", ops[o->op]);
        ds_json_u64(json, "window", o->window);
}

static int streams_open(struct stream *streams, const struct ds_blast_options *o,
                        struct ds_live_segment *seg, const atomic_bool *stop, struct ds_error *err)
{
        uint64_t run_id = new_run_id();
        for (unsigned i = 0; i < o->streams; i++) {
                struct stream *st = &streams[i];
                st->o = o;
                st->index = i;
                st->seg = seg;
                st->slot = ds_live_slot_open(seg, DS_SLOT_STREAM, i, o->where.host);
                st->stop = stop;
                st->quota = o->count ? o->count / o->streams + (i < o->count % o->streams) : 0;
                pthread_mutex_init(&st->credit_lock, NULL);
                pthread_mutex_init(&st->lock, NULL);
                pthread_cond_init(&st->turn_cv, NULL);
                if (o->count && st->quota == 0)
                        return ds_fail(err, -EINVAL, "%llu messages are fewer than the %u streams",
                                       (unsigned long long)o->count, o->streams);
                int rc = stream_open(st, run_id, err);
                if (rc < 0)
                        return rc;
        }
        return 0;
}

/* Starts the workers and reports while they run. Returns when every stream is done. */
static int streams_drive(struct stream *streams, const struct ds_blast_options *o,
                         struct ds_report *report, struct ds_error *err)
{
        pthread_t threads[DS_BLAST_MAX_STREAMS];
        struct ds_pace pace;
        if (o->rate_bps > 0)
                ds_pace_init(&pace, o->rate_bps);
        uint64_t now = ds_now_ns();
        for (unsigned i = 0; i < o->streams; i++) {
                streams[i].deadline_ns = now + (uint64_t)(o->duration_s * 1e9);
                streams[i].pace = o->rate_bps > 0 ? &pace : NULL;
        }
        unsigned started = 0;
        for (; started < o->streams; started++)
                if (pthread_create(&threads[started], NULL, stream_main, &streams[started]) != 0)
                        break;
        if (started < o->streams) {
                ds_fail(err, -EAGAIN, "blast: cannot start a stream thread");
                for (unsigned i = 0; i < started; i++) {
                        pthread_mutex_lock(&streams[i].lock);
                        stream_fail(&streams[i], -EAGAIN, err); /* stops its workers */
                        pthread_mutex_unlock(&streams[i].lock);
                }
                for (unsigned i = 0; i < started; i++)
                        pthread_join(threads[i], NULL);
                return -EAGAIN;
        }
        for (unsigned i = 0; i < o->streams; i++) {
                /* Report on time while waiting: each join is preceded by ticks. */
                for (;;) {
                        struct timespec ts;
                        clock_gettime(CLOCK_REALTIME, &ts);
                        ts.tv_nsec += 50000000;
                        if (ts.tv_nsec >= 1000000000) {
                                ts.tv_sec++;
                                ts.tv_nsec -= 1000000000;
                        }
                        ds_report_tick(report);
                        if (pthread_timedjoin_np(threads[i], NULL, &ts) == 0)
                                break;
                }
        }
        return 0;
}

static int run_repeat(const struct ds_blast_options *o, struct ds_live *live,
                      const atomic_bool *stop, struct ds_result *result, struct run_totals *totals,
                      struct ds_error *err)
{
        struct ds_live_segment *seg = ds_live_segment(live);
        atomic_store(&seg->messages, 0);
        atomic_store(&seg->bytes, 0);
        struct stream *streams = calloc(o->streams, sizeof(*streams));
        if (!streams)
                return ds_fail(err, -ENOMEM, "blast streams");
        int rc = streams_open(streams, o, seg, stop, err);
        struct ds_report report;
        if (rc == 0) {
                ds_live_start(live);
                ds_report_init(&report, &o->report, seg);
                ds_report_start(&report);
                rc = streams_drive(streams, o, &report, err);
        }
        /* After a stop, what was sent is the report, whatever the stop cut short. */
        bool interrupted = rc == 0 && stop && *stop;
        uint64_t end_ns = 0;
        for (unsigned i = 0; rc == 0 && i < o->streams; i++) {
                struct stream *st = &streams[i];
                if (st->failed && !interrupted) {
                        *err = st->err;
                        rc = st->rc;
                        break;
                }
                if (st->end_ns > end_ns)
                        end_ns = st->end_ns;
        }
        if (rc == 0) {
                ds_report_finish_at(&report, end_ns, result);
                result->interrupted = interrupted;
        }
        memset(totals, 0, sizeof(*totals));
        for (unsigned i = 0; rc == 0 && i < o->streams; i++) {
                struct stream *st = &streams[i];
                rc = ds_session_close(&st->session, st->sent, st->sent * o->msg_size, &st->final,
                                      err);
                if (rc < 0 && interrupted) { /* the sink's counts are lost, not ours */
                        rc = 0;
                        memset(&st->final, 0, sizeof(st->final));
                        st->final.cpu_user_us = st->final.cpu_sys_us = DS_WIRE_CPU_UNSAID;
                }
                totals->sink.messages += st->final.messages;
                totals->sink.bytes += st->final.bytes;
                for (int f = 0; f < DS_WIRE_FAULTS; f++)
                        totals->sink.faults[f] += st->final.faults[f];
                add_cpu(&totals->sink.cpu_user_us, st->final.cpu_user_us, true);
                add_cpu(&totals->sink.cpu_sys_us, st->final.cpu_sys_us, true);
                if (st->final.recv_ns > totals->sink_ns)
                        totals->sink_ns = st->final.recv_ns;
        }
        if (rc == 0) {
                ds_report_print(&report, result, sink_extra, totals);
                if (!o->report.json)
                        print_sink_line(&report, totals);
        }
        for (unsigned i = 0; i < o->streams; i++)
                stream_close(&streams[i]);
        free(streams);
        return rc;
}

int ds_blast_run(const struct ds_blast_options *options, const atomic_bool *stop,
                 struct ds_error *err)
{
        struct ds_blast_options o = *options;
        if (o.streams == 0 || o.streams > DS_BLAST_MAX_STREAMS || o.repeat == 0 ||
            (o.count == 0 && o.duration_s <= 0))
                return ds_fail(err, -EINVAL, "blast: streams, repeat and count or duration");
        o.report.tool = "blast";
        o.report.role = "send";
        o.report.link = o.link->name;
        o.report.msg_size = o.msg_size;
        o.report.params = blast_params;
        o.report.params_ctx = &o;
        struct ds_live *live;
        int rc = ds_live_open(&live, "blast", "send", o.link->name, NULL, err);
        if (rc < 0)
                return rc;
        ds_live_set_peer(live, o.where.host);
        ds_live_set_msg_size(live, o.msg_size);
        struct ds_result sum = {0};
        struct run_totals sink_sum = {0};
        struct ds_report summary;
        struct ds_report_config summary_config = o.report;
        summary_config.role = "summary";
        ds_report_init(&summary, &summary_config, NULL);
        ds_report_start(&summary); /* the summary's run begins with the first repeat */
        for (unsigned r = 0; r < o.repeat && rc == 0 && !(stop && *stop); r++) {
                struct ds_result result;
                struct run_totals totals;
                rc = run_repeat(&o, live, stop, &result, &totals, err);
                if (rc < 0)
                        break;
                sum.counters.messages += result.counters.messages;
                sum.counters.bytes += result.counters.bytes;
                sum.seconds += result.seconds;
                sum.cpu.user_s += result.cpu.user_s;
                sum.cpu.sys_s += result.cpu.sys_s;
                sink_sum.sink.messages += totals.sink.messages;
                sink_sum.sink.bytes += totals.sink.bytes;
                for (int f = 0; f < DS_WIRE_FAULTS; f++)
                        sink_sum.sink.faults[f] += totals.sink.faults[f];
                add_cpu(&sink_sum.sink.cpu_user_us, totals.sink.cpu_user_us, false);
                add_cpu(&sink_sum.sink.cpu_sys_us, totals.sink.cpu_sys_us, false);
                sink_sum.sink_ns += totals.sink_ns;
        }
        if (rc == 0 && o.repeat > 1) {
                ds_result_rates(&sum);
                sum.interrupted = stop && *stop;
                ds_report_print(&summary, &sum, sink_extra, &sink_sum);
                if (!o.report.json)
                        print_sink_line(&summary, &sink_sum);
        }
        ds_live_done(live);
        ds_live_close(live);
        return rc;
}
