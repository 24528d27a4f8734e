/* xftpd's command parser (xftp/server/cmd.c) and the store's path folding (store.h). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cmd.h"
#include "store.h"

static struct xftpd_cmd cmd;
static const char *last_reply; /* what the last parse() refused with */

static void test_mfmt_time_is_utc_with_its_fraction_and_path(void **state)
{
        (void)state;
        struct xftpd_mfmt m;

        assert_int_equal(xftpd_parse_mfmt("20240229123456 a b.bin", &m), 0);
        assert_int_equal(m.sec, 1709210096);
        assert_int_equal(m.nsec, 0);
        assert_int_equal(m.time_len, 14);
        assert_string_equal(m.path, "a b.bin");
        assert_int_equal(xftpd_parse_mfmt("19700101000001.25 x", &m), 0);
        assert_int_equal(m.sec, 1);
        assert_int_equal(m.nsec, 250000000);
        assert_int_equal(m.time_len, 17);
}

static void test_mfmt_refuses_malformed_and_impossible_times(void **state)
{
        (void)state;
        struct xftpd_mfmt m;
        static const char *const bad[] = {
            "2024022912345 x",
            "20240229123456",
            "20240229123456 ",
            "2024022912345x x",
            "20240230120000 x",
            "20231301120000 x",
            "20240101240000 x",
            "20240101235960 x",
            "20240101120000. x",
            "20240101120000.1234567890 x",
            "20240101120000x x",
            "+2024010112000 x",
            "",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                if (xftpd_parse_mfmt(bad[i], &m) != -EINVAL)
                        fail_msg("'%s' was taken", bad[i]);
}

/* Parses text (a C string, CR LF added) and returns the code, 0 when it parsed. */
static int parse(const char *text)
{
        char line[XFTPD_LINE_MAX + 64];
        size_t len = strlen(text);

        memcpy(line, text, len);
        memcpy(line + len, "\r\n", 2);
        last_reply = NULL;
        int rc = xftpd_cmd_parse(line, len + 2, &cmd, &last_reply);
        if (rc != 0 && (!last_reply || (unsigned)(last_reply[0] - '0') != (unsigned)rc / 100))
                fail_msg("'%s': code %d with reply '%s'", text, rc,
                         last_reply ? last_reply : "(none)");
        return rc;
}

static void test_parse_takes_verbs_in_any_case_with_their_arguments(void **state)
{
        (void)state;
        assert_int_equal(parse("retr some file.bin"), 0);
        assert_int_equal(cmd.verb, V_RETR);
        assert_string_equal(cmd.arg, "some file.bin");
        assert_int_equal(parse("XCWD /a"), 0);
        assert_int_equal(cmd.verb, V_CWD);
        assert_int_equal(parse("PASS "), 0); /* an empty password is a password */
        assert_string_equal(cmd.arg, "");
        assert_int_equal(parse("REST 123456789012"), 0);
        assert_int_equal(cmd.num[0], 123456789012ull);
        assert_int_equal(parse("RANG 5 10"), 0);
        assert_int_equal(cmd.num[1], 10);
        assert_int_equal(parse("RANG 1 0"), 0); /* the draft's reset */
        assert_int_equal(parse("ALLO 1000 R 10"), 0);
        assert_int_equal(cmd.num[0], 1000);
        assert_int_equal(parse("type a n"), 0);
        assert_int_equal(cmd.type, 'A');
        assert_int_equal(parse("TYPE L 8"), 0);
        assert_int_equal(cmd.type, 'I');
        assert_int_equal(parse("mode e"), 0);
        assert_int_equal(cmd.type, 'E');
        assert_int_equal(parse("rpsv"), 0);
        assert_int_equal(cmd.verb, V_RPSV);
        /* RPRT's argument, a port or |af|host|port|, is the verb's own to check (verbs.c) */
        assert_int_equal(parse("RPRT 50123"), 0);
        assert_int_equal(cmd.verb, V_RPRT);
        assert_string_equal(cmd.arg, "50123");
        assert_int_equal(parse("RPRT |1|192.0.2.7|50123|"), 0);
        assert_string_equal(cmd.arg, "|1|192.0.2.7|50123|");
}

static void test_parse_refuses_what_is_not_a_command(void **state)
{
        (void)state;
        assert_int_equal(parse(""), 500);
        assert_int_equal(parse("RE"), 500);
        assert_int_equal(parse("RETRX a"), 500);
        assert_int_equal(parse("FROB"), 500);
        assert_int_equal(parse("R3TR a"), 500);
        assert_int_equal(parse("ACCT x"), 502);
        assert_int_equal(parse("RETR"), 501);
        assert_int_equal(parse("PWD x"), 501);
        assert_int_equal(parse("RETR a\tb"), 501);
        assert_int_equal(parse("REST -1"), 501);
        assert_int_equal(parse("REST 1234567890123456789"), 501); /* past 2^63 */
        assert_int_equal(parse("RANG 10 5"), 501);
        assert_int_equal(parse("TYPE E"), 504);
        assert_int_equal(parse("MODE B"), 504);
        assert_int_equal(parse("STRU R"), 504);
        assert_int_equal(parse("RPSV 1"), 501);
        assert_int_equal(parse("RPRT"), 501);
}

static void test_parse_says_a_number_too_large_is_too_large(void **state)
{
        static const char too_large[] = "501 Number too large: the largest is 999999999999999999.";
        (void)state;
        assert_int_equal(parse("REST 999999999999999999"), 0);
        assert_true(cmd.num[0] == 999999999999999999u);
        assert_int_equal(parse("REST 0000000000000000000007"), 0); /* leading zeros add nothing */
        assert_true(cmd.num[0] == 7);
        static const char *const large[] = {
            "REST 1000000000000000000",
            "REST 9223372036854775807",                  /* 2^63 - 1 */
            "REST 18446744073709551616",                 /* 2^64 */
            "REST 123456789012345678901234567890123456", /* far past any integer */
            "RANG 1 99999999999999999999",
            "ALLO 5 R 99999999999999999999",
        };
        for (size_t i = 0; i < sizeof(large) / sizeof(large[0]); i++) {
                assert_int_equal(parse(large[i]), 501);
                assert_string_equal(last_reply, too_large);
        }
        assert_int_equal(parse("REST abc"), 501);
        assert_string_equal(last_reply, "501 Expected a decimal number.");
        assert_int_equal(parse("REST 12abc"), 501);
        assert_string_equal(last_reply, "501 Unexpected text after the number.");
        assert_int_equal(parse("RANG 1 x"), 501);
        assert_string_equal(last_reply, "501 RANG takes a start and an end.");
}

static void test_parse_removes_telnet_and_refuses_nul_and_long_lines(void **state)
{
        const char *reply;
        (void)state;
        assert_int_equal(xftpd_cmd_parse("\xff\xf4\xff\xf2"
                                         "ABOR\r\n",
                                         10, &cmd, &reply),
                         0);
        assert_int_equal(cmd.verb, V_ABOR);
        assert_int_equal(xftpd_cmd_parse("RETR a\xff\xff"
                                         "b\r\n",
                                         11, &cmd, &reply),
                         0);
        assert_memory_equal(cmd.arg,
                            "a\xff"
                            "b",
                            4);
        assert_int_equal(xftpd_cmd_parse("RETR a\0b\r\n", 10, &cmd, &reply), 500);
        static char big[XFTPD_LINE_MAX + 1];
        memset(big, 'A', sizeof(big));
        assert_int_equal(xftpd_cmd_parse(big, sizeof(big), &cmd, &reply), 500);
        assert_int_equal(xftpd_cmd_parse("\xff", 1, &cmd, &reply), 500); /* IAC at the end */
}

static void path_is(const char *cwd, const char *arg, const char *expected)
{
        char out[XFTP_STORE_PATH_MAX];
        int rc = xftp_store_path(cwd, arg, out, sizeof(out));
        if (rc != 0 || strcmp(out, expected) != 0)
                fail_msg("'%s' from '%s': expected '%s', got %d '%s'", arg, cwd, expected, rc, out);
}

static void test_paths_fold_dots_and_stop_at_the_root(void **state)
{
        char out[16];
        (void)state;
        path_is("", "a/b", "a/b");
        path_is("a", "b/./c//d/", "a/b/c/d");
        path_is("a/b", "..", "a");
        path_is("a/b", "../../../../x", "x");
        path_is("a/b", "/x/../y", "y");
        path_is("a", "/", "");
        path_is("a", "/../..", "");
        path_is("", "...", "...");
        assert_int_equal(xftp_store_path("", "a\nb", out, sizeof(out)), -EINVAL);
        assert_int_equal(xftp_store_path("", "a\x7f", out, sizeof(out)), -EINVAL);
        assert_int_equal(xftp_store_path("", "a/.xftpd-part.1", out, sizeof(out)), -EPERM);
        assert_int_equal(xftp_store_path("", ".xftpd-x/b", out, sizeof(out)), -EPERM);
        assert_int_equal(xftp_store_path("", "0123456789abcdef", out, sizeof(out)), -ENAMETOOLONG);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_parse_takes_verbs_in_any_case_with_their_arguments),
            cmocka_unit_test(test_parse_refuses_what_is_not_a_command),
            cmocka_unit_test(test_parse_says_a_number_too_large_is_too_large),
            cmocka_unit_test(test_parse_removes_telnet_and_refuses_nul_and_long_lines),
            cmocka_unit_test(test_paths_fold_dots_and_stop_at_the_root),
            cmocka_unit_test(test_mfmt_time_is_utc_with_its_fraction_and_path),
            cmocka_unit_test(test_mfmt_refuses_malformed_and_impossible_times),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
