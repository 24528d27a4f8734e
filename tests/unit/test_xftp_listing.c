/* xftp/client/listing.c: a server's text reaches the terminal without a byte a terminal
 * acts on, and whole UTF-8 characters reach it unchanged; listings give each entry's
 * facts, and times as MDTM spells them are read and written in UTC. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ftptime.h"
#include "listing.h"

/* What listing_show prints for len bytes of text. The caller frees it. */
static char *shown(const char *text, size_t len, bool lines)
{
        char *out = NULL;
        size_t out_len = 0;
        FILE *f = open_memstream(&out, &out_len);
        assert_non_null(f);
        listing_show(f, text, len, lines);
        assert_int_equal(fclose(f), 0);
        return out;
}

static void expect_shown(const char *text, bool lines, const char *want)
{
        char *out = shown(text, strlen(text), lines);
        assert_string_equal(out, want);
        free(out);
}

static void test_show_replaces_c0_controls_and_del(void **state)
{
        (void)state;
        expect_shown("a\x1b]0;title\x07z\x7f", false, "a?]0;title?z?");
        expect_shown("name\r\nnext\tx\n", true, "name\nnext\tx\n");
        expect_shown("one\r\ntwo", false, "one??two");
}

static void test_show_replaces_c1_controls_in_every_form(void **state)
{
        (void)state;
        /* CSI and OSC as UTF-8 (C2 9B, C2 9D), as raw bytes, and CSI spelt overlong. */
        expect_shown("a\xc2\x9b"
                     "2J|\xc2\x9d"
                     "0;t",
                     false, "a?2J|?0;t");
        expect_shown("a\x9b"
                     "2J\x9d",
                     false, "a?2J?");
        expect_shown("a\xc1\x9b"
                     "b\xe0\x82\x9b"
                     "c",
                     false, "a??b???c");
        /* U+2028 and U+2029: viewers break lines there */
        expect_shown("a\xe2\x80\xa8"
                     "b\xe2\x80\xa9",
                     true, "a?b?");
}

static void test_show_keeps_whole_utf8_characters(void **state)
{
        (void)state;
        const char *text = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x93\x81 \xc2\xa0|";
        expect_shown(text, true, text);
}

static void test_show_replaces_broken_utf8(void **state)
{
        (void)state;
        /* a lead byte without its continuation, at the end and before ASCII; a surrogate */
        expect_shown("x\xe2\x82", false, "x??");
        expect_shown("x\xc3y", false, "x?y");
        expect_shown("\xed\xa0\x80", false, "???");
        expect_shown("\xf5\x80\x80\x80", false, "????");
}

static void test_mlsd_line_gives_type_size_and_time(void **state)
{
        (void)state;
        char line[] = "type=file;size=65536;modify=20240301123456.789;perm=r; data.h5\r";
        char *name;
        struct listing_facts facts;
        assert_true(listing_entry(line, true, &name, &facts, NULL));
        assert_string_equal(name, "data.h5");
        assert_false(facts.is_dir);
        assert_int_equal(facts.size, 65536);
        assert_string_equal(facts.modified, "20240301123456.789");

        char dir[] = "Type=dir;Modify=20240301123456; sub";
        assert_true(listing_entry(dir, true, &name, &facts, NULL));
        assert_true(facts.is_dir);
        assert_int_equal(facts.size, UINT64_MAX); /* not named */
}

static void test_mlsd_facts_are_matched_whole(void **state)
{
        (void)state;
        char *name;
        struct listing_facts facts;
        /* a fact whose name merely ends in "type", and a size that is no number */
        char odd[] = "media-type=file;size=12x;modify=2024; x";
        assert_false(listing_entry(odd, true, &name, &facts, NULL));
        char cdir[] = "type=cdir;size=4096; .";
        assert_false(listing_entry(cdir, true, &name, &facts, NULL));
        char nosize[] = "type=file;size=; y";
        assert_true(listing_entry(nosize, true, &name, &facts, NULL));
        assert_int_equal(facts.size, UINT64_MAX);
        assert_string_equal(facts.modified, "");
}

/* left_out names entries a copy leaves out; lines that name nothing leave it NULL. */
static void expect_left_out(const char *text, bool mlsd, const char *name_wanted,
                            const char *why_wanted)
{
        char line[256];
        char *name;
        struct listing_facts facts;
        const char *left_out = "unset";
        snprintf(line, sizeof(line), "%s", text);
        assert_false(listing_entry(line, mlsd, &name, &facts, &left_out));
        if (!why_wanted) {
                assert_null(left_out);
                return;
        }
        assert_non_null(left_out);
        assert_string_equal(left_out, why_wanted);
        assert_string_equal(name, name_wanted);
}

