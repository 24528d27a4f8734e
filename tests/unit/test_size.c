/* ds_size_parse, ds_rate_parse, ds_duration_parse and the formatters. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <dragstrip/size.h>

static uint64_t size_ok(const char *text)
{
        uint64_t value = 12345;
        int rc = ds_size_parse(text, 0, UINT64_MAX, &value);
        if (rc != 0)
                fail_msg("'%s' should parse, got %d", text, rc);
        return value;
}

static void assert_size_fails(const char *text, int expected)
{
        uint64_t value = 777;
        int rc = ds_size_parse(text, 0, UINT64_MAX, &value);
        if (rc != expected)
                fail_msg("'%s': expected %d, got %d", text, expected, rc);
        assert_int_equal(value, 777); /* untouched on failure */
}

static void test_size_parses_suffixes_in_powers_of_1024(void **state)
{
        (void)state;
        assert_int_equal(size_ok("0"), 0);
        assert_int_equal(size_ok("1536"), 1536);
        assert_int_equal(size_ok("64K"), 65536);
        assert_int_equal(size_ok("64k"), 65536);
        assert_int_equal(size_ok("960K"), 960 * 1024);
        assert_int_equal(size_ok("2M"), 2 << 20);
        assert_int_equal(size_ok("2m"), 2 << 20);
        assert_int_equal(size_ok("1G"), 1ull << 30);
        assert_int_equal(size_ok("1g"), 1ull << 30);
        assert_int_equal(size_ok("3T"), 3ull << 40);
        assert_int_equal(size_ok("3t"), 3ull << 40);
        assert_int_equal(size_ok("64KB"), 65536);
        assert_int_equal(size_ok("64KiB"), 65536);
        assert_int_equal(size_ok("512B"), 512);
        assert_int_equal(size_ok("007"), 7);
        assert_int_equal(size_ok("18446744073709551615"), UINT64_MAX);
        assert_int_equal(size_ok("16777215T"), 16777215ull << 40);
}

static void test_size_rejects_what_is_not_a_size(void **state)
{
        (void)state;
        static const char *const junk[] = {
            "",         "-5",   "+5",   " 5",    "5 ",   "12Q", "1.5K", "0x10", "K",
            "KB",       "5KK",  "5iB",  "5Ki",   "5KBB", "5b",  "5kb",  "1e3",  "5\n",
            "\xd9\xa3", "5K B", "5KIB", "1,024", "inf",  "nan", "-0",
        };
        for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++)
                assert_size_fails(junk[i], -EINVAL);
        uint64_t value;
        assert_int_equal(ds_size_parse(NULL, 0, 10, &value), -EINVAL);
}

static void test_size_overflow_is_out_of_range(void **state)
{
        (void)state;
        assert_size_fails("18446744073709551616", -ERANGE);
        assert_size_fails("99999999999999999999999", -ERANGE);
        assert_size_fails("17179869184G", -ERANGE); /* exactly 2^64 */
        assert_size_fails("16777216T", -ERANGE);
        assert_int_equal(size_ok("17179869183G"), 17179869183ull << 30);
}

static void test_size_bounds_are_inclusive(void **state)
{
        (void)state;
        uint64_t value = 0;
        assert_int_equal(ds_size_parse("1K", 1024, 2048, &value), 0);
        assert_int_equal(value, 1024);
        assert_int_equal(ds_size_parse("2K", 1024, 2048, &value), 0);
        assert_int_equal(value, 2048);
        assert_int_equal(ds_size_parse("1023", 1024, 2048, &value), -ERANGE);
        assert_int_equal(ds_size_parse("2049", 1024, 2048, &value), -ERANGE);
        assert_int_equal(ds_size_parse("0", 1, UINT64_MAX, &value), -ERANGE);
}

