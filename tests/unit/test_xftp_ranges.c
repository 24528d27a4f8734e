/* The ranges of an upload that have arrived (xftp/common/ranges.h): the prefix, the gaps
 * a MODE E upload must not be committed with, and the bound on what is tracked. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ranges.h"

#define SLOTS 64u

static struct xftp_range slots[SLOTS];

static void test_blocks_in_order_grow_the_prefix(void **state)
{
        (void)state;
        struct xftp_ranges r;

        xftp_ranges_init(&r, 0, slots, SLOTS);
        assert_true(xftp_ranges_whole(&r, NULL, NULL));
        for (uint64_t at = 0; at < 40; at += 4)
                assert_int_equal(xftp_ranges_add(&r, at, at + 4), 0);
        assert_int_equal(r.prefix, 40);
        assert_int_equal(r.count, 0);
        assert_true(xftp_ranges_whole(&r, NULL, NULL));
}

static void test_a_gap_is_reported_until_filled(void **state)
{
        (void)state;
        struct xftp_ranges r;
        uint64_t gap_start = 0, gap_end = 0;

        xftp_ranges_init(&r, 0, slots, SLOTS);
        assert_int_equal(xftp_ranges_add(&r, 0, 100), 0);
        assert_int_equal(xftp_ranges_add(&r, 1000, 1100), 0);
        assert_false(xftp_ranges_whole(&r, &gap_start, &gap_end));
        assert_int_equal(gap_start, 100);
        assert_int_equal(gap_end, 1000);
        assert_int_equal(r.prefix, 100);
        assert_int_equal(xftp_ranges_add(&r, 100, 1000), 0);
        assert_true(xftp_ranges_whole(&r, NULL, NULL));
        assert_int_equal(r.prefix, 1100);
}

static void test_only_a_far_block_is_a_gap_from_the_start(void **state)
{
        (void)state;
        struct xftp_ranges r;
        uint64_t gap_start = 1, gap_end = 0;

        xftp_ranges_init(&r, 0, slots, SLOTS);
        assert_int_equal(xftp_ranges_add(&r, 1ull << 40, (1ull << 40) + 10), 0);
        assert_false(xftp_ranges_whole(&r, &gap_start, &gap_end));
        assert_int_equal(gap_start, 0);
        assert_int_equal(gap_end, 1ull << 40);
        assert_int_equal(r.prefix, 0);
}

static void test_a_restart_point_is_the_first_byte(void **state)
{
        (void)state;
        struct xftp_ranges r;

        xftp_ranges_init(&r, 5000, slots, SLOTS);
        assert_int_equal(xftp_ranges_add(&r, 5010, 5020), 0);
        assert_false(xftp_ranges_whole(&r, NULL, NULL));
        assert_int_equal(xftp_ranges_add(&r, 5000, 5010), 0);
        assert_true(xftp_ranges_whole(&r, NULL, NULL));
        assert_int_equal(r.prefix, 5020);
}

static void test_touching_blocks_last_first_take_one_slot(void **state)
{
        (void)state;
        struct xftp_ranges r;
        struct xftp_range one[1];

        xftp_ranges_init(&r, 0, one, 1);
        for (uint64_t at = 100000; at > 0; at--) {
                assert_int_equal(xftp_ranges_add(&r, at, at + 1), 0);
                assert_int_equal(r.count, 1);
        }
        assert_int_equal(xftp_ranges_add(&r, 0, 1), 0);
        assert_true(xftp_ranges_whole(&r, NULL, NULL));
        assert_int_equal(r.prefix, 100001);
}

static void test_overlaps_join_and_repeats_change_nothing(void **state)
{
        (void)state;
        struct xftp_ranges r;

        xftp_ranges_init(&r, 0, slots, SLOTS);
        assert_int_equal(xftp_ranges_add(&r, 10, 20), 0);
        assert_int_equal(xftp_ranges_add(&r, 30, 40), 0);
        assert_int_equal(xftp_ranges_add(&r, 50, 60), 0);
        assert_int_equal(r.count, 3);
        assert_int_equal(xftp_ranges_add(&r, 15, 35), 0); /* joins the first two */
        assert_int_equal(r.count, 2);
        assert_int_equal(r.items[0].start, 10);
        assert_int_equal(r.items[0].end, 40);
        assert_int_equal(xftp_ranges_add(&r, 12, 18), 0); /* inside: nothing new */
        assert_int_equal(xftp_ranges_add(&r, 5, 5), 0);   /* empty */
        assert_int_equal(r.count, 2);
        assert_int_equal(xftp_ranges_add(&r, 0, 70), 0); /* covers everything */
        assert_int_equal(r.count, 0);
        assert_int_equal(r.prefix, 70);
        assert_int_equal(xftp_ranges_add(&r, 0, 70), 0);
        assert_int_equal(r.prefix, 70);
}