static void test_entries_left_out_say_why(void **state)
{
        (void)state;
        expect_left_out("type=OS.unix=slink:/etc/passwd; l", true, "l",
                        "a symbolic link: not copied");
        expect_left_out("type=OS.unix=chr-1/3; null", true, "null",
                        "neither a file nor a directory: not copied");
        expect_left_out("size=5; untyped", true, "untyped", "no type named: not copied");
        expect_left_out("type=file;size=5; ../evil", true, "../evil",
                        "a name with '/' in it: not copied");
        expect_left_out("lrwxrwxrwx 1 a a 4 Jan 1 2020 l -> t", false, "l -> t",
                        "a symbolic link: not copied");
        expect_left_out("prw-r--r-- 1 a a 0 Jan 1 2020 fifo", false, "fifo",
                        "neither a file nor a directory: not copied");
        /* what names nothing */
        expect_left_out("type=cdir; /pub", true, NULL, NULL);
        expect_left_out("type=pdir; ..", true, NULL, NULL);
        expect_left_out("type=file; .", true, NULL, NULL);
        expect_left_out("total 8", false, NULL, NULL);
        expect_left_out("type=file;size=5;", true, NULL, NULL); /* no name */
}

static void test_list_line_gives_the_size(void **state)
{
        (void)state;
        char line[] = "-rw-r--r--   1 ftp  ftp   123456 Nov 23 19:00 name with spaces";
        char *name;
        struct listing_facts facts;
        assert_true(listing_entry(line, false, &name, &facts, NULL));
        assert_string_equal(name, "name with spaces");
        assert_int_equal(facts.size, 123456);
        assert_string_equal(facts.modified, ""); /* LIST names no exact time */
}

static void test_times_are_utc_both_ways(void **state)
{
        (void)state;
        struct timespec when;
        char out[XFTP_TIME_MAX];
        assert_int_equal(xftp_time_parse("19700101000001", &when), 14);
        assert_int_equal(when.tv_sec, 1);
        assert_int_equal(xftp_time_parse("20240301123456.5; name", &when), 16);
        assert_int_equal(when.tv_sec, 1709296496);
        assert_int_equal(when.tv_nsec, 500000000);
        xftp_time_format(&when, out, sizeof(out));
        assert_string_equal(out, "20240301123456");
        assert_int_equal(xftp_time_parse("20241301000000", &when), -EINVAL); /* month 13 */
        assert_int_equal(xftp_time_parse("2024030112", &when), -EINVAL);     /* too short */
        assert_int_equal(xftp_time_parse("20240230120000", &when), -EINVAL); /* February 30 */
}

/* The client takes from a listing only the times the server would take in MFMT. */
static void test_listing_times_are_those_mfmt_takes(void **state)
{
        (void)state;
        char out[LISTING_TIME_MAX];
        assert_int_equal(
            listing_modify_fact("type=file;modify=20240301123456.123;", out, sizeof(out)), 0);
        assert_string_equal(out, "20240301123456.123");
        assert_int_equal(listing_modify_fact("type=file;modify=20240230120000;", out, sizeof(out)),
                         -ENOTSUP);
        assert_int_equal(listing_modify_fact("type=file;modify=2024030112345x;", out, sizeof(out)),
                         -ENOTSUP);
        assert_int_equal(
            listing_modify_fact("type=file;modify=20240301123456.1234567890;", out, sizeof(out)),
            -ENOTSUP);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_show_replaces_c0_controls_and_del),
            cmocka_unit_test(test_show_replaces_c1_controls_in_every_form),
            cmocka_unit_test(test_show_keeps_whole_utf8_characters),
            cmocka_unit_test(test_show_replaces_broken_utf8),
            cmocka_unit_test(test_mlsd_line_gives_type_size_and_time),
            cmocka_unit_test(test_mlsd_facts_are_matched_whole),
            cmocka_unit_test(test_entries_left_out_say_why),
            cmocka_unit_test(test_list_line_gives_the_size),
            cmocka_unit_test(test_times_are_utc_both_ways),
            cmocka_unit_test(test_listing_times_are_those_mfmt_takes),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