static void test_rate_parses_powers_of_1000(void **state)
{
        (void)state;
        double bps = 0;
        assert_int_equal(ds_rate_parse("1000", &bps), 0);
        assert_true(bps == 1000);
        assert_int_equal(ds_rate_parse("10k", &bps), 0);
        assert_true(bps == 10e3);
        assert_int_equal(ds_rate_parse("10K", &bps), 0);
        assert_true(bps == 10e3);
        assert_int_equal(ds_rate_parse("1.5M", &bps), 0);
        assert_true(bps == 1.5e6);
        assert_int_equal(ds_rate_parse("2.5g", &bps), 0);
        assert_true(bps == 2.5e9);
        assert_int_equal(ds_rate_parse("1T", &bps), 0);
        assert_true(bps == 1e12);
        assert_int_equal(ds_rate_parse("0.001", &bps), 0);
        assert_true(bps == 0.001);
        assert_int_equal(ds_rate_parse("7.", &bps), 0);
        assert_true(bps == 7);
}

static void test_rate_rejects_negative_zero_and_junk(void **state)
{
        (void)state;
        static const char *const junk[] = {"",     "-1",  "+1",   " 1",    "1 ", "1X",
                                           "1e9",  ".5",  "1..2", "1.2.3", "M",  "1MM",
                                           "0x10", "inf", "nan",  "1Mbit", "1,5"};
        double bps = 42;
        for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++)
                if (ds_rate_parse(junk[i], &bps) != -EINVAL)
                        fail_msg("rate '%s' should be -EINVAL", junk[i]);
        assert_int_equal(ds_rate_parse(NULL, &bps), -EINVAL);
        assert_int_equal(ds_rate_parse("0", &bps), -ERANGE);
        assert_int_equal(ds_rate_parse("0.000", &bps), -ERANGE);
        assert_int_equal(ds_rate_parse("0G", &bps), -ERANGE);
        char huge[400];
        memset(huge, '9', sizeof(huge) - 1);
        huge[sizeof(huge) - 1] = '\0';
        assert_int_equal(ds_rate_parse(huge, &bps), -ERANGE);
        assert_true(bps == 42);
}

static void test_duration_reads_seconds_and_milliseconds(void **state)
{
        (void)state;
        double s = 0;
        assert_int_equal(ds_duration_parse("10", &s), 0);
        assert_true(s == 10);
        assert_int_equal(ds_duration_parse("0.5", &s), 0);
        assert_true(s == 0.5);
        assert_int_equal(ds_duration_parse("10s", &s), 0);
        assert_true(s == 10);
        assert_int_equal(ds_duration_parse("500ms", &s), 0);
        assert_true(s == 0.5);
        assert_int_equal(ds_duration_parse("31536000", &s), 0); /* a year exactly */
        assert_true(s == 31536000);
}

static void test_duration_rejects_zero_negative_junk_and_beyond_a_year(void **state)
{
        (void)state;
        static const char *const junk[] = {"",   "-1", "+1",  " 1",  "1 ",   "1m",  "1h", "1sec",
                                           "ms", "s",  "1e3", "1ss", "1.5.", "abc", ".5"};
        double s = 42;
        for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++)
                if (ds_duration_parse(junk[i], &s) != -EINVAL)
                        fail_msg("duration '%s' should be -EINVAL", junk[i]);
        assert_int_equal(ds_duration_parse(NULL, &s), -EINVAL);
        assert_int_equal(ds_duration_parse("0", &s), -ERANGE);
        assert_int_equal(ds_duration_parse("0ms", &s), -ERANGE);
        assert_int_equal(ds_duration_parse("31536001", &s), -ERANGE);
        assert_int_equal(ds_duration_parse("99999999999999999999ms", &s), -ERANGE);
        assert_true(s == 42);
}

static void assert_size_format(uint64_t bytes, const char *expected)
{
        char buf[32];
        assert_string_equal(ds_size_format(buf, sizeof(buf), bytes), expected);
}

static void test_size_format_is_exact_for_whole_multiples(void **state)
{
        (void)state;
        assert_size_format(0, "0");
        assert_size_format(1, "1");
        assert_size_format(1536, "1536");
        assert_size_format(65536, "64K");
        assert_size_format(960 * 1024, "960K");
        assert_size_format(1 << 20, "1M");
        assert_size_format(1ull << 30, "1G");
        assert_size_format(3ull << 39, "1536G");
        assert_size_format(5ull << 40, "5T");
        assert_size_format(UINT64_MAX, "16777216.0T");
        assert_size_format((3ull << 29) + 1, "1.5G");
        assert_size_format((1ull << 20) + 1, "1.0M");
}

