/* The buffer pool: one page-aligned mapping cut into equal buffers. */
#include <dragstrip/pool.h>

#include <dragstrip/error.h>

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* x86-64 and arm64 default huge page; MAP_HUGETLB without a size flag uses it. */
#define DS_HUGE_PAGE ((size_t)2 << 20)

struct ds_pool {
        char *base;
        size_t bytes; /* count * buf_size */
        size_t buf_size;
        unsigned count;
        enum ds_page_kind pages;
        void *map_base; /* what munmap needs: the THP path over-maps to align base */
        size_t map_bytes;
        unsigned free_count;
        unsigned *free_stack; /* indices of free buffers, top at free_count - 1 */
        bool *taken;          /* catches a put of a buffer that is not out */
};

static size_t page_size(void)
{
        long size = sysconf(_SC_PAGESIZE);
        return size > 0 ? (size_t)size : 4096;
}

/* Rounds size up to a multiple of align (a power of two); 0 on overflow. */
static size_t round_up(size_t size, size_t align)
{
        if (size > SIZE_MAX - (align - 1))
                return 0;
        return (size + align - 1) & ~(align - 1);
}

/* madvise succeeds even when THP is switched off system-wide; only then is it a no-op. */
static bool thp_enabled(void)
{
        FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
        if (!f)
                return false;
        char line[128] = "";
        bool enabled = fgets(line, sizeof(line), f) && !strstr(line, "[never]");
        fclose(f);
        return enabled;
}