static void test_more_disjoint_ranges_than_slots_are_refused(void **state)
{
        (void)state;
        struct xftp_ranges r;
        struct xftp_range three[3];

        xftp_ranges_init(&r, 0, three, 3);
        for (uint64_t i = 1; i <= 3; i++)
                assert_int_equal(xftp_ranges_add(&r, i * 10, i * 10 + 1), 0);
        assert_int_equal(xftp_ranges_add(&r, 5, 6), -E2BIG);
        assert_int_equal(xftp_ranges_add(&r, 100, 101), -E2BIG);
        assert_int_equal(r.count, 3);
        assert_int_equal(r.items[0].start, 10);
        /* Full, yet what touches a range it holds, or the prefix, still counts. */
        assert_int_equal(xftp_ranges_add(&r, 11, 15), 0);
        assert_int_equal(xftp_ranges_add(&r, 0, 5), 0);
        assert_int_equal(r.prefix, 5);
        assert_int_equal(r.count, 3);
        assert_int_equal(xftp_ranges_add(&r, 5, 10), 0);
        assert_int_equal(r.prefix, 15);
        assert_int_equal(r.count, 2);
}

/* Random blocks of a small file in random order, against a byte map. */
static void test_random_order_matches_a_byte_map(void **state)
{
        (void)state;
        enum { SIZE = 4096 };
        static bool have[SIZE];
        struct xftp_ranges r;

        srand(18);
        for (int round = 0; round < 200; round++) {
                memset(have, 0, sizeof(have));
                xftp_ranges_init(&r, 0, slots, SLOTS);
                for (int i = 0; i < 40; i++) {
                        uint64_t start = (uint64_t)(rand() % SIZE);
                        uint64_t end = start + (uint64_t)(rand() % 200);
                        if (end > SIZE)
                                end = SIZE;
                        assert_int_equal(xftp_ranges_add(&r, start, end), 0);
                        memset(have + start, 1, end - start);
                        uint64_t prefix = 0, last = 0;
                        while (prefix < SIZE && have[prefix])
                                prefix++;
                        for (uint64_t at = 0; at < SIZE; at++)
                                last = have[at] ? at + 1 : last;
                        assert_int_equal(r.prefix, prefix);
                        assert_int_equal(xftp_ranges_whole(&r, NULL, NULL), last <= prefix);
                        for (unsigned k = 0; k + 1 < r.count; k++)
                                assert_true(r.items[k].end < r.items[k + 1].start);
                }
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_blocks_in_order_grow_the_prefix),
            cmocka_unit_test(test_a_gap_is_reported_until_filled),
            cmocka_unit_test(test_only_a_far_block_is_a_gap_from_the_start),
            cmocka_unit_test(test_a_restart_point_is_the_first_byte),
            cmocka_unit_test(test_touching_blocks_last_first_take_one_slot),
            cmocka_unit_test(test_overlaps_join_and_repeats_change_nothing),
            cmocka_unit_test(test_more_disjoint_ranges_than_slots_are_refused),
            cmocka_unit_test(test_random_order_matches_a_byte_map),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
