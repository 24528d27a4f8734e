/* The transfer pipeline. One disk thread (the caller's) and one network thread per data
 * connection hand pool buffers to each other by reference; a mutex and a condition
 * variable guard the hand-over, once per block of megabytes, so their cost is nothing
 * beside the data's. Network waits are blocking calls cut into 100 ms slices
 * (SO_SNDTIMEO/SO_RCVTIMEO) so that a stop, an idle deadline or a failure elsewhere in the
 * pipeline is seen promptly without a poll() per buffer. */
#include "xfer.h"
#include "xconn.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <dragstrip/clock.h>
#include <dragstrip/error.h>
#include <dragstrip/live.h>
#include <dragstrip/net.h>
#include <dragstrip/pace.h>
#include <dragstrip/pool.h>
#include <dragstrip/stop.h>

#include "modee.h"
#include "ranges.h"

#define SLICE_MS      100
#define DEFAULT_DEPTH 4u
#define RANGES_MAX    1024u /* MODE E: disjoint ranges written beyond the prefix */
/* Pieces the disk side keeps in flight on a file with start_io: two keep every member of
 * a striped file queued while the piece before is checked and handed on. */
#define AHEAD 2u

struct piece {
        void *buf;
        size_t len;
        uint64_t offset;
        bool end;    /* sending: no more pieces for this connection */
        unsigned to; /* sending: the connection that sends it */
        /* buf is lent by this connection's backend, not a pool buffer: sending, by
         * take_buf (sent in place, or put back); receiving, by lend (given back with
         * ticket) */
        struct xftp_conn *lender;
        uint64_t ticket;
};

/* A bounded queue of pieces, guarded by the pipeline's lock. */
struct queue {
        struct piece *items;
        unsigned cap, head, count;
};

struct pipeline {
        const struct xftp_xfer_opts *opts;
        pthread_t caller; /* the thread that runs the transfer: opts->on_slice's */
        enum xftp_xfer_mode mode;
        struct xftp_xfile *file;
        struct xftp_conn *conns;
        unsigned n;
        size_t block;
        bool sending;
        struct ds_pool *pool;
        bool pool_lent; /* opts->pool: the caller's, not destroyed here */
        struct ds_live_segment *live;
        struct ds_live_slot *slots[XFTP_MODEE_MAX_STREAMS]; /* one per connection, or NULL */

        pthread_mutex_t lock;
        pthread_cond_t changed;
        void **free_bufs; /* a stack of buffers no one holds */
        unsigned free_count;
        struct queue to_net[XFTP_MODEE_MAX_STREAMS]; /* sending: one queue per connection */
        struct queue to_disk;                        /* receiving: one for all connections */
        unsigned net_running;                        /* receiving: threads still reading */
        struct xftp_modee_end end;
        atomic_bool closing; /* receiving MODE E: an EOD said the sender closes */
        /* Receiving one small piece: the receiving thread writes each piece itself. */
        bool inline_write;
        uint64_t stream_at; /* receiving MODE S: where the next piece lands */
        struct xftp_ranges *arrived;
        struct xftp_xfer_result *result;
        int failed; /* first negative errno, with its message in err */
        struct ds_error err;
        bool file_failed; /* that first failure was the file's */
        /* sending: what the connections took, counted as they take it, so that a transfer
         * cut short counts no byte it only read */
        _Atomic uint64_t sent_bytes, sent_blocks;
        _Atomic uint64_t last_progress_ns;
        size_t pace_chunk; /* -R: bytes a socket call moves at most; 0: unpaced */
};

struct net_thread {
        struct pipeline *pl;
        unsigned index;
        pthread_t thread;
};

static bool queue_push(struct queue *q, struct piece piece)
{
        if (q->count == q->cap)
                return false;
        q->items[(q->head + q->count++) % q->cap] = piece;
        return true;
}

static struct piece queue_pop(struct queue *q)
{
        struct piece piece = q->items[q->head];
        q->head = (q->head + 1) % q->cap;
        q->count--;
        return piece;
}

/* The disk side's pieces in flight, oldest first. */
struct flight {
        struct piece pieces[AHEAD];
        int tickets[AHEAD];
        ssize_t results[AHEAD]; /* files without start_io: done at start */
        unsigned head, count, cap;
};

/* Records the first failure and wakes everyone; returns rc. Called with the lock held. */
static int fail_locked(struct pipeline *pl, int rc, const struct ds_error *err)
{
        if (pl->failed == 0) {
                pl->failed = rc;
                pl->err = *err;
        }
        pthread_cond_broadcast(&pl->changed);
        return rc;
}

static int fail(struct pipeline *pl, int rc, const struct ds_error *err)
{
        pthread_mutex_lock(&pl->lock);
        fail_locked(pl, rc, err);
        pthread_mutex_unlock(&pl->lock);
        return rc;
}

/* As fail, for a failure of the file (a read, a write, a sync): xftpd answers it as its
 * own local error, not as a cut connection. */
static int fail_file(struct pipeline *pl, int rc, const struct ds_error *err)
{
        pthread_mutex_lock(&pl->lock);
        if (pl->failed == 0)
                pl->file_failed = true;
        fail_locked(pl, rc, err);
        pthread_mutex_unlock(&pl->lock);
        return rc;
}

/* As fail_file, for the read (or write) at offset that failed with rc. */
static int fail_io(struct pipeline *pl, int rc, bool is_write, uint64_t offset,
                   struct ds_error *err)
{
        return fail_file(
            pl,
            ds_fail(err, rc, "%s at %llu", is_write ? "write" : "read", (unsigned long long)offset),
            err);
}

static bool failed(struct pipeline *pl)
{
        pthread_mutex_lock(&pl->lock);
        bool f = pl->failed != 0;
        pthread_mutex_unlock(&pl->lock);
        return f;
}

static void progress(struct pipeline *pl)
{
        atomic_store_explicit(&pl->last_progress_ns, ds_now_ns(), memory_order_relaxed);
}

/* Counts one buffer or block that connection `index` moved, in the session's totals and
 * in the connection's slot: relaxed atomic adds, once per block of megabytes. */
static void count(struct pipeline *pl, unsigned index, size_t bytes)
{
        if (pl->live)
                ds_live_stream_add(pl->live, pl->slots[index], 1, bytes);
}

/* Counts the bytes connection `index` took of a piece of len bytes, in the result and the
 * live counters; the piece counts as a block once all of it is taken. */
static void count_sent(struct pipeline *pl, unsigned index, size_t bytes, size_t len)
{
        if (pl->live)
                ds_live_stream_add(pl->live, pl->slots[index], bytes == len, bytes);
        atomic_fetch_add_explicit(&pl->sent_bytes, bytes, memory_order_relaxed);
        atomic_fetch_add_explicit(&pl->sent_blocks, bytes == len, memory_order_relaxed);
}

/* The caller's work once a slice (progress, live figures), in the caller's thread. */
static void slice_passed(struct pipeline *pl)
{
        const struct xftp_xfer_opts *o = pl->opts;
        if (o->on_slice && pthread_equal(pthread_self(), pl->caller))
                o->on_slice(o->slice_ctx);
}