static int map_hugetlb(struct ds_pool *pool)
{
        void *p = mmap(NULL, pool->bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
        if (p == MAP_FAILED)
                return -errno;
        pool->map_base = pool->base = p;
        pool->map_bytes = pool->bytes;
        pool->pages = DS_PAGES_HUGETLB;
        return 0;
}

/* Ordinary pages. With THP wanted the region starts on a huge-page boundary, so that the
 * kernel can back it with huge pages from the first byte: map one huge page extra and
 * trim the ends. */
static int map_plain(struct ds_pool *pool, bool want_thp)
{
        size_t slack = want_thp ? DS_HUGE_PAGE : 0;
        if (pool->bytes > SIZE_MAX - slack)
                return -EOVERFLOW;
        size_t map_bytes = pool->bytes + slack;
        char *p = mmap(NULL, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
                return -errno;

        char *base = p;
        if (want_thp) {
                base = (char *)round_up((uintptr_t)p, DS_HUGE_PAGE);
                size_t head = (size_t)(base - p);
                size_t tail = slack - head;
                /* Trimming is tidiness, not correctness: keep the whole map if it fails. */
                if (head && munmap(p, head) == 0) {
                        p += head;
                        map_bytes -= head;
                }
                if (tail && munmap(base + pool->bytes, tail) == 0)
                        map_bytes -= tail;
        }
        pool->map_base = p;
        pool->map_bytes = map_bytes;
        pool->base = base;
        pool->pages = DS_PAGES_PLAIN;
        if (want_thp && madvise(base, pool->bytes, MADV_HUGEPAGE) == 0 && thp_enabled())
                pool->pages = DS_PAGES_THP;
        return 0;
}

/* One write per page now, so the first use of a buffer on the hot path does not fault. */
static void touch_pages(struct ds_pool *pool)
{
        size_t step = page_size();
        for (size_t off = 0; off < pool->bytes; off += step)
                ((volatile char *)pool->base)[off] = 0;
}

/* The buffer size rounded to its page multiple, and the region size; 0 or -EOVERFLOW. */
static int plan_sizes(struct ds_pool *pool, size_t buf_size, unsigned count, size_t align)
{
        pool->buf_size = round_up(buf_size, align);
        if (pool->buf_size == 0 || pool->buf_size > SIZE_MAX / count)
                return -EOVERFLOW;
        pool->bytes = pool->buf_size * count;
        return 0;
}

static int map_region(struct ds_pool *pool, size_t buf_size, unsigned flags, struct ds_error *err)
{
        unsigned count = pool->count;
        int rc;

        if ((flags & DS_POOL_HUGETLB) && plan_sizes(pool, buf_size, count, DS_HUGE_PAGE) == 0 &&
            map_hugetlb(pool) == 0)
                return 0;
        /* No huge pages reserved (or too few): fall back to ordinary pages. */
        rc = plan_sizes(pool, buf_size, count, page_size());
        if (rc < 0)
                return ds_fail(err, rc, "pool of %u buffers of %zu bytes", count, buf_size);
        rc = map_plain(pool, !(flags & DS_POOL_NO_THP));
        if (rc < 0)
                return ds_fail(err, rc, "mmap %zu bytes for %u buffers of %zu", pool->bytes, count,
                               pool->buf_size);
        return 0;
}

int ds_pool_create(struct ds_pool **out, size_t buf_size, unsigned count, unsigned flags,
                   struct ds_error *err)
{
        if (buf_size == 0 || count == 0)
                return ds_fail(err, -EINVAL, "pool needs a buffer size and a count above 0");
        if (count > INT_MAX) /* ds_pool_index_of answers in an int */
                return ds_fail(err, -EINVAL, "pool of %u buffers is too many", count);

        struct ds_pool *pool = calloc(1, sizeof(*pool));
        if (!pool)
                return ds_fail(err, -ENOMEM, "pool");
        pool->count = count;
        pool->free_stack = calloc(count, sizeof(*pool->free_stack));
        pool->taken = calloc(count, sizeof(*pool->taken));
        if (!pool->free_stack || !pool->taken) {
                ds_pool_destroy(pool);
                return ds_fail(err, -ENOMEM, "pool free list of %u buffers", count);
        }
        int rc = map_region(pool, buf_size, flags, err);
        if (rc < 0) {
                ds_pool_destroy(pool);
                return rc;
        }
        if (!(flags & DS_POOL_LAZY))
                touch_pages(pool);

        /* Buffers come out in address order: 0 on top of the stack. */
        for (unsigned i = 0; i < count; i++)
                pool->free_stack[i] = count - 1 - i;
        pool->free_count = count;
        *out = pool;
        return 0;
}

void ds_pool_destroy(struct ds_pool *pool)
{
        if (!pool)
                return;
        /* munmap of a range we mapped cannot fail; nothing useful to do if it did. */
        if (pool->map_base)
                munmap(pool->map_base, pool->map_bytes);
        free(pool->free_stack);
        free(pool->taken);
        free(pool);
}

void *ds_pool_buf(const struct ds_pool *pool, unsigned i)
{
        assert(i < pool->count);
        return pool->base + (size_t)i * pool->buf_size;
}

size_t ds_pool_buf_size(const struct ds_pool *pool)
{
        return pool->buf_size;
}

unsigned ds_pool_count(const struct ds_pool *pool)
{
        return pool->count;
}

void *ds_pool_base(const struct ds_pool *pool)
{
        return pool->base;
}

size_t ds_pool_bytes(const struct ds_pool *pool)
{
        return pool->bytes;
}

enum ds_page_kind ds_pool_pages(const struct ds_pool *pool)
{
        return pool->pages;
}

const char *ds_page_kind_name(enum ds_page_kind kind)
{
        switch (kind) {
        case DS_PAGES_PLAIN:
                return "plain";
        case DS_PAGES_THP:
                return "thp";
        case DS_PAGES_HUGETLB:
                return "hugetlb";
        }
        return "unknown";
}

int ds_pool_index_of(const struct ds_pool *pool, const void *buf)
{
        uintptr_t addr = (uintptr_t)buf;
        uintptr_t base = (uintptr_t)pool->base;

        if (addr < base || addr - base >= pool->bytes || (addr - base) % pool->buf_size != 0)
                return -1;
        return (int)((addr - base) / pool->buf_size);
}

void *ds_pool_get(struct ds_pool *pool)
{
        if (pool->free_count == 0)
                return NULL;
        unsigned i = pool->free_stack[--pool->free_count];
        pool->taken[i] = true;
        return ds_pool_buf(pool, i);
}

void ds_pool_put(struct ds_pool *pool, void *buf)
{
        int i = ds_pool_index_of(pool, buf);

        /* A foreign pointer or a buffer put back twice is a bug in the caller. */
        assert(i >= 0 && pool->taken[i]);
        if (i < 0 || !pool->taken[i])
                return;
        pool->taken[i] = false;
        pool->free_stack[pool->free_count++] = (unsigned)i;
}
