/* The buffer pool: alignment, page kinds, the free list. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <dragstrip/error.h>
#include <dragstrip/pool.h>

#define HUGE_PAGE ((size_t)2 << 20)

static size_t page_size(void)
{
        return (size_t)sysconf(_SC_PAGESIZE);
}

static long reserved_huge_pages(void)
{
        long pages = -1;
        FILE *f = fopen("/proc/sys/vm/nr_hugepages", "r");
        if (f) {
                if (fscanf(f, "%ld", &pages) != 1)
                        pages = -1;
                fclose(f);
        }
        return pages;
}

static void assert_every_buffer_aligned(const struct ds_pool *pool, size_t align)
{
        for (unsigned i = 0; i < ds_pool_count(pool); i++) {
                char *buf = ds_pool_buf(pool, i);
                assert_int_equal((uintptr_t)buf % align, 0);
                assert_ptr_equal(buf, (char *)ds_pool_base(pool) + i * ds_pool_buf_size(pool));
                assert_int_equal(ds_pool_index_of(pool, buf), i);
        }
}

static void test_pool_rounds_buffers_to_pages_and_aligns_each(void **state)
{
        (void)state;
        struct ds_pool *pool;
        struct ds_error err;
        assert_int_equal(ds_pool_create(&pool, 1000, 7, DS_POOL_NO_THP, &err), 0);
        assert_int_equal(ds_pool_buf_size(pool), page_size());
        assert_int_equal(ds_pool_count(pool), 7);
        assert_int_equal(ds_pool_bytes(pool), 7 * page_size());
        assert_int_equal(ds_pool_pages(pool), DS_PAGES_PLAIN);
        assert_every_buffer_aligned(pool, page_size());
        ds_pool_destroy(pool);

        assert_int_equal(ds_pool_create(&pool, 65536 + 1, 3, 0, &err), 0);
        assert_int_equal(ds_pool_buf_size(pool), 65536 + page_size());
        assert_every_buffer_aligned(pool, page_size());
        ds_pool_destroy(pool);
}

/* A pool made with flags starts zeroed and takes writes to its last byte. */
static void check_zeroed_and_writable(unsigned flags)
{
        struct ds_pool *pool;
        assert_int_equal(ds_pool_create(&pool, 64 * 1024, 16, flags, NULL), 0);
        unsigned char *base = ds_pool_base(pool);
        for (size_t off = 0; off < ds_pool_bytes(pool); off += 4093)
                assert_int_equal(base[off], 0);
        memset(base, 0xa5, ds_pool_bytes(pool));
        assert_int_equal(base[ds_pool_bytes(pool) - 1], 0xa5);
        ds_pool_destroy(pool);
}

static void test_pool_memory_is_zeroed_and_writable(void **state)
{
        (void)state;
        check_zeroed_and_writable(0);
}

static void test_pool_lazy_memory_is_zeroed_and_writable(void **state)
{
        (void)state;
        check_zeroed_and_writable(DS_POOL_LAZY);
}

static void test_pool_with_thp_starts_on_a_huge_page_boundary(void **state)
{
        (void)state;
        struct ds_pool *pool;
        assert_int_equal(ds_pool_create(&pool, 1 << 20, 8, 0, NULL), 0);
        assert_int_equal((uintptr_t)ds_pool_base(pool) % HUGE_PAGE, 0);
        assert_true(ds_pool_pages(pool) == DS_PAGES_THP || ds_pool_pages(pool) == DS_PAGES_PLAIN);
        assert_every_buffer_aligned(pool, 1 << 20);
        ds_pool_destroy(pool);
}

static void test_pool_falls_back_when_hugepages_refused(void **state)
{
        (void)state;
        struct ds_pool *pool;
        struct ds_error err;
        assert_int_equal(ds_pool_create(&pool, 100000, 4, DS_POOL_HUGETLB, &err), 0);
        if (reserved_huge_pages() == 0) {
                assert_int_not_equal(ds_pool_pages(pool), DS_PAGES_HUGETLB);
                /* Without huge pages the buffers are rounded to ordinary pages only. */
                assert_int_equal(ds_pool_buf_size(pool), 25 * page_size());
        }
        if (ds_pool_pages(pool) == DS_PAGES_HUGETLB) {
                assert_int_equal(ds_pool_buf_size(pool), HUGE_PAGE);
                assert_every_buffer_aligned(pool, HUGE_PAGE);
        } else {
                assert_every_buffer_aligned(pool, page_size());
        }
        ds_pool_destroy(pool);

        assert_int_equal(ds_pool_create(&pool, 100000, 4, DS_POOL_HUGETLB | DS_POOL_NO_THP, &err),
                         0);
        if (reserved_huge_pages() == 0)
                assert_int_equal(ds_pool_pages(pool), DS_PAGES_PLAIN);
        ds_pool_destroy(pool);
}