/* After a slice: 0 to keep waiting, or why to give up. Also after a socket call that
 * moved bytes: on a slow link a slice ends with a partial count, not an error, so a
 * steady trickle would otherwise never see a stop. */
static int check_wait(struct pipeline *pl, struct ds_error *err)
{
        const struct xftp_xfer_opts *o = pl->opts;

        slice_passed(pl);
        if (ds_stopping() || (o->stop && atomic_load_explicit(o->stop, memory_order_relaxed)))
                return ds_fail(err, -EINTR, "transfer stopped");
        if (failed(pl))
                return -ECANCELED;
        uint64_t last = atomic_load_explicit(&pl->last_progress_ns, memory_order_relaxed);
        if (o->idle_ms > 0 && ds_now_ns() - last > (uint64_t)o->idle_ms * 1000000u)
                return ds_fail(err, 0, "no data moved for %d ms", o->idle_ms), -ETIMEDOUT;
        return 0;
}

/* -R: holds this thread until the bytes it just moved are due on the schedule shared by
 * every connection and file of the run; unpaced, one test of a pointer. The wait is
 * deliberate, so it counts as progress for the idle deadline, and it goes in slices, so
 * that a stop or a failure elsewhere in the pipeline ends it. Socket calls move at most
 * pace_chunk bytes (a slice's worth at the rate) between waits, so neither peer sees a
 * silence long enough to take for a stall. */
static int pace(struct pipeline *pl, size_t bytes, struct ds_error *err)
{
        if (!pl->opts->pace)
                return 0;
        uint64_t due = ds_pace_book(pl->opts->pace, bytes);
        for (uint64_t now = ds_now_ns(); now < due; now = ds_now_ns()) {
                uint64_t slice_end = now + SLICE_MS * 1000000ull;
                int slept = ds_sleep_until(due < slice_end ? due : slice_end);
                progress(pl);
                int rc = check_wait(pl, err);
                if (rc == 0 && slept < 0)
                        rc = ds_fail(err, -EINTR, "transfer stopped");
                if (rc < 0)
                        return rc;
        }
        return 0;
}

/* After a connection's call failed with rc: a slice timed out or a signal came (EAGAIN,
 * EINTR), so 0 to try again unless check_wait says to give up; any other errno fails as
 * what. */
static int retry_or_fail(struct pipeline *pl, ssize_t rc, const char *what, struct ds_error *err)
{
        if (rc != -EAGAIN && rc != -EINTR)
                return ds_fail(err, (int)rc, "%s", what);
        return check_wait(pl, err);
}

/* Waits on the condition variable for one slice; the lock is held. */
static void wait_slice(struct pipeline *pl)
{
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += SLICE_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&pl->changed, &pl->lock, &until);
}

/* Waits one slice, then looks at stop and idle. */
static int wait_locked(struct pipeline *pl, struct ds_error *err)
{
        wait_slice(pl);
        if (pl->failed)
                return -ECANCELED;
        pthread_mutex_unlock(&pl->lock);
        int rc = check_wait(pl, err);
        pthread_mutex_lock(&pl->lock);
        return rc;
}

/* The disk side of receiving waits one slice for pieces, leaving stop and idle to the
 * network threads still running: each sees both within a slice and hands over the bytes
 * it holds first, which a disk side that gave up before it would drop. */
static int wait_for_pieces(struct pipeline *pl)
{
        wait_slice(pl);
        if (pl->failed)
                return -ECANCELED;
        pthread_mutex_unlock(&pl->lock);
        slice_passed(pl);
        pthread_mutex_lock(&pl->lock);
        return 0;
}

static void *take_free(struct pipeline *pl, struct ds_error *err, int *rc)
{
        void *buf = NULL;

        *rc = 0;
        pthread_mutex_lock(&pl->lock);
        while (pl->free_count == 0 && (*rc = wait_locked(pl, err)) == 0)
                ;
        if (pl->free_count > 0 && pl->failed == 0) {
                buf = pl->free_bufs[--pl->free_count];
                *rc = 0;
        } else if (*rc == 0) {
                *rc = -ECANCELED;
        }
        pthread_mutex_unlock(&pl->lock);
        return buf;
}

/* A free buffer if one is there now, else NULL. */
static void *try_take_free(struct pipeline *pl)
{
        void *buf = NULL;

        pthread_mutex_lock(&pl->lock);
        if (pl->free_count > 0 && pl->failed == 0)
                buf = pl->free_bufs[--pl->free_count];
        pthread_mutex_unlock(&pl->lock);
        return buf;
}

static void give_free(struct pipeline *pl, void *buf)
{
        pthread_mutex_lock(&pl->lock);
        pl->free_bufs[pl->free_count++] = buf;
        pthread_cond_broadcast(&pl->changed);
        pthread_mutex_unlock(&pl->lock);
}

/* A piece is done with (or never sent): its buffer back to the pool, or to the
 * connection that lent it. */
static void piece_done(struct pipeline *pl, const struct piece *piece)
{
        if (!piece->lender)
                give_free(pl, piece->buf);
        else if (pl->sending)
                piece->lender->ops->put_buf(piece->lender, piece->buf);
        else
                piece->lender->ops->give_back(piece->lender, piece->ticket);
}

/* Queues piece, or returns a negative errno with the piece still the caller's: a piece
 * queued is never also handed back, or its buffer would be freed twice. */
static int push_piece(struct pipeline *pl, struct queue *q, struct piece piece,
                      struct ds_error *err)
{
        int rc = 0;

        pthread_mutex_lock(&pl->lock);
        for (;;) {
                if (pl->failed) {
                        rc = -ECANCELED;
                        break;
                }
                if (queue_push(q, piece) || (rc = wait_locked(pl, err)) != 0)
                        break;
        }
        pthread_cond_broadcast(&pl->changed);
        pthread_mutex_unlock(&pl->lock);
        return rc;
}

/* Pops a piece. With until_done (the disk side of receiving) the queue is drained even
 * after a failure, and -ENODATA says it is empty with no network thread left to fill it. */
static int pop_piece(struct pipeline *pl, struct queue *q, bool until_done, struct piece *piece,
                     struct ds_error *err)
{
        int rc = 0;

        pthread_mutex_lock(&pl->lock);
        while (q->count == 0 && !(until_done && pl->net_running == 0) &&
               (rc = until_done ? wait_for_pieces(pl) : wait_locked(pl, err)) == 0)
                ;
        if (until_done && q->count > 0)
                rc = 0; /* what arrived before a failure is still written: more to resume from */
        if (rc == 0 && pl->failed && !(until_done && q->count > 0))
                rc = -ECANCELED;
        else if (rc == 0 && q->count == 0)
                rc = -ENODATA;
        else if (rc == 0)
                *piece = queue_pop(q);
        pthread_cond_broadcast(&pl->changed);
        pthread_mutex_unlock(&pl->lock);
        return rc;
}

