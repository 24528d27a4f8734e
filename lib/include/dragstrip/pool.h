/* The buffer pool: one page-aligned region, allocated once, cut into equal buffers.
 *
 * Everything dragstrip moves lives in a pool: a disk read lands in a buffer by O_DIRECT,
 * the same buffer goes to the link. The region is one mapping so that it can be registered
 * once (ibv_reg_mr, a packet ring) by ds_pool_base()/ds_pool_bytes(). */
#ifndef DRAGSTRIP_POOL_H
#define DRAGSTRIP_POOL_H

#include <stdbool.h>
#include <stddef.h>

struct ds_error;

/* Which pages the pool ended up with. */
enum ds_page_kind {
        DS_PAGES_PLAIN,   /* ordinary 4 KiB pages */
        DS_PAGES_THP,     /* transparent huge pages asked for by madvise(MADV_HUGEPAGE) */
        DS_PAGES_HUGETLB, /* explicit huge pages, MAP_HUGETLB */
};

enum ds_pool_flags {
        DS_POOL_HUGETLB = 1 << 0, /* try MAP_HUGETLB first; fall back when refused */
        DS_POOL_NO_THP = 1 << 1,  /* do not madvise for transparent huge pages */
        /* Leave the pages untouched: each faults in at its first use. For a pool that may
         * carry far less than its size (a transfer of a small file): the kernel zeroes
         * every page it faults in, in advance or not, and the touch of all of them cost
         * each 64 KiB upload into xftpd its 16 MiB. */
        DS_POOL_LAZY = 1 << 2,
};

struct ds_pool;

/* Maps count buffers of buf_size bytes each. buf_size is rounded up to a multiple of the
 * page size (of the huge page size with HUGETLB) so that every buffer is page-aligned.
 * Pages are touched once here so the hot path never faults (unless DS_POOL_LAZY). Returns 0 and
 * *out, or a negative errno with err filled. The caller owns the pool. */
int ds_pool_create(struct ds_pool **out, size_t buf_size, unsigned count, unsigned flags,
                   struct ds_error *err);
void ds_pool_destroy(struct ds_pool *pool);

/* Buffer i (0 <= i < count), page-aligned, ds_pool_buf_size() bytes. */
void *ds_pool_buf(const struct ds_pool *pool, unsigned i);
size_t ds_pool_buf_size(const struct ds_pool *pool);
unsigned ds_pool_count(const struct ds_pool *pool);

/* The whole region, for one registration with a device. */
void *ds_pool_base(const struct ds_pool *pool);
size_t ds_pool_bytes(const struct ds_pool *pool);

enum ds_page_kind ds_pool_pages(const struct ds_pool *pool);
const char *ds_page_kind_name(enum ds_page_kind kind); /* "plain", "thp", "hugetlb" */

/* Index of buf if it is the start of one of the pool's buffers, else -1. */
int ds_pool_index_of(const struct ds_pool *pool, const void *buf);

/* A free list for a single thread: take a free buffer (NULL when all are out) and give it
 * back. */
void *ds_pool_get(struct ds_pool *pool);
void ds_pool_put(struct ds_pool *pool, void *buf);

#endif
