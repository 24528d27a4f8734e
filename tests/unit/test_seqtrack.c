#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dragstrip/seqtrack.h>

static struct ds_seqtrack track;

static int setup(void **state)
{
        (void)state;
        ds_seqtrack_init(&track);
        return 0;
}

static void test_seqtrack_in_order_loses_nothing(void **state)
{
        (void)state;
        for (uint64_t i = 0; i < 100000; i++)
                assert_int_equal(ds_seqtrack_add(&track, i), DS_SEQ_IN_ORDER);
        assert_int_equal(track.unique, 100000);
        assert_int_equal(ds_seqtrack_lost(&track, 0), 0);
        assert_int_equal(ds_seqtrack_lost(&track, 100000), 0);
        assert_int_equal(track.dup + track.reordered, 0);
}

static void test_seqtrack_counts_gaps_as_lost(void **state)
{
        (void)state;
        assert_int_equal(ds_seqtrack_add(&track, 0), DS_SEQ_IN_ORDER);
        assert_int_equal(ds_seqtrack_add(&track, 5), DS_SEQ_GAP);
        assert_int_equal(ds_seqtrack_add(&track, 6), DS_SEQ_IN_ORDER);
        assert_int_equal(ds_seqtrack_lost(&track, 0), 4);
        /* The sender's own count reveals losses after the highest number seen. */
        assert_int_equal(ds_seqtrack_lost(&track, 10), 7);
}

static void test_seqtrack_tells_duplicates_from_late_arrivals(void **state)
{
        (void)state;
        ds_seqtrack_add(&track, 0);
        ds_seqtrack_add(&track, 2);
        assert_int_equal(ds_seqtrack_add(&track, 1), DS_SEQ_LATE);
        assert_int_equal(ds_seqtrack_add(&track, 1), DS_SEQ_DUP);
        assert_int_equal(ds_seqtrack_add(&track, 2), DS_SEQ_DUP);
        assert_int_equal(track.reordered, 1);
        assert_int_equal(track.dup, 2);
        assert_int_equal(ds_seqtrack_lost(&track, 0), 0);
}

static void test_seqtrack_window_slides_without_false_duplicates(void **state)
{
        (void)state;
        /* After the window wraps, a slot reused by a new number must not read as seen. */
        for (uint64_t i = 0; i < 3 * DS_SEQ_WINDOW; i += 2)
                assert_int_not_equal(ds_seqtrack_add(&track, i), DS_SEQ_DUP);
        assert_int_equal(ds_seqtrack_add(&track, 3 * DS_SEQ_WINDOW - 3), DS_SEQ_LATE);
        assert_int_equal(track.dup, 0);
}

static void test_seqtrack_huge_jump_clears_window(void **state)
{
        (void)state;
        ds_seqtrack_add(&track, 1);
        ds_seqtrack_add(&track, 1 + 10 * DS_SEQ_WINDOW);
        assert_int_equal(ds_seqtrack_add(&track, 1 + 10 * DS_SEQ_WINDOW - 1), DS_SEQ_LATE);
        /* Too far behind to know: counted as reordered, not as a duplicate. */
        assert_int_equal(ds_seqtrack_add(&track, 1), DS_SEQ_LATE);
        assert_int_equal(track.dup, 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup(test_seqtrack_in_order_loses_nothing, setup),
            cmocka_unit_test_setup(test_seqtrack_counts_gaps_as_lost, setup),
            cmocka_unit_test_setup(test_seqtrack_tells_duplicates_from_late_arrivals, setup),
            cmocka_unit_test_setup(test_seqtrack_window_slides_without_false_duplicates, setup),
            cmocka_unit_test_setup(test_seqtrack_huge_jump_clears_window, setup),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