/* Pops a piece if one is queued now (even after a failure, as pop_piece until_done):
 * true when it did. */
static bool try_pop_piece(struct pipeline *pl, struct queue *q, struct piece *piece)
{
        pthread_mutex_lock(&pl->lock);
        bool got = q->count > 0;
        if (got) {
                *piece = queue_pop(q);
                pthread_cond_broadcast(&pl->changed);
        }
        pthread_mutex_unlock(&pl->lock);
        return got;
}

/* Whether a piece is queued in q now. */
static bool piece_queued(struct pipeline *pl, const struct queue *q)
{
        pthread_mutex_lock(&pl->lock);
        bool queued = q->count > 0;
        pthread_mutex_unlock(&pl->lock);
        return queued;
}

/* One send of what msg holds, or of its first pace_chunk bytes when paced. */
static ssize_t send_some(struct pipeline *pl, struct xftp_conn *conn, const struct msghdr *msg)
{
        if (!pl->pace_chunk)
                return conn->ops->sendv(conn, msg->msg_iov, (int)msg->msg_iovlen, 0);
        struct iovec part[2]; /* a MODE E header and its payload at most */
        int parts = 0;
        size_t room = pl->pace_chunk;
        for (size_t i = 0; i < msg->msg_iovlen && parts < 2 && room > 0; i++) {
                size_t take = msg->msg_iov[i].iov_len < room ? msg->msg_iov[i].iov_len : room;
                part[parts++] = (struct iovec){msg->msg_iov[i].iov_base, take};
                room -= take;
        }
        return conn->ops->sendv(conn, part, parts, 0);
}

/* Sends every byte of iov[0..cnt-1], adding to *taken those the connection takes as it
 * takes them: bytes handed over before a stop or a failure is seen are counted too. */
static int send_all(struct pipeline *pl, struct xftp_conn *conn, struct iovec *iov, int cnt,
                    size_t *taken, struct ds_error *err)
{
        struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)cnt};

        while (msg.msg_iovlen > 0) {
                ssize_t sent = send_some(pl, conn, &msg);
                if (sent < 0) {
                        int rc = retry_or_fail(pl, sent, "data send", err);
                        if (rc < 0)
                                return rc;
                        continue;
                }
                progress(pl);
                *taken += (size_t)sent;
                int rc = pace(pl, (size_t)sent, err);
                if (rc == 0)
                        rc = check_wait(pl, err);
                if (rc < 0)
                        return rc;
                size_t left = (size_t)sent;
                while (msg.msg_iovlen > 0 && left >= msg.msg_iov->iov_len) {
                        left -= msg.msg_iov->iov_len;
                        msg.msg_iov++;
                        msg.msg_iovlen--;
                }
                if (msg.msg_iovlen > 0) {
                        msg.msg_iov->iov_base = (char *)msg.msg_iov->iov_base + left;
                        msg.msg_iov->iov_len -= left;
                }
        }
        return 0;
}

/* Reads exactly len bytes; *got says how many came, also before a failure or the peer's
 * close (then the return is -EPIPE, or 0 when nothing came and eof_ok). */
static int recv_full(struct pipeline *pl, struct xftp_conn *conn, void *buf, size_t len,
                     bool eof_ok, size_t *got, struct ds_error *err)
{
        *got = 0;
        while (*got < len) {
                size_t want = len - *got;
                if (pl->pace_chunk && want > pl->pace_chunk)
                        want = pl->pace_chunk;
                ssize_t n = conn->ops->recv(conn, (char *)buf + *got, want, MSG_WAITALL);
                if (n > 0) {
                        *got += (size_t)n;
                        progress(pl);
                        int rc = pace(pl, (size_t)n, err);
                        if (rc == 0)
                                rc = check_wait(pl, err);
                        if (rc < 0)
                                return rc;
                        continue;
                }
                if (n == 0) {
                        if (*got == 0 && eof_ok)
                                return 0;
                        return ds_fail(err, 0, "data connection closed early"), -EPIPE;
                }
                int rc = retry_or_fail(pl, n, "data receive", err);
                if (rc < 0)
                        return rc;
        }
        return 0;
}

/* A block whose payload lies in a buffer its connection lent (take_buf): sent whole by
 * one sendv, after which the buffer is the connection's again. With more (another piece
 * is queued for the connection now) it may hold the block to send it with the next.
 * Returns 0 sent (*taken the bytes), or a negative errno with the buffer still the
 * caller's. Never paced (no lending then). */
static int send_in_place(struct pipeline *pl, struct xftp_conn *conn, struct iovec *iov, int cnt,
                         bool more, size_t *taken, struct ds_error *err)
{
        for (;;) {
                ssize_t sent = conn->ops->sendv(conn, iov, cnt, more ? MSG_MORE : 0);
                if (sent > 0) {
                        progress(pl);
                        *taken = (size_t)sent;
                        return 0;
                }
                int rc = retry_or_fail(pl, sent == 0 ? -EIO : sent, "data send", err);
                if (rc < 0)
                        return rc;
        }
}

static void *send_thread(void *arg)
{
        struct net_thread *t = arg;
        struct pipeline *pl = t->pl;
        struct xftp_conn *conn = &pl->conns[t->index];
        struct ds_error err = {{0}};
        int rc = 0;

        for (;;) {
                struct piece piece = {0};
                rc = pop_piece(pl, &pl->to_net[t->index], false, &piece, &err);
                if (rc < 0)
                        break;
                uint8_t header[XFTP_MODEE_HEADER];
                struct iovec iov[2];
                int cnt = 0;
                if (pl->mode == XFTP_XFER_BLOCKS) {
                        struct xftp_modee_block block = {.count = piece.len,
                                                         .offset = piece.offset};
                        if (piece.end) {
                                block.desc = XFTP_MODEE_EOD;
                                block.count = 0;
                                block.offset = 0;
                                if (t->index == 0) {
                                        block.desc |= XFTP_MODEE_EOF;
                                        block.offset = pl->n;
                                }
                                if (!(pl->opts->flags & XFTP_XFER_KEEP))
                                        block.desc |= XFTP_MODEE_CLOSE;
                        }
                        xftp_modee_encode(&block, header);
                        iov[cnt++] = (struct iovec){header, sizeof(header)};
                }
                size_t head = pl->mode == XFTP_XFER_BLOCKS ? sizeof(header) : 0;
                if (!piece.end)
                        iov[cnt++] = (struct iovec){piece.buf, piece.len};
                size_t taken = 0;
                if (piece.lender)
                        rc = send_in_place(pl, conn, iov, cnt,
                                           piece_queued(pl, &pl->to_net[t->index]), &taken, &err);
                else
                        rc = cnt > 0 ? send_all(pl, conn, iov, cnt, &taken, &err) : 0;
                if (!piece.end) {
                        if (!piece.lender || rc < 0)
                                piece_done(pl, &piece);
                        count_sent(pl, t->index, taken > head ? taken - head : 0, piece.len);
                }
                if (rc < 0 || piece.end)
                        break;
        }
        if (rc < 0 && rc != -ECANCELED)
                fail(pl, rc, &err);
        return NULL;
}

