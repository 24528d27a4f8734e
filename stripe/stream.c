/* Whole-file streams through pool buffers: the pipeline behind put, get, verify and bench.
 * Every buffer is in flight at once, so while the caller fills or drains one the workers
 * keep every member busy with the others. Tickets are waited for in submit order, which
 * keeps each member's running checksum in order. */
#include <errno.h>
#include <unistd.h>

#include <dragstrip/pool.h>

#include "stripe_int.h"

#define BUDGET_MAX (256ull << 20) /* 4 buffers of 64 MiB: far past what keeps disks busy */
#define BUDGET_MIN (16ull << 20)

uint64_t ds_stripe_default_budget(void)
{
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        uint64_t budget = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page / 16 : 0;

        return budget > BUDGET_MAX ? BUDGET_MAX : budget < BUDGET_MIN ? BUDGET_MIN : budget;
}

/* The unit comes from a header, which may be hostile: it decides how pieces fall on the
 * members, never how much memory a reader commits. */
int ds_stripe_stream_pool(const struct ds_stripe *stripe, struct ds_pool **pool,
                          struct ds_error *err)
{
        uint64_t unit = stripe->layout.unit, size = unit * stripe->width;
        uint64_t room = stripe->mem_budget / stripe->depth;

        room -= room % DS_STRIPE_MIN_UNIT;
        if (room == 0)
                return stripe_reject(err, -ENOMEM,
                                     "memory budget of %llu bytes: too small for %u buffers of 4K",
                                     (unsigned long long)stripe->mem_budget, stripe->depth);
        if (size > room)
                size = room >= unit ? room - room % unit : room;
        /* Reading a file of known size, buffers need not pass it. */
        if (!stripe->created && size > stripe->size) {
                size = (stripe->size + DS_STRIPE_MIN_UNIT - 1) / DS_STRIPE_MIN_UNIT *
                       DS_STRIPE_MIN_UNIT;
                if (size == 0)
                        size = DS_STRIPE_MIN_UNIT;
        }
        return ds_pool_create(pool, (size_t)size, stripe->depth, 0, err);
}

static unsigned stream_depth(const struct ds_stripe *stripe, const struct ds_pool *pool)
{
        unsigned count = ds_pool_count(pool);

        return count < stripe->depth ? count : stripe->depth;
}

static int stopped(const struct ds_stripe *stripe, struct ds_error *err)
{
        if (stripe->stop && atomic_load(stripe->stop))
                return ds_fail(err, -EINTR, "interrupted");
        return 0;
}

int ds_stripe_read_stream(struct ds_stripe *stripe, struct ds_pool *pool, ds_stripe_sink_fn sink,
                          void *ctx, struct ds_error *err)
{
        unsigned depth = stream_depth(stripe, pool), head = 0, inflight = 0;
        size_t buf_size = ds_pool_buf_size(pool);
        int tickets[DS_STRIPE_MAX_WIDTH * 4];
        uint64_t offsets[DS_STRIPE_MAX_WIDTH * 4];
        uint64_t next = 0;
        int rc = 0;

        if (depth > sizeof(tickets) / sizeof(tickets[0]))
                depth = sizeof(tickets) / sizeof(tickets[0]);
        for (;;) {
                while (rc == 0 && inflight < depth && next < stripe->size) {
                        if ((rc = stopped(stripe, err)) != 0)
                                break;
                        unsigned i = (head + inflight) % depth;
                        int t = ds_stripe_submit_read(stripe, ds_pool_buf(pool, i), buf_size, next,
                                                      err);
                        if (t < 0)
                                return t == -EBUSY ? ds_fail(err, t, "stream: stripe busy") : t;
                        tickets[i] = t;
                        offsets[i] = next;
                        next += buf_size;
                        inflight++;
                }
                if (inflight == 0)
                        return rc;
                size_t got = 0;
                int wrc = ds_stripe_wait(stripe, tickets[head], &got, rc ? NULL : err);
                if (rc == 0 && wrc != 0)
                        rc = wrc;
                if (rc == 0)
                        rc = sink(ds_pool_buf(pool, head), got, offsets[head], ctx, err);
                head = (head + 1) % depth;
                inflight--;
        }
}

int ds_stripe_write_stream(struct ds_stripe *stripe, struct ds_pool *pool,
                           ds_stripe_source_fn source, void *ctx, struct ds_error *err)
{
        unsigned depth = stream_depth(stripe, pool), head = 0, inflight = 0;
        size_t buf_size = ds_pool_buf_size(pool);
        int tickets[DS_STRIPE_MAX_WIDTH * 4];
        bool ended = false;
        int rc = 0;

        if (depth > sizeof(tickets) / sizeof(tickets[0]))
                depth = sizeof(tickets) / sizeof(tickets[0]);
        for (;;) {
                while (rc == 0 && !ended && inflight < depth) {
                        unsigned i = (head + inflight) % depth;
                        size_t len = 0;
                        if ((rc = stopped(stripe, err)) != 0)
                                break;
                        rc = source(ds_pool_buf(pool, i), buf_size, &len, ctx, err);
                        if (rc != 0)
                                break;
                        if (len < buf_size)
                                ended = true;
                        if (len == 0)
                                break;
                        int t = ds_stripe_submit_write(stripe, ds_pool_buf(pool, i), len,
                                                       stripe->size, err);
                        if (t < 0) {
                                rc = t;
                                break;
                        }
                        tickets[i] = t;
                        inflight++;
                }
                if (inflight == 0)
                        return rc;
                int wrc = ds_stripe_wait(stripe, tickets[head], NULL, rc ? NULL : err);
                if (rc == 0 && wrc != 0)
                        rc = wrc;
                head = (head + 1) % depth;
                inflight--;
        }
}
