/* The I/O engine: one worker thread per member, each with a queue of pieces, so that a
 * submit spanning several units keeps every member's disk busy at once.
 *
 * Threads rather than io_uring: a worker doing synchronous 1 MiB O_DIRECT pieces keeps a
 * disk as busy as dd does, the block layer splits and queues each piece itself, and the
 * submitter overlaps its own work (reading the source, checksums) with the workers'. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dragstrip/live.h>

#include "stripe_int.h"

static const char *member_name(const struct stripe_member *m)
{
        return m->tmp_path ? m->tmp_path : m->path;
}

/* One system call moves at most this much, so a stop waits for no more than one such
 * chunk per member (160 ms on a 50 MB/s disk) whatever the unit. */
#define CHUNK_MAX (8u << 20)

static bool direct_ok(const uint8_t *buf, size_t len, uint64_t pos)
{
        return ((uintptr_t)buf % DS_STRIPE_MIN_UNIT) == 0 && len % DS_STRIPE_MIN_UNIT == 0 &&
               pos % DS_STRIPE_MIN_UNIT == 0;
}

/* Moves one piece. A read that meets the end of a member is an error for a file opened
 * read-only (open checked every member's length, so the member has shrunk since) and reads
 * as zeros for a file being written (members are cut to length only at fsync/close). */
static int member_io(struct stripe_member *m, const struct stripe_request *req,
                     struct ds_error *err)
{
        uint64_t pos = DS_STRIPE_HEADER_SIZE + req->data_offset;
        size_t done = 0;

        if (m->stripe->stop && atomic_load(m->stripe->stop))
                return ds_fail(err, -EINTR, "member %u: interrupted", m->index);
        while (done < req->len) {
                uint8_t *at = req->buf + done;
                size_t left = req->len - done < CHUNK_MAX ? req->len - done : CHUNK_MAX;
                bool direct = m->fd_direct >= 0 && direct_ok(at, left, pos + done);
                int fd = direct ? m->fd_direct : m->fd;
                ssize_t n = req->write ? pwrite(fd, at, left, (off_t)(pos + done))
                                       : pread(fd, at, left, (off_t)(pos + done));
                if (n < 0 && errno == EINVAL && direct)
                        n = req->write ? pwrite(m->fd, at, left, (off_t)(pos + done))
                                       : pread(m->fd, at, left, (off_t)(pos + done));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return ds_fail(err, -errno, "member %u (%s): %s at data byte %llu",
                                       m->index, member_name(m), req->write ? "write" : "read",
                                       (unsigned long long)(req->data_offset + done));
                if (n == 0 && req->write)
                        return ds_fail(err, -EIO, "member %u (%s): write made no progress",
                                       m->index, member_name(m));
                if (n == 0 && !m->stripe->writable)
                        return stripe_reject(
                            err, -EIO,
                            "member %u (%s): data ends at byte %llu but the layout "
                            "says it holds more (member truncated)",
                            m->index, member_name(m),
                            (unsigned long long)(req->data_offset + done));
                if (n == 0) {
                        memset(at, 0, req->len - done);
                        break;
                }
                done += (size_t)n;
                if (done < req->len && m->stripe->stop && atomic_load(m->stripe->stop))
                        return ds_fail(err, -EINTR, "member %u: interrupted", m->index);
        }
        return 0;
}

static void complete(struct ds_stripe *stripe, struct stripe_slot *slot, int rc,
                     const struct ds_error *err)
{
        pthread_mutex_lock(&stripe->done_lock);
        if (rc != 0 && slot->error == 0) {
                slot->error = rc;
                slot->err = *err;
        }
        if (--slot->pending == 0)
                pthread_cond_broadcast(&stripe->done_cond);
        pthread_mutex_unlock(&stripe->done_lock);
}