static int deliver(struct pipeline *pl, struct piece piece, struct ds_error *err);

/* The first got bytes of piece came before its connection failed with rc (err says
 * why): they are written all the same, so that a resume starts after them, not before.
 * Returns rc. */
static int deliver_before_failure(struct pipeline *pl, unsigned index, struct piece piece,
                                  size_t got, int rc, const struct ds_error *err)
{
        struct ds_error unused; /* the connection's failure is the one to report */
        if (pl->inline_write)
                fail(pl, rc, err); /* first: a failed write here must not take its place */
        piece.len = got;
        count(pl, index, got);
        if (deliver(pl, piece, &unused) < 0)
                piece_done(pl, &piece);
        return rc;
}

/* piece->len bytes from the index'th connection into piece: lent where the backend holds
 * them whole (no copy), else received into a free buffer. On failure nothing is left to
 * give back. */
static int take_payload(struct pipeline *pl, unsigned index, struct piece *piece,
                        struct ds_error *err)
{
        struct xftp_conn *conn = &pl->conns[index];
        int rc = 0;
        if (conn->ops->lend && (piece->buf = conn->ops->lend(conn, piece->len, &piece->ticket))) {
                piece->lender = conn;
                progress(pl);
                rc = pace(pl, piece->len, err);
                if (rc == 0)
                        rc = check_wait(pl, err);
        } else if ((piece->buf = take_free(pl, err, &rc))) {
                size_t got = 0;
                rc = recv_full(pl, conn, piece->buf, piece->len, false, &got, err);
                if (rc < 0 && got > 0)
                        return deliver_before_failure(pl, index, *piece, got, rc, err);
        }
        if (rc < 0 && piece->buf)
                piece_done(pl, piece);
        return rc;
}

/* MODE E: one block's payload, read in pieces of at most a buffer each. */
static int recv_payload(const struct net_thread *t, const struct xftp_modee_block *block,
                        struct ds_error *err)
{
        struct pipeline *pl = t->pl;
        uint64_t done = 0;

        while (done < block->count) {
                size_t len =
                    block->count - done < pl->block ? (size_t)(block->count - done) : pl->block;
                struct piece piece = {.len = len, .offset = block->offset + done};
                int rc = take_payload(pl, t->index, &piece, err);
                if (rc < 0)
                        return rc;
                count(pl, t->index, len);
                rc = deliver(pl, piece, err);
                if (rc < 0) {
                        piece_done(pl, &piece);
                        return rc;
                }
                done += len;
        }
        return 0;
}

static int recv_blocks(const struct net_thread *t, struct ds_error *err)
{
        struct pipeline *pl = t->pl;
        struct xftp_conn *conn = &pl->conns[t->index];
        uint64_t limit = pl->opts->limit;

        for (;;) {
                uint8_t header[XFTP_MODEE_HEADER];
                struct xftp_modee_block block;
                size_t got;
                int rc = recv_full(pl, conn, header, sizeof(header), false, &got, err);
                if (rc < 0)
                        return rc;
                rc = xftp_modee_decode(header, limit, &block, err);
                if (rc < 0)
                        return rc;
                if (!(block.desc & XFTP_MODEE_EOF) && block.count > 0 &&
                    block.offset < pl->opts->offset)
                        return ds_fail(err, 0, "block %llu+%llu lies before the start %llu",
                                       (unsigned long long)block.offset,
                                       (unsigned long long)block.count,
                                       (unsigned long long)pl->opts->offset),
                               -EPROTO;
                if (!(block.desc & XFTP_MODEE_EOF) && block.count > 0) {
                        rc = recv_payload(t, &block, err);
                        if (rc < 0)
                                return rc;
                }
                pthread_mutex_lock(&pl->lock);
                rc = xftp_modee_end_note(&pl->end, &block);
                if (rc == 0 && pl->end.eods_expected > pl->n)
                        rc = -EPROTO;
                pthread_mutex_unlock(&pl->lock);
                if (rc < 0)
                        return ds_fail(err, 0, "EOF/EOD blocks do not add up"), rc;
                if (block.desc & XFTP_MODEE_CLOSE)
                        atomic_store(&pl->closing, true);
                if (block.desc & XFTP_MODEE_EOD)
                        return 0; /* nothing past it is read: it may be the next transfer's */
        }
}

/* One piece of a MODE S stream, received into a free buffer and delivered at stream_at;
 * *last when the stream ended with it or before it. A piece received here (in the
 * caller's thread, before the pipeline runs) that ends the stream, or whose connection
 * failed, is written here too: no disk side would take it. */
static int stream_piece(struct pipeline *pl, unsigned index, bool here, bool *last,
                        struct ds_error *err)
{
        const struct xftp_xfer_opts *o = pl->opts;
        uint64_t end = o->length > UINT64_MAX - o->offset ? UINT64_MAX : o->offset + o->length;
        if (end > o->limit)
                end = o->limit;
        int rc = 0;
        void *buf = take_free(pl, err, &rc);

        *last = true;
        if (!buf)
                return rc;
        size_t got = 0;
        rc = recv_full(pl, &pl->conns[index], buf, pl->block, true, &got, err);
        if (rc == -EPIPE)
                rc = 0; /* in MODE S the close is the end */
        if (got > end - pl->stream_at) {
                if (rc == 0)
                        rc = (ds_fail(err, 0, "data past offset %llu, the end allowed",
                                      (unsigned long long)end),
                              -EFBIG);
                got = 0; /* none of it is kept */
        }
        pl->inline_write |= here && (got < pl->block || rc < 0);
        if (rc < 0 && got > 0) /* the stream ends here: stream_at is not read again */
                return deliver_before_failure(
                    pl, index, (struct piece){.buf = buf, .offset = pl->stream_at}, got, rc, err);
        if (rc == 0 && got > 0) {
                count(pl, index, got);
                rc = deliver(pl, (struct piece){.buf = buf, .len = got, .offset = pl->stream_at},
                             err);
        }
        if (rc < 0 || got == 0) {
                give_free(pl, buf);
                return rc;
        }
        pl->stream_at += got;
        *last = got < pl->block;
        return 0;
}

static int recv_stream(const struct net_thread *t, struct ds_error *err)
{
        bool last = false;
        int rc = 0;

        while (rc == 0 && !last)
                rc = stream_piece(t->pl, t->index, false, &last, err);
        return rc;
}

static void *recv_thread(void *arg)
{
        struct net_thread *t = arg;
        struct pipeline *pl = t->pl;
        struct ds_error err = {{0}};

        int rc = pl->mode == XFTP_XFER_BLOCKS ? recv_blocks(t, &err) : recv_stream(t, &err);
        pthread_mutex_lock(&pl->lock);
        if (rc < 0 && rc != -ECANCELED)
                fail_locked(pl, rc, &err);
        pl->net_running--;
        pthread_cond_broadcast(&pl->changed);
        pthread_mutex_unlock(&pl->lock);
        return NULL;
}

