/* xftp/client/listing.c: a server's text reaches the terminal without a byte a terminal
 * acts on, and whole UTF-8 characters reach it unchanged. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_show_replaces_c0_controls_and_del),
            cmocka_unit_test(test_show_replaces_c1_controls_in_every_form),
            cmocka_unit_test(test_show_keeps_whole_utf8_characters),
            cmocka_unit_test(test_show_replaces_broken_utf8),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
