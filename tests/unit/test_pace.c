/* Pacing to a rate: pace.h. */
#include <dragstrip/clock.h>
#include <dragstrip/pace.h>
#include <dragstrip/stop.h>

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#define MS       1000000ull
#define CREDIT   ((uint64_t)DS_PACE_CREDIT_MS * MS)
#define THREADS  4
#define BOOKINGS 1000

static void test_pace_books_bytes_back_to_back(void **state)
{
        (void)state;
        struct ds_pace pace;
        ds_pace_init(&pace, 8e6); /* 1 MB/s: 1000 ns a byte */

        uint64_t before = ds_now_ns();
        uint64_t first = ds_pace_book(&pace, 500000);
        uint64_t after = ds_now_ns();
        /* The first booking starts the schedule: no credit from before it. */
        assert_true(first >= before + 500 * MS);
        assert_true(first <= after + 500 * MS);
        /* The next follows it, however soon it comes. */
        assert_int_equal(ds_pace_book(&pace, 250000), first + 250 * MS);
        assert_int_equal(ds_pace_bytes_in(&pace, 100), 100000);
}

static void test_pace_carries_a_pause_over_only_up_to_the_credit(void **state)
{
        (void)state;
        struct ds_pace pace;
        ds_pace_init(&pace, 8e9); /* 1 GB/s: a byte is a nanosecond */

        ds_pace_book(&pace, 1000);
        ds_sleep_until(ds_now_ns() + 3 * CREDIT);
        uint64_t before = ds_now_ns();
        uint64_t due = ds_pace_book(&pace, 1000);
        /* Three credits of idle time, yet the bytes are due no earlier than one credit
         * back: the pause bought no burst. */
        assert_true(due >= before - CREDIT + 1000);
        assert_true(due <= ds_now_ns());
}

static void *book_many(void *arg)
{
        for (int i = 0; i < BOOKINGS; i++)
                ds_pace_book(arg, 1000);
        return NULL;
}

static void test_pace_threads_share_one_schedule(void **state)
{
        (void)state;
        struct ds_pace pace;
        pthread_t threads[THREADS];
        ds_pace_init(&pace, 8); /* a byte a second: every booking lies far ahead of now */

        uint64_t before = ds_now_ns();
        for (int i = 0; i < THREADS; i++)
                assert_int_equal(pthread_create(&threads[i], NULL, book_many, &pace), 0);
        for (int i = 0; i < THREADS; i++)
                assert_int_equal(pthread_join(threads[i], NULL), 0);
        uint64_t after = ds_now_ns();

        /* No booking lost to a race: the schedule holds every byte of every thread. */
        uint64_t total_ns = (uint64_t)THREADS * BOOKINGS * 1000 * 1000000000ull;
        uint64_t start = atomic_load(&pace.free_ns) - total_ns;
        assert_true(start >= before && start <= after);
}

static void test_pace_wait_keeps_to_the_rate(void **state)
{
        (void)state;
        struct ds_pace pace;
        ds_pace_init(&pace, 8e6);

        uint64_t t0 = ds_now_ns();
        for (int i = 0; i < 4; i++)
                assert_int_equal(ds_pace_wait(&pace, 50000), 0);
        uint64_t took = ds_now_ns() - t0;
        assert_true(took >= 200 * MS); /* 200 KB at 1 MB/s */
        assert_true(took < 2000 * MS);
}

/* Last: a stop cannot be taken back. */
static void test_pace_wait_ends_on_a_stop(void **state)
{
        (void)state;
        struct ds_pace pace;
        ds_pace_init(&pace, 8e6);

        ds_stop_request(0);
        uint64_t t0 = ds_now_ns();
        assert_int_equal(ds_pace_wait(&pace, 60000000), -EINTR); /* a minute's bytes */
        assert_true(ds_now_ns() - t0 < (uint64_t)DS_STOP_SLICE_MS * MS);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_pace_books_bytes_back_to_back),
            cmocka_unit_test(test_pace_carries_a_pause_over_only_up_to_the_credit),
            cmocka_unit_test(test_pace_threads_share_one_schedule),
            cmocka_unit_test(test_pace_wait_keeps_to_the_rate),
            cmocka_unit_test(test_pace_wait_ends_on_a_stop),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