/* Sets the 100 ms slices on a data socket. */
static int set_slices(int fd)
{
        struct timeval slice = {.tv_sec = 0, .tv_usec = SLICE_MS * 1000};
        if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &slice, sizeof(slice)) < 0 ||
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &slice, sizeof(slice)) < 0)
                return -errno;
        return 0;
}

/* Claims a live-counter slot for each data connection, named after its peer: once per
 * transfer, so the getpeername() is no concern. A segment with no slot free (or private,
 * --no-stats) leaves the connection counted in the totals only. */
static void open_slots(struct pipeline *pl)
{
        for (unsigned i = 0; pl->live && i < pl->n; i++) {
                struct sockaddr_storage addr;
                socklen_t len = sizeof(addr);
                char name[64] = ""; /* the slot keeps what fits */
                if (pl->conns[i].fd < 0)
                        snprintf(name, sizeof(name), "%s", pl->conns[i].ops->name);
                else if (getpeername(pl->conns[i].fd, (struct sockaddr *)&addr, &len) == 0)
                        ds_net_format((struct sockaddr *)&addr, len, name, sizeof(name));
                pl->slots[i] = ds_live_slot_open(pl->live, DS_SLOT_STREAM, i, name);
        }
}

static void pipeline_free(struct pipeline *pl)
{
        for (unsigned i = 0; i < pl->n; i++)
                ds_live_slot_close(pl->slots[i]);
        for (unsigned i = 0; i < XFTP_MODEE_MAX_STREAMS; i++)
                free(pl->to_net[i].items);
        free(pl->to_disk.items);
        free(pl->free_bufs);
        if (!pl->pool_lent)
                ds_pool_destroy(pl->pool);
        pthread_cond_destroy(&pl->changed);
        pthread_mutex_destroy(&pl->lock);
}

/* Buffers of a pipeline over n connections: every connection keeps one. */
static unsigned pipeline_depth(const struct xftp_xfer_opts *opts, unsigned n)
{
        unsigned depth = opts->depth ? opts->depth : DEFAULT_DEPTH;
        return depth < n ? n : depth;
}

/* The bytes a transfer is known to move at most: what is to be sent (UINT64_MAX: to the
 * end of the file, which may grow while it is read), or the room a receiver allows. */
static uint64_t range_bytes(const struct xftp_xfer_opts *opts, bool sending)
{
        if (sending)
                return opts->length;
        if (opts->limit == UINT64_MAX)
                return UINT64_MAX;
        return opts->limit > opts->offset ? opts->limit - opts->offset : 0;
}

/* The buffer size of a transfer: the block asked for, or whole pages enough for the range
 * when it is known to be shorter. A tree of small files then maps and touches a few pages
 * per file, not depth x 4 MiB: zeroing those was most of what a 64 KiB file cost. */
static size_t transfer_block(const struct xftp_xfer_opts *opts, bool sending)
{
        uint64_t block = opts->block ? opts->block : XFTP_XFER_BLOCK;
        uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
        uint64_t bytes = range_bytes(opts, sending);
        if (bytes < block)
                block = bytes == 0 ? page : (bytes + page - 1) / page * page;
        return (size_t)block;
}

/* With buffers false (sendfile moves the data) no pool is made: a session would map and
 * touch depth x block bytes (16 MiB by default) for nothing. */
static int pipeline_init(struct pipeline *pl, struct xftp_xfile *file, enum xftp_xfer_mode mode,
                         struct xftp_conn *conns, unsigned n, const struct xftp_xfer_opts *opts,
                         bool sending, bool buffers, struct ds_error *err)
{
        unsigned depth = pipeline_depth(opts, n);

        *pl = (struct pipeline){.opts = opts,
                                .caller = pthread_self(),
                                .sending = sending,
                                .mode = mode,
                                .file = file,
                                .conns = conns,
                                .n = n,
                                .block = transfer_block(opts, sending),
                                .live = opts->live};
        if (n < 1 || n > XFTP_MODEE_MAX_STREAMS || (mode == XFTP_XFER_STREAM && n != 1))
                return ds_fail(err, -EINVAL, "%u data connections in MODE %c", n,
                               mode == XFTP_XFER_STREAM ? 'S' : 'E');
        for (unsigned i = 0; i < n; i++) {
                /* A backend without a socket waits in slices of its own (xconn.h). */
                int rc = conns[i].fd >= 0 ? set_slices(conns[i].fd) : 0;
                if (rc < 0)
                        return ds_fail(err, rc, "data socket timeouts");
        }
        pthread_mutex_init(&pl->lock, NULL);
        pthread_cond_init(&pl->changed, NULL);
        int rc = 0;
        const struct ds_pool *lent = opts->pool;
        if (buffers && lent && ds_pool_count(lent) >= depth && ds_pool_buf_size(lent) >= pl->block)
                pl->pool = opts->pool, pl->pool_lent = true;
        else if (buffers) /* lazy: a small file uses a page or two of depth x block bytes */
                rc = ds_pool_create(&pl->pool, pl->block, depth, DS_POOL_LAZY, err);
        if (rc < 0) {
                pipeline_free(pl);
                return rc;
        }
        pl->free_bufs = calloc(depth, sizeof(void *));
        pl->to_disk = (struct queue){.items = calloc(depth, sizeof(struct piece)), .cap = depth};
        bool ok = pl->free_bufs && pl->to_disk.items;
        for (unsigned i = 0; i < n; i++) {
                /* room for every buffer and the end marker */
                pl->to_net[i] = (struct queue){.items = calloc(depth + 1, sizeof(struct piece)),
                                               .cap = depth + 1};
                ok = ok && pl->to_net[i].items;
        }
        if (!ok) {
                pipeline_free(pl);
                return ds_fail(err, -ENOMEM, "pipeline queues");
        }
        for (unsigned i = 0; buffers && i < depth; i++)
                pl->free_bufs[pl->free_count++] = ds_pool_buf(pl->pool, i);
        open_slots(pl);
        atomic_store(&pl->last_progress_ns, ds_now_ns());
        if (opts->pace) { /* a page at least, a block at most */
                uint64_t chunk = ds_pace_bytes_in(opts->pace, SLICE_MS);
                uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
                pl->pace_chunk = (size_t)(chunk < page        ? page
                                          : chunk > pl->block ? pl->block
                                                              : chunk);
        }
        return 0;
}

static int start_threads(struct pipeline *pl, struct net_thread *threads, void *(*fn)(void *),
                         unsigned *started, struct ds_error *err)
{
        for (*started = 0; *started < pl->n; (*started)++) {
                threads[*started] = (struct net_thread){.pl = pl, .index = *started};
                int rc = pthread_create(&threads[*started].thread, NULL, fn, &threads[*started]);
                if (rc != 0)
                        return fail(pl, ds_fail(err, -rc, "data thread"), err);
        }
        return 0;
}

/* Joins the network threads, times the transfer, and returns the pipeline's first failure
 * (its message in err) or rc. */
