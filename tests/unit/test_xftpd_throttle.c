/* xftpd's failed logins per address (xftp/server/throttle.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "throttle.h"

#define S 1000000000ull /* a second in ns */

static struct xftp_addr addr(const char *eprt)
{
        struct xftp_addr out;
        assert_int_equal(xftp_parse_eprt(eprt, &out), 0);
        return out;
}

static struct throttle *table(unsigned max_fails, int ban_ms)
{
        struct throttle *t = malloc(sizeof(*t));
        assert_non_null(t);
        assert_int_equal(throttle_init(t, max_fails, ban_ms), 0);
        return t;
}

static void done(struct throttle *t)
{
        throttle_close(t);
        free(t);
}

static void test_throttle_bans_after_max_fails_from_one_address(void **state)
{
        (void)state;
        struct throttle *t = table(3, 10000);
        struct xftp_addr a = addr("|1|10.0.0.1|2000|"), other = addr("|1|10.0.0.2|2000|");

        throttle_fail(t, &a, 100 * S);
        throttle_fail(t, &a, 101 * S);
        assert_int_equal(throttle_banned(t, &a, 101 * S), 0);
        throttle_fail(t, &a, 102 * S);
        assert_int_equal(throttle_banned(t, &a, 102 * S), 10);
        assert_int_equal(throttle_banned(t, &a, 111 * S), 1);
        assert_int_equal(throttle_banned(t, &other, 102 * S), 0);
        assert_int_equal(throttle_banned(t, &a, 112 * S), 0); /* the ban is over */
        done(t);
}

static void test_throttle_forgets_failures_further_apart_than_the_ban(void **state)
{
        (void)state;
        struct throttle *t = table(2, 5000);
        struct xftp_addr a = addr("|1|10.0.0.1|2000|");

        throttle_fail(t, &a, 100 * S);
        throttle_fail(t, &a, 106 * S);
        assert_int_equal(throttle_banned(t, &a, 106 * S), 0);
        throttle_fail(t, &a, 107 * S);
        assert_int_equal(throttle_banned(t, &a, 107 * S), 5);
        done(t);
}

static void test_throttle_ignores_failures_during_a_ban(void **state)
{
        (void)state;
        struct throttle *t = table(2, 5000);
        struct xftp_addr a = addr("|1|10.0.0.1|2000|");

        throttle_fail(t, &a, 100 * S);
        throttle_fail(t, &a, 100 * S);
        for (int i = 0; i < 10; i++)
                throttle_fail(t, &a, 104 * S);
        assert_int_equal(throttle_banned(t, &a, 104 * S), 1); /* not extended */
        assert_int_equal(throttle_banned(t, &a, 105 * S), 0);
        done(t);
}

static void test_throttle_keys_ipv6_by_64_and_mapped_ipv4_as_ipv4(void **state)
{
        (void)state;
        struct throttle *t = table(2, 5000);
        struct xftp_addr a1 = addr("|2|2001:db8:1:2::1|2000|");
        struct xftp_addr a2 = addr("|2|2001:db8:1:2:ffff::9|2000|");
        struct xftp_addr b = addr("|2|2001:db8:1:3::1|2000|");
        struct xftp_addr v4 = addr("|1|192.0.2.7|2000|");
        struct xftp_addr mapped = addr("|2|::ffff:192.0.2.7|2000|");

        throttle_fail(t, &a1, 100 * S);
        throttle_fail(t, &a2, 100 * S);
        assert_int_not_equal(throttle_banned(t, &a1, 100 * S), 0);
        assert_int_equal(throttle_banned(t, &b, 100 * S), 0);
        throttle_fail(t, &v4, 100 * S);
        throttle_fail(t, &mapped, 100 * S);
        assert_int_not_equal(throttle_banned(t, &v4, 100 * S), 0);
        done(t);
}

static void test_throttle_keeps_bans_through_a_flood_of_other_addresses(void **state)
{
        (void)state;
        struct throttle *t = table(2, 60000);
        struct xftp_addr a = addr("|1|10.0.0.1|2000|");
        char text[64];

        throttle_fail(t, &a, 100 * S);
        throttle_fail(t, &a, 100 * S);
        /* Many more addresses than slots, one failure each, after the ban began. */
        for (unsigned i = 0; i < 4 * THROTTLE_SLOTS; i++) {
                snprintf(text, sizeof(text), "|1|172.16.%u.%u|2000|", i / 250, i % 250 + 1);
                struct xftp_addr flood = addr(text);
                throttle_fail(t, &flood, 101 * S);
        }
        assert_int_not_equal(throttle_banned(t, &a, 101 * S), 0);
        done(t);
}

static void test_throttle_counts_reports_from_sessions(void **state)
{
        (void)state;
        struct throttle *t = table(3, 5000);
        struct xftp_addr a = addr("|1|10.0.0.1|2000|");

        for (int i = 0; i < 3; i++)
                throttle_report(t->report_fd[1], &a);
        assert_int_equal(throttle_banned(t, &a, 100 * S), 0);
        throttle_collect(t, 100 * S);
        assert_int_equal(throttle_banned(t, &a, 100 * S), 5);
        throttle_collect(t, 100 * S); /* an empty pipe: nothing, no wait */
        done(t);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_throttle_bans_after_max_fails_from_one_address),
            cmocka_unit_test(test_throttle_forgets_failures_further_apart_than_the_ban),
            cmocka_unit_test(test_throttle_ignores_failures_during_a_ban),
            cmocka_unit_test(test_throttle_keys_ipv6_by_64_and_mapped_ipv4_as_ipv4),
            cmocka_unit_test(test_throttle_keeps_bans_through_a_flood_of_other_addresses),
            cmocka_unit_test(test_throttle_counts_reports_from_sessions),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