/* Takes the next request off q, or returns false once q is stopped and empty. */
static bool dequeue(struct member_queue *q, struct stripe_request *req)
{
        pthread_mutex_lock(&q->lock);
        while (q->count == 0 && !q->stop)
                pthread_cond_wait(&q->not_empty, &q->lock);
        if (q->count == 0) {
                pthread_mutex_unlock(&q->lock);
                return false;
        }
        *req = q->items[q->head];
        q->head = (q->head + 1) % QUEUE_CAP;
        q->count--;
        pthread_cond_signal(&q->not_full);
        pthread_mutex_unlock(&q->lock);
        return true;
}

static void enqueue(struct member_queue *q, const struct stripe_request *req)
{
        pthread_mutex_lock(&q->lock);
        while (q->count == QUEUE_CAP)
                pthread_cond_wait(&q->not_full, &q->lock);
        q->items[(q->head + q->count) % QUEUE_CAP] = *req;
        q->count++;
        pthread_cond_signal(&q->not_empty);
        pthread_mutex_unlock(&q->lock);
}

static int member_sync(struct stripe_member *m, bool dir, struct ds_error *err)
{
        if (fsync(m->fd) != 0)
                return ds_fail(err, -errno, "member %u (%s): fsync", m->index, member_name(m));
        return dir ? stripe_sync_dir_of(member_name(m), err) : 0;
}

static void *member_worker(void *arg)
{
        struct stripe_member *m = arg;
        struct stripe_request req;
        /* This disk's own counters for tach, beside the file's totals. */
        struct ds_live_slot *disk =
            m->stripe->live ? ds_live_slot_open(m->stripe->live, DS_SLOT_DISK, m->index, m->path)
                            : NULL;

        while (dequeue(&m->queue, &req)) {
                struct ds_error err;
                int rc = req.sync ? member_sync(m, req.sync == SYNC_FILE_AND_DIR, &err)
                                  : member_io(m, &req, &err);

                if (rc == 0 && m->stripe->live && !req.sync)
                        ds_live_stream_add(m->stripe->live, disk, 1, req.len);
                if (rc == 0 && m->checker_running && !req.sync)
                        enqueue(&m->checks, &req);
                else
                        complete(m->stripe, req.slot, rc, &err);
        }
        ds_live_slot_close(disk);
        return NULL;
}

/* Extends a member's running checksum with a piece that continues it; any other piece
 * (a gap left by a failed one, or a rewrite of bytes already counted) means the checksum
 * no longer describes the data, except a re-read of bytes already counted, which changes
 * nothing. */
static void data_crc_add(struct data_crc *crc, const struct stripe_request *req)
{
        if (!crc->ok)
                return;
        if (req->data_offset == crc->next) {
                crc->crc = ds_crc32c(crc->crc, req->buf, req->len);
                crc->next += req->len;
        } else if (req->write || req->data_offset > crc->next) {
                crc->ok = false;
        }
}

static void *member_checker(void *arg)
{
        struct stripe_member *m = arg;
        struct stripe_request req;

        while (dequeue(&m->checks, &req)) {
                data_crc_add(req.write ? &m->written : &m->read, &req);
                complete(m->stripe, req.slot, 0, NULL);
        }
        return NULL;
}

static void queue_init(struct member_queue *q)
{
        memset(q, 0, sizeof(*q));
        pthread_mutex_init(&q->lock, NULL);
        pthread_cond_init(&q->not_empty, NULL);
        pthread_cond_init(&q->not_full, NULL);
}

static void queue_stop(struct member_queue *q, pthread_t thread)
{
        pthread_mutex_lock(&q->lock);
        q->stop = true;
        pthread_cond_signal(&q->not_empty);
        pthread_mutex_unlock(&q->lock);
        pthread_join(thread, NULL);
        pthread_mutex_destroy(&q->lock);
        pthread_cond_destroy(&q->not_empty);
        pthread_cond_destroy(&q->not_full);
}