static int finish(struct pipeline *pl, struct net_thread *threads, unsigned started,
                  uint64_t start_ns, struct xftp_xfer_result *result, int rc, struct ds_error *err)
{
        for (unsigned i = 0; i < started; i++)
                pthread_join(threads[i].thread, NULL);
        if (pl->sending) {
                result->bytes += atomic_load(&pl->sent_bytes);
                result->blocks += atomic_load(&pl->sent_blocks);
        }
        result->file_failed = pl->failed != 0 && pl->file_failed;
        result->seconds = ds_seconds_between(start_ns, ds_now_ns());
        result->mb_per_s = result->seconds > 0 ? (double)result->bytes / result->seconds / 1e6 : 0;
        if (pl->failed) {
                *err = pl->err;
                return pl->failed;
        }
        return rc;
}

static void flight_init(struct pipeline *pl, struct flight *f)
{
        *f = (struct flight){.cap = pl->file->ops->start_io ? AHEAD : 1};
}

/* Starts piece's read or write: by start_io where the file has it, else done at once and
 * its result kept for flight_finish. Returns 0 or a negative errno. */
static int flight_start(struct pipeline *pl, struct flight *f, bool write, struct piece piece)
{
        const struct xftp_xfile_ops *ops = pl->file->ops;
        unsigned at = (f->head + f->count) % AHEAD;

        if (ops->start_io) {
                int ticket = ops->start_io(pl->file, write, piece.buf, piece.len, piece.offset);
                if (ticket < 0)
                        return ticket;
                f->tickets[at] = ticket;
        } else {
                f->results[at] = write ? ops->write_at(pl->file, piece.buf, piece.len, piece.offset)
                                       : ops->read_at(pl->file, piece.buf, piece.len, piece.offset);
        }
        f->pieces[at] = piece;
        f->count++;
        return 0;
}

/* Finishes the oldest piece in flight: fills piece, returns what read_at or write_at would
 * have. */
static ssize_t flight_finish(struct pipeline *pl, struct flight *f, struct piece *piece)
{
        unsigned at = f->head;
        ssize_t result = pl->file->ops->start_io
                             ? pl->file->ops->finish_io(pl->file, f->tickets[at])
                             : f->results[at];

        *piece = f->pieces[at];
        f->head = (f->head + 1) % AHEAD;
        f->count--;
        return result;
}

/* After a failure: waits out what is still in flight, so no buffer is in a disk's hands
 * when the pool goes. */
static void flight_drain(struct pipeline *pl, struct flight *f)
{
        while (f->count > 0) {
                struct piece piece;
                flight_finish(pl, f, &piece);
                piece_done(pl, &piece);
        }
}

/* A buffer for a piece to be read and sent by connection piece->to: one that connection
 * lends where it can (the piece is then sent from where it was read), else the pool's.
 * With wait, until one is free (in slices that a stop or a failure ends); without, NULL
 * when none is now. Returns 0 or a negative errno. */
static int take_send_buffer(struct pipeline *pl, bool wait, struct piece *piece,
                            struct ds_error *err)
{
        struct xftp_conn *conn = &pl->conns[piece->to];
        int rc;
        /* A lent buffer goes whole, as a block's payload: not in MODE S, nor paced (whose
         * sends go in pieces, send_some). */
        if (conn->ops->take_buf && pl->mode == XFTP_XFER_BLOCKS && !pl->pace_chunk) {
                for (;;) {
                        rc =
                            conn->ops->take_buf(conn, piece->len, wait ? SLICE_MS : 0, &piece->buf);
                        if (rc == 0) {
                                piece->lender = conn;
                                return 0;
                        }
                        if (rc == -EMSGSIZE)
                                break; /* larger than its buffers: the pool's */
                        if (rc != -EAGAIN)
                                return ds_fail(err, rc, "data connection buffers");
                        if (!wait) {
                                piece->buf = NULL;
                                return 0;
                        }
                        if ((rc = check_wait(pl, err)) < 0)
                                return rc;
                }
        }
        rc = 0;
        piece->buf = wait ? take_free(pl, err, &rc) : try_take_free(pl);
        return rc;
}

/* Starts reads of the range's next pieces, each dealt to the next connection in turn
 * (*dealt counts them), while the flight has room and buffers are free (waiting for one
 * only when nothing is in flight). Returns 0 or a negative errno. */
static int start_reads(struct pipeline *pl, struct flight *f, uint64_t *at, uint64_t *left,
                       unsigned *dealt, struct ds_error *err)
{
        while (*left > 0 && f->count < f->cap) {
                struct piece piece = {.len = *left < pl->block ? (size_t)*left : pl->block,
                                      .offset = *at,
                                      .to = *dealt % pl->n};
                int rc = take_send_buffer(pl, f->count == 0, &piece, err);
                if (rc < 0 || !piece.buf)
                        return rc;
                rc = flight_start(pl, f, false, piece);
                if (rc < 0) {
                        piece_done(pl, &piece);
                        return fail_io(pl, rc, false, *at, err);
                }
                *at += piece.len;
                *left -= piece.len;
                (*dealt)++;
        }
        return 0;
}

/* The disk side of sending: reads the range into buffers, deals them to the connections in
 * turn, then an end marker to each. */
static int read_side(struct pipeline *pl, struct ds_error *err)
{
        uint64_t at = pl->opts->offset, left = pl->opts->length;
        unsigned dealt = 0;
        struct flight f;
        int rc = 0;

        flight_init(pl, &f);
        for (;;) {
                rc = start_reads(pl, &f, &at, &left, &dealt, err);
                if (rc < 0 || f.count == 0)
                        break;
                struct piece piece;
                ssize_t got = flight_finish(pl, &f, &piece);
                if (got <= 0) {
                        piece_done(pl, &piece);
                        if (got < 0)
                                rc = fail_io(pl, (int)got, false, piece.offset, err);
                        break;
                }
                bool short_read = (size_t)got < piece.len;
                piece.len = (size_t)got;
                rc = push_piece(pl, &pl->to_net[piece.to], piece, err);
                if (rc < 0) {
                        piece_done(pl, &piece);
                        break;
                }
                if (short_read)
                        break; /* the end of the file: what is in flight read past it */
        }
        flight_drain(pl, &f);
        for (unsigned i = 0; i < pl->n && rc == 0; i++)
                rc = push_piece(pl, &pl->to_net[i], (struct piece){.end = true}, err);
        return rc;
}

/* Whether a sendfile's errno is its connection's: a slice or a signal (EAGAIN, EINTR), a
 * peer or a path gone, or TLS (EPROTO). Any other is the file's read: sendfile(2)'s EIO,
 * EOVERFLOW, ENOMEM, and whatever else a file system says (EUCLEAN, EBADMSG for a bad
 * checksum, ESTALE), as a read() into buffers would. */
