/* The monotonic clock, CPU accounting and absolute sleeps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dragstrip/clock.h>

static void test_now_never_goes_backwards(void **state)
{
        (void)state;
        uint64_t prev = ds_now_ns();
        for (int i = 0; i < 100000; i++) {
                uint64_t now = ds_now_ns();
                assert_true(now >= prev);
                prev = now;
        }
}

static void test_seconds_between_is_signed(void **state)
{
        (void)state;
        assert_true(ds_seconds_between(1000000000u, 3500000000u) == 2.5);
        assert_true(ds_seconds_between(5, 5) == 0);
        assert_true(ds_seconds_between(3000000000u, 1000000000u) == -2.0);
}

static void test_utc_format_is_iso8601_to_the_millisecond(void **state)
{
        (void)state;
        char text[DS_UTC_TEXT];
        assert_string_equal(ds_utc_format(text, sizeof(text), 0), "1970-01-01T00:00:00.000Z");
        /* 2026-01-31T12:34:56.789999999Z: milliseconds cut, not rounded up into a second */
        assert_string_equal(ds_utc_format(text, sizeof(text), 1769862896789999999u),
                            "2026-01-31T12:34:56.789Z");
        assert_string_equal(ds_utc_format(text, 10, 0), "");
        assert_true(ds_unix_now_ns() > 1700000000000000000u); /* after November 2023 */
}

static void test_sleep_until_reaches_the_deadline(void **state)
{
        (void)state;
        uint64_t start = ds_now_ns();
        uint64_t deadline = start + 20000000u; /* 20 ms */
        ds_sleep_until(deadline);
        uint64_t end = ds_now_ns();
        assert_true(end >= deadline);
        assert_true(end - start < 1000000000u); /* and not a second late */
}

static void test_sleep_until_past_deadline_returns_at_once(void **state)
{
        (void)state;
        uint64_t start = ds_now_ns();
        ds_sleep_until(start - 1000000000u);
        ds_sleep_until(0);
        assert_true(ds_now_ns() - start < 500000000u); /* generous: the machine is shared */
}

static void test_cpu_counts_a_busy_loop(void **state)
{
        (void)state;
        struct ds_cpu before, now, used;
        uint64_t start = ds_now_ns();
        ds_cpu_now(&before);
        /* Spin until 50 ms of CPU show up; on a loaded machine that takes longer than
         * 50 ms of wall time, but never ten seconds. */
        do {
                ds_cpu_now(&now);
                used = ds_cpu_since(&before, &now);
        } while (used.user_s + used.sys_s < 0.05 && ds_now_ns() - start < 10000000000u);
        double wall = ds_seconds_between(start, ds_now_ns());
        assert_true(used.user_s + used.sys_s >= 0.05);
        assert_true(used.user_s + used.sys_s <= wall + 0.01); /* one thread: CPU <= wall */
        assert_true(used.user_s >= 0 && used.sys_s >= 0);
        assert_true(used.voluntary_switches >= 0 && used.involuntary_switches >= 0);
}

static void test_cpu_since_subtracts_field_by_field(void **state)
{
        (void)state;
        struct ds_cpu a = {
            .user_s = 1.0, .sys_s = 2.0, .voluntary_switches = 3, .involuntary_switches = 4};
        struct ds_cpu b = {
            .user_s = 1.5, .sys_s = 2.25, .voluntary_switches = 10, .involuntary_switches = 5};
        struct ds_cpu d = ds_cpu_since(&a, &b);
        assert_true(d.user_s == 0.5);
        assert_true(d.sys_s == 0.25);
        assert_int_equal(d.voluntary_switches, 7);
        assert_int_equal(d.involuntary_switches, 1);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_now_never_goes_backwards),
            cmocka_unit_test(test_seconds_between_is_signed),
            cmocka_unit_test(test_utc_format_is_iso8601_to_the_millisecond),
            cmocka_unit_test(test_sleep_until_reaches_the_deadline),
            cmocka_unit_test(test_sleep_until_past_deadline_returns_at_once),
            cmocka_unit_test(test_cpu_counts_a_busy_loop),
            cmocka_unit_test(test_cpu_since_subtracts_field_by_field),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