int stripe_engine_start(struct ds_stripe *stripe, struct ds_error *err)
{
        for (unsigned i = 0; i < stripe->width; i++) {
                struct stripe_member *m = &stripe->members[i];
                int rc;

                if (stripe->checksums) {
                        queue_init(&m->checks);
                        rc = pthread_create(&m->checker, NULL, member_checker, m);
                        if (rc != 0) {
                                stripe_engine_stop(stripe);
                                return ds_fail(err, -rc, "start checker for member %u", i);
                        }
                        m->checker_running = true;
                }
                queue_init(&m->queue);
                rc = pthread_create(&m->worker, NULL, member_worker, m);
                if (rc != 0) {
                        stripe_engine_stop(stripe);
                        return ds_fail(err, -rc, "start worker for member %u", i);
                }
                m->worker_running = true;
        }
        stripe->engine_running = true;
        return 0;
}

/* Workers first: what they still hand on reaches a checker that is still running. */
void stripe_engine_stop(struct ds_stripe *stripe)
{
        for (unsigned i = 0; i < stripe->width; i++) {
                struct stripe_member *m = &stripe->members[i];
                if (m->worker_running)
                        queue_stop(&m->queue, m->worker);
                m->worker_running = false;
        }
        for (unsigned i = 0; i < stripe->width; i++) {
                struct stripe_member *m = &stripe->members[i];
                if (m->checker_running)
                        queue_stop(&m->checks, m->checker);
                m->checker_running = false;
        }
        stripe->engine_running = false;
}

void data_crc_reset(struct data_crc *crc)
{
        crc->next = 0;
        crc->crc = 0;
        crc->ok = true;
}

/* A free slot's ticket, with the engine running; -EBUSY when every slot is in flight. */
static int take_slot(struct ds_stripe *stripe, struct ds_error *err)
{
        int rc;

        for (int ticket = 0; ticket < (int)stripe->depth; ticket++) {
                if (stripe->slots[ticket].busy)
                        continue;
                if (!stripe->engine_running && (rc = stripe_engine_start(stripe, err)) != 0)
                        return rc;
                return ticket;
        }
        return stripe_reject(err, -EBUSY, "all %u submits are in flight; wait for one",
                             stripe->depth);
}

int stripe_sync_all(struct ds_stripe *stripe, enum stripe_sync what, struct ds_error *err)
{
        int ticket = take_slot(stripe, err);
        struct stripe_slot *slot;

        if (ticket < 0)
                return ticket;
        slot = &stripe->slots[ticket];
        *slot = (struct stripe_slot){.busy = true, .pending = stripe->width};
        for (unsigned i = 0; i < stripe->width; i++) {
                struct stripe_request req = {.slot = slot, .sync = (uint8_t)what};
                enqueue(&stripe->members[i].queue, &req);
        }
        return ds_stripe_wait(stripe, ticket, NULL, err);
}

static int submit(struct ds_stripe *stripe, bool write, uint8_t *buf, size_t len, uint64_t offset,
                  struct ds_error *err)
{
        struct stripe_slot *slot = NULL;
        unsigned pieces = 0;
        int ticket;

        if (write && !stripe->writable)
                return stripe_reject(err, -EBADF, "the striped file is open read-only");
        if (offset > DS_STRIPE_MAX_SIZE || len > DS_STRIPE_MAX_SIZE - offset)
                return stripe_reject(err, -EFBIG, "offset %llu + %zu is beyond the largest file",
                                     (unsigned long long)offset, len);
        if ((ticket = take_slot(stripe, err)) < 0)
                return ticket;
        slot = &stripe->slots[ticket];
        if (!write)
                len = offset >= stripe->size
                          ? 0
                          : (size_t)(stripe->size - offset < len ? stripe->size - offset : len);
        for (uint64_t at = 0; at < len; pieces++)
                at += ds_stripe_layout_piece(&stripe->layout, offset + at, len - at).length;

        *slot = (struct stripe_slot){.busy = true,
                                     .write = write,
                                     .buf = buf,
                                     .len = len,
                                     .offset = offset,
                                     .pending = pieces};
        for (uint64_t at = 0; at < len;) {
                struct ds_stripe_piece piece =
                    ds_stripe_layout_piece(&stripe->layout, offset + at, len - at);
                struct stripe_member *m = &stripe->members[piece.member];
                struct stripe_request req = {.slot = slot,
                                             .buf = buf + at,
                                             .len = piece.length,
                                             .data_offset = piece.data_offset,
                                             .write = write};
                if (write && !stripe->checksums)
                        m->written.ok = false;
                enqueue(&m->queue, &req);
                at += piece.length;
        }
        if (write && len > 0) {
                if (offset + len > stripe->size)
                        stripe->size = offset + len;
                stripe->dirty = true;
        }
        return ticket;
}