static bool connection_errno(ssize_t rc)
{
        switch (-rc) {
        case EAGAIN:
        case EINTR:
        case EPIPE:
        case ECONNRESET:
        case ECONNABORTED:
        case ENOTCONN:
        case ESHUTDOWN:
        case ETIMEDOUT:
        case EHOSTUNREACH:
        case EHOSTDOWN:
        case ENETUNREACH:
        case ENETDOWN:
        case ENETRESET:
        case ENOBUFS:
        case EPROTO:
                return true;
        default:
                return false;
        }
}

/* MODE S from a plain descriptor: the kernel moves page-cache pages to the socket, with
 * no copy into user space. Sending 1 GiB to xftpd it cost the sender 0.14-0.15 s of
 * system time against 0.26-0.29 s for reads into pool buffers and send(). */
static int send_by_sendfile(struct pipeline *pl, struct xftp_xfer_result *result,
                            struct ds_error *err)
{
        off_t at = (off_t)pl->opts->offset;
        uint64_t left = pl->opts->length;
        struct xftp_conn *conn = &pl->conns[0];

        posix_fadvise(pl->file->fd, at, 0, POSIX_FADV_SEQUENTIAL);
        result->sendfile = true;
        while (left > 0) {
                size_t want = left < pl->block ? (size_t)left : pl->block;
                if (pl->pace_chunk && want > pl->pace_chunk)
                        want = pl->pace_chunk;
                ssize_t sent = conn->ops->sendfile(conn, pl->file->fd, &at, want);
                if (sent == 0)
                        break; /* the end of the file */
                if (sent < 0 && !connection_errno(sent))
                        return fail_io(pl, (int)sent, false, (uint64_t)at, err);
                if (sent < 0) {
                        char what[64];
                        snprintf(what, sizeof(what), "sending the file at byte %llu",
                                 (unsigned long long)at);
                        int rc = retry_or_fail(pl, sent, what, err);
                        if (rc < 0)
                                return rc;
                        continue;
                }
                progress(pl);
                count(pl, 0, (size_t)sent);
                result->bytes += (uint64_t)sent;
                result->blocks++;
                left -= (uint64_t)sent;
                int rc = pace(pl, (size_t)sent, err);
                if (rc == 0)
                        rc = check_wait(pl, err);
                if (rc < 0)
                        return rc;
        }
        return 0;
}

static int use_sendfile(const struct xftp_xfile *file, enum xftp_xfer_mode mode,
                        const struct xftp_xfer_opts *opts)
{
        return mode == XFTP_XFER_STREAM && file->fd >= 0 && !(opts->flags & XFTP_XFER_NO_SENDFILE);
}

uint64_t xftp_xfer_buffer_bytes(const struct xftp_xfile *file, enum xftp_xfer_mode mode, unsigned n,
                                const struct xftp_xfer_opts *opts, bool sending)
{
        if (sending && use_sendfile(file, mode, opts))
                return 0;
        /* The pool's buffers are whole pages (pool.c): budgeted as if all were touched. */
        uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
        uint64_t block = transfer_block(opts, sending);
        if (opts->pool && ds_pool_count(opts->pool) >= pipeline_depth(opts, n) &&
            ds_pool_buf_size(opts->pool) >= block)
                return 0; /* the lent pool serves: nothing more is mapped */
        return (uint64_t)pipeline_depth(opts, n) * ((block + page - 1) / page * page);
}

/* Whether what is to be sent or received is known to fit in one buffer: the transfer
 * then runs in the caller's thread (a one-piece send's read and end marker wait for no
 * sender, in queues deeper than two). */
static bool one_piece(const struct pipeline *pl, bool sending)
{
        return range_bytes(pl->opts, sending) <= pl->block &&
               (!sending || pipeline_depth(pl->opts, pl->n) >= 2);
}

int xftp_xfer_send_conns(struct xftp_xfile *file, enum xftp_xfer_mode mode, struct xftp_conn *conns,
                         unsigned n, const struct xftp_xfer_opts *opts,
                         struct xftp_xfer_result *result, struct ds_error *err)
{
        struct pipeline pl;
        struct net_thread threads[XFTP_MODEE_MAX_STREAMS];
        unsigned started = 0;
        uint64_t start_ns = ds_now_ns();

        *result = (struct xftp_xfer_result){0};
        bool by_sendfile = use_sendfile(file, mode, opts) && n == 1 && conns[0].ops->sendfile;
        int rc = pipeline_init(&pl, file, mode, conns, n, opts, true, !by_sendfile, err);
        if (rc < 0)
                return rc;
        if (by_sendfile) {
                rc = send_by_sendfile(&pl, result, err);
        } else if (n == 1 && one_piece(&pl, true)) {
                /* A small file: read, then sent from this thread. A thread of its own would
                 * cost more than the overlap of disk and network it buys for one piece (a
                 * tree's files each paid a clone and its wake-ups). */
                threads[0] = (struct net_thread){.pl = &pl, .index = 0};
                rc = read_side(&pl, err);
                if (rc == 0)
                        send_thread(&threads[0]);
                else if (rc != -ECANCELED)
                        fail(&pl, rc, err);
        } else {
                rc = start_threads(&pl, threads, send_thread, &started, err);
                if (rc == 0)
                        rc = read_side(&pl, err);
                if (rc < 0 && rc != -ECANCELED)
                        fail(&pl, rc, err);
        }
        rc = finish(&pl, threads, started, start_ns, result, rc, err);
        result->kept = rc == 0 && mode == XFTP_XFER_BLOCKS && (opts->flags & XFTP_XFER_KEEP);
        pipeline_free(&pl);
        return rc;
}

/* Counts a piece written and advances the prefix. Returns 0 or a negative errno. */
static int written(struct pipeline *pl, struct xftp_ranges *arrived, const struct piece *piece,
                   struct xftp_xfer_result *result, struct ds_error *err)
{
        const struct xftp_xfer_opts *o = pl->opts;

        progress(pl);
        result->bytes += piece->len;
        result->blocks++;
        /* Each block is checked against [offset, limit) alone: a sender that sends one block
         * over and over stays inside it forever, and only the count of bytes ends it. */
        if (o->limit != UINT64_MAX && o->limit >= o->offset && result->bytes > o->limit - o->offset)
                return ds_fail(err, 0, "more bytes than the range holds: blocks sent twice"),
                       -EFBIG;
        if (xftp_ranges_add(arrived, piece->offset, piece->offset + piece->len) < 0)
                return ds_fail(err, 0, "blocks scattered over more than %u ranges", RANGES_MAX),
                       -EPROTO;
        if (arrived->prefix != result->prefix_end) {
                result->prefix_end = arrived->prefix;
                int rc = o->on_prefix ? o->on_prefix(result->prefix_end, o->prefix_ctx) : 0;
                if (rc < 0)
                        return fail_file(pl,
                                         ds_fail(err, rc, "fdatasync before the resume point %llu",
                                                 (unsigned long long)result->prefix_end),
                                         err);
        }
        return 0;
}

/* A piece received: to the disk side, or written here when receiving inline. On failure
 * the buffer is still the caller's. */
