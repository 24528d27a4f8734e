/* The single-producer/single-consumer ring. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dragstrip/ring.h>

/* Items are small integers disguised as pointers; 0 would read as "empty". */
#define ITEM(n) ((void *)(uintptr_t)(n))

static void test_ring_rejects_bad_capacity(void **state)
{
        (void)state;
        struct ds_ring *ring = NULL;
        assert_int_equal(ds_ring_create(&ring, 0), -EINVAL);
        assert_int_equal(ds_ring_create(&ring, (1u << 31) + 1), -EINVAL);
        assert_null(ring);
}

static void test_ring_rounds_capacity_up_to_a_power_of_two(void **state)
{
        (void)state;
        struct ds_ring *ring;
        assert_int_equal(ds_ring_create(&ring, 5), 0);
        unsigned pushed = 0;
        while (ds_ring_push(ring, ITEM(pushed + 1)))
                pushed++;
        assert_int_equal(pushed, 8);
        assert_int_equal(ds_ring_count(ring), 8);
        ds_ring_destroy(ring);

        assert_int_equal(ds_ring_create(&ring, 1), 0);
        assert_true(ds_ring_push(ring, ITEM(1)));
        assert_false(ds_ring_push(ring, ITEM(2)));
        ds_ring_destroy(ring);
}

static void test_ring_empty_and_full(void **state)
{
        (void)state;
        struct ds_ring *ring;
        assert_int_equal(ds_ring_create(&ring, 4), 0);
        assert_null(ds_ring_pop(ring));
        assert_int_equal(ds_ring_count(ring), 0);
        for (unsigned i = 1; i <= 4; i++)
                assert_true(ds_ring_push(ring, ITEM(i)));
        assert_false(ds_ring_push(ring, ITEM(5)));
        assert_int_equal(ds_ring_count(ring), 4);
        assert_ptr_equal(ds_ring_pop(ring), ITEM(1));
        assert_true(ds_ring_push(ring, ITEM(5))); /* one slot freed */
        assert_false(ds_ring_push(ring, ITEM(6)));
        for (unsigned i = 2; i <= 5; i++)
                assert_ptr_equal(ds_ring_pop(ring), ITEM(i));
        assert_null(ds_ring_pop(ring));
        assert_int_equal(ds_ring_count(ring), 0);
        ds_ring_destroy(ring);
}

static void test_ring_keeps_order_across_wraparound(void **state)
{
        (void)state;
        struct ds_ring *ring;
        assert_int_equal(ds_ring_create(&ring, 8), 0);
        uintptr_t next_in = 1, next_out = 1;
        /* Uneven batches walk the indices round the ring many times. */
        for (int round = 0; round < 1000; round++) {
                for (int i = 0; i < 5; i++)
                        assert_true(ds_ring_push(ring, ITEM(next_in++)));
                for (int i = 0; i < 5; i++)
                        assert_ptr_equal(ds_ring_pop(ring), ITEM(next_out++));
                assert_int_equal(ds_ring_count(ring), 0);
        }
        ds_ring_destroy(ring);
}

#define TRANSFER_ITEMS 1000000u

static void *consume(void *arg)
{
        struct ds_ring *ring = arg;
        uintptr_t expected = 1;
        while (expected <= TRANSFER_ITEMS) {
                void *item = ds_ring_pop(ring);
                if (!item) {
                        sched_yield();
                        continue;
                }
                if (item != ITEM(expected))
                        return ITEM(expected); /* the first item out of order */
                expected++;
        }
        return NULL;
}

static void test_ring_moves_a_million_items_in_order_between_threads(void **state)
{
        (void)state;
        struct ds_ring *ring;
        pthread_t consumer;
        assert_int_equal(ds_ring_create(&ring, 256), 0);
        assert_int_equal(pthread_create(&consumer, NULL, consume, ring), 0);
        for (uintptr_t i = 1; i <= TRANSFER_ITEMS; i++)
                while (!ds_ring_push(ring, ITEM(i)))
                        sched_yield();
        void *failed_at;
        assert_int_equal(pthread_join(consumer, &failed_at), 0);
        assert_null(failed_at);
        assert_int_equal(ds_ring_count(ring), 0);
        ds_ring_destroy(ring);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_ring_rejects_bad_capacity),
            cmocka_unit_test(test_ring_rounds_capacity_up_to_a_power_of_two),
            cmocka_unit_test(test_ring_empty_and_full),
            cmocka_unit_test(test_ring_keeps_order_across_wraparound),
            cmocka_unit_test(test_ring_moves_a_million_items_in_order_between_threads),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