static void test_pool_rejects_zero_and_overflow(void **state)
{
        (void)state;
        struct ds_pool *pool = NULL;
        struct ds_error err;
        assert_int_equal(ds_pool_create(&pool, 0, 4, 0, &err), -EINVAL);
        assert_non_null(strstr(err.text, "above 0"));
        assert_int_equal(ds_pool_create(&pool, 4096, 0, 0, &err), -EINVAL);
        assert_int_equal(ds_pool_create(&pool, SIZE_MAX, 1, 0, &err), -EOVERFLOW);
        assert_int_equal(ds_pool_create(&pool, SIZE_MAX / 2, 4, 0, &err), -EOVERFLOW);
        assert_int_equal(ds_pool_create(&pool, SIZE_MAX / 2, 4, DS_POOL_HUGETLB, &err), -EOVERFLOW);
        assert_int_equal(ds_pool_create(&pool, 4096, 0x80000000u, 0, &err), -EINVAL);
        assert_null(pool);
}

static void test_pool_refused_memory_is_enomem_with_a_message(void **state)
{
        (void)state;
        struct ds_pool *pool = NULL;
        struct ds_error err = {""};
        /* 2^47 bytes: the whole user address space, refused whatever the overcommit
         * policy, so the test never really allocates. */
        int rc = ds_pool_create(&pool, (size_t)1 << 37, 1024, DS_POOL_NO_THP, &err);
        assert_int_equal(rc, -ENOMEM);
        assert_non_null(strstr(err.text, "mmap"));
        assert_null(pool);
}

static void test_pool_index_of_refuses_foreign_and_inner_pointers(void **state)
{
        (void)state;
        struct ds_pool *pool;
        assert_int_equal(ds_pool_create(&pool, 8192, 4, 0, NULL), 0);
        char *base = ds_pool_base(pool);
        int on_stack;
        assert_int_equal(ds_pool_index_of(pool, base), 0);
        assert_int_equal(ds_pool_index_of(pool, base + 3 * 8192), 3);
        assert_int_equal(ds_pool_index_of(pool, base + 1), -1);
        assert_int_equal(ds_pool_index_of(pool, base + 8191), -1);
        assert_int_equal(ds_pool_index_of(pool, base + 4 * 8192), -1); /* one past the end */
        assert_int_equal(ds_pool_index_of(pool, base - 8192), -1);
        assert_int_equal(ds_pool_index_of(pool, &on_stack), -1);
        assert_int_equal(ds_pool_index_of(pool, NULL), -1);
        ds_pool_destroy(pool);
}

static void test_pool_get_runs_out_and_put_gives_back(void **state)
{
        (void)state;
        struct ds_pool *pool;
        void *taken[4];
        assert_int_equal(ds_pool_create(&pool, 4096, 4, 0, NULL), 0);
        for (unsigned i = 0; i < 4; i++) {
                taken[i] = ds_pool_get(pool);
                assert_int_equal(ds_pool_index_of(pool, taken[i]), i); /* address order */
        }
        assert_null(ds_pool_get(pool));
        ds_pool_put(pool, taken[2]);
        assert_ptr_equal(ds_pool_get(pool), taken[2]);
        assert_null(ds_pool_get(pool));
        for (unsigned i = 0; i < 4; i++)
                ds_pool_put(pool, taken[i]);
        /* All four come back, each once. */
        unsigned seen = 0;
        for (unsigned i = 0; i < 4; i++) {
                void *buf = ds_pool_get(pool);
                assert_non_null(buf);
                seen |= 1u << ds_pool_index_of(pool, buf);
        }
        assert_int_equal(seen, 0xf);
        assert_null(ds_pool_get(pool));
        ds_pool_destroy(pool);
}

static void test_page_kind_names(void **state)
{
        (void)state;
        assert_string_equal(ds_page_kind_name(DS_PAGES_PLAIN), "plain");
        assert_string_equal(ds_page_kind_name(DS_PAGES_THP), "thp");
        assert_string_equal(ds_page_kind_name(DS_PAGES_HUGETLB), "hugetlb");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_pool_rounds_buffers_to_pages_and_aligns_each),
            cmocka_unit_test(test_pool_memory_is_zeroed_and_writable),
            cmocka_unit_test(test_pool_lazy_memory_is_zeroed_and_writable),
            cmocka_unit_test(test_pool_with_thp_starts_on_a_huge_page_boundary),
            cmocka_unit_test(test_pool_falls_back_when_hugepages_refused),
            cmocka_unit_test(test_pool_rejects_zero_and_overflow),
            cmocka_unit_test(test_pool_refused_memory_is_enomem_with_a_message),
            cmocka_unit_test(test_pool_index_of_refuses_foreign_and_inner_pointers),
            cmocka_unit_test(test_pool_get_runs_out_and_put_gives_back),
            cmocka_unit_test(test_page_kind_names),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