static int deliver(struct pipeline *pl, struct piece piece, struct ds_error *err)
{
        if (!pl->inline_write)
                return push_piece(pl, &pl->to_disk, piece, err);
        int rc = pl->file->ops->write_at(pl->file, piece.buf, piece.len, piece.offset);
        if (rc < 0)
                return fail_io(pl, rc, true, piece.offset, err);
        rc = written(pl, pl->arrived, &piece, pl->result, err);
        if (rc == 0)
                piece_done(pl, &piece);
        return rc;
}

/* The disk side of receiving: writes each piece at its offset until every network thread
 * is done, keeping up to the window's pieces in flight while more are queued. */
static int write_side(struct pipeline *pl, struct xftp_ranges *arrived,
                      struct xftp_xfer_result *result, struct ds_error *err)
{
        struct flight f;
        int rc = 0;

        result->prefix_end = pl->opts->offset;
        flight_init(pl, &f);
        for (;;) {
                struct piece piece = {0};
                /* Block for the network only when no write is in flight. */
                bool got = f.count > 0 ? try_pop_piece(pl, &pl->to_disk, &piece)
                                       : (rc = pop_piece(pl, &pl->to_disk, true, &piece, err)) == 0;
                if (f.count == 0 && !got)
                        return rc == -ENODATA ? 0 : rc;
                if (got) {
                        rc = flight_start(pl, &f, true, piece);
                        if (rc < 0) {
                                piece_done(pl, &piece);
                                rc = fail_io(pl, rc, true, piece.offset, err);
                                break;
                        }
                        if (f.count < f.cap)
                                continue;
                }
                ssize_t wrc = flight_finish(pl, &f, &piece);
                piece_done(pl, &piece);
                if (wrc < 0) {
                        rc = fail_io(pl, (int)wrc, true, piece.offset, err);
                        break;
                }
                rc = written(pl, arrived, &piece, result, err);
                if (rc < 0)
                        break;
        }
        flight_drain(pl, &f);
        return rc;
}

/* After the sender ended well: MODE E must have sent its EOF, and its blocks must cover
 * every byte from the first up to the last they hold (a file with a hole is not the file
 * sent). Returns 0 or a negative errno with err filled. */
static int check_end(const struct pipeline *pl, const struct xftp_ranges *arrived,
                     struct ds_error *err)
{
        uint64_t gap_start, gap_end;

        if (pl->mode != XFTP_XFER_BLOCKS)
                return 0;
        if (!xftp_modee_end_done(&pl->end))
                return ds_fail(err, 0, "the sender ended without EOF"), -EPIPE;
        if (!xftp_ranges_whole(arrived, &gap_start, &gap_end))
                return ds_fail(err, 0, "the blocks sent leave bytes %llu to %llu out",
                               (unsigned long long)gap_start, (unsigned long long)gap_end),
                       -EPROTO;
        return 0;
}

int xftp_xfer_recv_conns(struct xftp_xfile *file, enum xftp_xfer_mode mode, struct xftp_conn *conns,
                         unsigned n, const struct xftp_xfer_opts *opts,
                         struct xftp_xfer_result *result, struct ds_error *err)
{
        struct pipeline pl;
        struct net_thread threads[XFTP_MODEE_MAX_STREAMS];
        unsigned started = 0;
        uint64_t start_ns = ds_now_ns();
        struct xftp_ranges arrived;

        *result = (struct xftp_xfer_result){.prefix_end = opts->offset};
        /* Once per transfer, never per block. */
        struct xftp_range *slots = calloc(RANGES_MAX, sizeof(*slots));
        if (!slots)
                return ds_fail(err, -ENOMEM, "receive ranges");
        xftp_ranges_init(&arrived, opts->offset, slots, RANGES_MAX);
        int rc = pipeline_init(&pl, file, mode, conns, n, opts, false, true, err);
        if (rc < 0) {
                free(slots);
                return rc;
        }
        pl.net_running = n;
        pl.arrived = &arrived;
        pl.result = result;
        pl.stream_at = opts->offset;
        bool ended = false;
        if (n == 1 && !file->ops->start_io && one_piece(&pl, false)) {
                /* A small file of a known size: received and written by this thread, as a
                 * one-piece send is sent (no thread, no hand-over per file). */
                pl.inline_write = true;
                threads[0] = (struct net_thread){.pl = &pl, .index = 0};
                recv_thread(&threads[0]);
        } else {
                /* A MODE S stream of unknown size is most often a small file of a tree (a
                 * standard client's upload): its first piece comes in this thread, and when
                 * the stream ends within it, it is written here as well. A longer stream
                 * goes on in the pipeline, that piece first in the disk side's queue. */
                if (n == 1 && mode != XFTP_XFER_BLOCKS && !file->ops->start_io)
                        rc = stream_piece(&pl, 0, true, &ended, err);
                if (rc == 0 && !ended)
                        rc = start_threads(&pl, threads, recv_thread, &started, err);
                if (rc < 0) {
                        pthread_mutex_lock(&pl.lock);
                        pl.net_running = started;
                        pthread_mutex_unlock(&pl.lock);
                }
                if (rc == 0 && !ended)
                        rc = write_side(&pl, &arrived, result, err);
        }
        if (rc < 0 && rc != -ECANCELED)
                fail(&pl, rc, err);
        rc = finish(&pl, threads, started, start_ns, result, rc, err);
        if (rc == 0)
                rc = check_end(&pl, &arrived, err);
        result->kept = rc == 0 && mode == XFTP_XFER_BLOCKS && !atomic_load(&pl.closing);
        pipeline_free(&pl);
        free(slots);
        return rc;
}

/* Plain sockets: each is wrapped in the tcp backend for the call, and stays the caller's. */
static int wrap_plain(const int *socks, unsigned n, struct xftp_conn *conns, struct ds_error *err)
{
        if (n > XFTP_MODEE_MAX_STREAMS)
                return ds_fail(err, -EINVAL, "%u data connections", n);
        for (unsigned i = 0; i < n; i++)
                xftp_conn_plain(&conns[i], socks[i]);
        return 0;
}

int xftp_xfer_send(struct xftp_xfile *file, enum xftp_xfer_mode mode, const int *socks, unsigned n,
                   const struct xftp_xfer_opts *opts, struct xftp_xfer_result *result,
                   struct ds_error *err)
{
        struct xftp_conn conns[XFTP_MODEE_MAX_STREAMS];
        int rc = wrap_plain(socks, n, conns, err);
        return rc < 0 ? rc : xftp_xfer_send_conns(file, mode, conns, n, opts, result, err);
}

int xftp_xfer_recv(struct xftp_xfile *file, enum xftp_xfer_mode mode, const int *socks, unsigned n,
                   const struct xftp_xfer_opts *opts, struct xftp_xfer_result *result,
                   struct ds_error *err)
{
        struct xftp_conn conns[XFTP_MODEE_MAX_STREAMS];
        int rc = wrap_plain(socks, n, conns, err);
        return rc < 0 ? rc : xftp_xfer_recv_conns(file, mode, conns, n, opts, result, err);
}