int ds_stripe_submit_read(struct ds_stripe *stripe, void *buf, size_t len, uint64_t offset,
                          struct ds_error *err)
{
        return submit(stripe, false, buf, len, offset, err);
}

/* The buffer is only read: the cast serves the shared request type. */
int ds_stripe_submit_write(struct ds_stripe *stripe, const void *buf, size_t len, uint64_t offset,
                           struct ds_error *err)
{
        return submit(stripe, true, (uint8_t *)(uintptr_t)buf, len, offset, err);
}

int ds_stripe_wait(struct ds_stripe *stripe, int ticket, size_t *done, struct ds_error *err)
{
        struct stripe_slot *slot;
        int rc;

        if (ticket < 0 || ticket >= (int)stripe->depth || !stripe->slots[ticket].busy)
                return stripe_reject(err, -EINVAL, "no submit in flight with ticket %d", ticket);
        slot = &stripe->slots[ticket];
        pthread_mutex_lock(&stripe->done_lock);
        while (slot->pending > 0)
                pthread_cond_wait(&stripe->done_cond, &stripe->done_lock);
        pthread_mutex_unlock(&stripe->done_lock);
        slot->busy = false;
        rc = slot->error;
        if (rc != 0) {
                if (err)
                        *err = slot->err;
                return rc;
        }
        if (done)
                *done = slot->len;
        return 0;
}

int stripe_drain(struct ds_stripe *stripe, struct ds_error *err)
{
        int first = 0;

        for (unsigned i = 0; i < stripe->depth; i++) {
                struct ds_error slot_err;
                int rc;

                if (!stripe->slots[i].busy)
                        continue;
                rc = ds_stripe_wait(stripe, (int)i, NULL, &slot_err);
                if (rc != 0 && first == 0) {
                        first = rc;
                        if (err)
                                *err = slot_err;
                }
        }
        return first;
}

int ds_stripe_pread(struct ds_stripe *stripe, void *buf, size_t len, uint64_t offset, size_t *done,
                    struct ds_error *err)
{
        int ticket = ds_stripe_submit_read(stripe, buf, len, offset, err);

        return ticket < 0 ? ticket : ds_stripe_wait(stripe, ticket, done, err);
}

int ds_stripe_pwrite(struct ds_stripe *stripe, const void *buf, size_t len, uint64_t offset,
                     struct ds_error *err)
{
        int ticket = ds_stripe_submit_write(stripe, buf, len, offset, err);

        return ticket < 0 ? ticket : ds_stripe_wait(stripe, ticket, NULL, err);
}

int ds_stripe_check_data(const struct ds_stripe *stripe, struct ds_error *err)
{
        for (unsigned i = 0; i < stripe->width; i++) {
                const struct stripe_member *m = &stripe->members[i];
                uint64_t bytes = ds_stripe_member_bytes(&stripe->layout, i, stripe->size);

                if (!(m->header.flags & DS_STRIPE_DATA_CRC) || !stripe->checksums)
                        return stripe_reject(err, -ENODATA,
                                             "member %u (%s) carries no data checksum", i,
                                             member_name(m));
                if (!m->read.ok || m->read.next != bytes)
                        return stripe_reject(err, -ENODATA,
                                             "member %u (%s) was not read whole and in order", i,
                                             member_name(m));
                if (m->read.crc != m->header.data_crc)
                        return stripe_reject(err, -EIO,
                                             "member %u (%s): data checksum mismatch (read %08x, "
                                             "header says %08x): the member's data is corrupt",
                                             i, member_name(m), m->read.crc, m->header.data_crc);
        }
        return 0;
}