static void test_size_format_round_trips_through_parse(void **state)
{
        (void)state;
        static const uint64_t values[] = {
            0,       1,      1023,       1024,       4096,
            65536,   1536,   3 << 20,    1ull << 30, 7ull << 40,
            1048575, 123456, 2ull << 50, 1ull << 63, (1ull << 40) * 3};
        for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
                char buf[32];
                ds_size_format(buf, sizeof(buf), values[i]);
                assert_int_equal(size_ok(buf), values[i]);
        }
}

static void test_size_format_truncates_into_a_short_buffer(void **state)
{
        (void)state;
        char buf[3];
        assert_string_equal(ds_size_format(buf, sizeof(buf), 123456), "12");
}

static void test_rate_unit_check_accepts_the_seven_letters(void **state)
{
        (void)state;
        for (const char *p = "kKmMgGa"; *p; p++)
                assert_int_equal(ds_rate_unit_check(*p), 0);
        for (const char *p = "bBtTAx0 "; *p; p++)
                assert_int_equal(ds_rate_unit_check(*p), -EINVAL);
        assert_int_equal(ds_rate_unit_check('\0'), -EINVAL);
}

static void assert_rate(uint64_t bytes, double seconds, char unit, const char *expected)
{
        char buf[64];
        assert_string_equal(ds_rate_format(buf, sizeof(buf), bytes, seconds, unit), expected);
}

static void test_rate_format_in_every_unit(void **state)
{
        (void)state;
        assert_rate(1234560000, 1, 'a', "1234.56 MB/s = 9.88 Gbit/s");
        assert_rate(1234560000, 1, 0, "1234.56 MB/s = 9.88 Gbit/s");
        assert_rate(2000000, 2, 'a', "1.00 MB/s = 0.01 Gbit/s");
        assert_rate(1024 * 1024, 1, 'K', "1024.00 KB/sec");
        assert_rate(1024 * 1024, 1, 'k', "8192.00 Kbit/sec");
        assert_rate(1024 * 1024, 2, 'M', "0.50 MB/sec");
        assert_rate(1024 * 1024, 1, 'm', "8.00 Mbit/sec");
        assert_rate(1ull << 30, 1, 'G', "1.00 GB/sec");
        assert_rate(1ull << 30, 1, 'g', "8.00 Gbit/sec");
        assert_rate(1234567, 1, 'K', "1205.63 KB/sec");
}

static void test_rate_format_guards_zero_time(void **state)
{
        (void)state;
        assert_rate(1000, 0, 'a', "0.00 MB/s = 0.00 Gbit/s");
        assert_rate(1000, -1, 'K', "0.00 KB/sec");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_size_parses_suffixes_in_powers_of_1024),
            cmocka_unit_test(test_size_rejects_what_is_not_a_size),
            cmocka_unit_test(test_size_overflow_is_out_of_range),
            cmocka_unit_test(test_size_bounds_are_inclusive),
            cmocka_unit_test(test_rate_parses_powers_of_1000),
            cmocka_unit_test(test_rate_rejects_negative_zero_and_junk),
            cmocka_unit_test(test_duration_reads_seconds_and_milliseconds),
            cmocka_unit_test(test_duration_rejects_zero_negative_junk_and_beyond_a_year),
            cmocka_unit_test(test_size_format_is_exact_for_whole_multiples),
            cmocka_unit_test(test_size_format_round_trips_through_parse),
            cmocka_unit_test(test_size_format_truncates_into_a_short_buffer),
            cmocka_unit_test(test_rate_unit_check_accepts_the_seven_letters),
            cmocka_unit_test(test_rate_format_in_every_unit),
            cmocka_unit_test(test_rate_format_guards_zero_time),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
