/* The streaming JSON writer: escaping, nesting, commas, numbers. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include <dragstrip/json.h>

#include "json_check.h"

struct capture {
        FILE *out;
        char *text;
        size_t len;
};

static void capture_open(struct capture *c)
{
        c->text = NULL;
        c->out = open_memstream(&c->text, &c->len);
        assert_non_null(c->out);
}

/* Closes the stream and parses what was written; the text stays for inspection. */
static void capture_parse(struct capture *c, struct jc_doc *doc)
{
        assert_int_equal(fclose(c->out), 0);
        if (!jc_parse_line(c->text, doc))
                fail_msg("not one JSON object and a newline: %s", c->text);
}

static void test_json_invalid_utf8_becomes_replacement_characters(void **state)
{
        (void)state;
        /* valid 2-, 3- and 4-byte sequences, then a stray continuation byte, an overlong
         * '/', a surrogate, a lead byte cut short by the end, and Latin-1 */
        static const char mixed[] =
            "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80|\x80|\xc0\xaf|\xed\xa0\x80|"
            "\xe9t\xe9|\xe2\x82";
        struct capture c;
        struct ds_json json;
        capture_open(&c);
        ds_json_begin(&json, c.out);
        ds_json_str(&json, "name", mixed);
        ds_json_end(&json);
        assert_int_equal(fclose(c.out), 0); /* the checker here reads ASCII only */
        assert_string_equal(c.text, "{\"name\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80|\\ufffd|"
                                    "\\ufffd\\ufffd|\\ufffd\\ufffd\\ufffd|\\ufffdt\\ufffd|"
                                    "\\ufffd\\ufffd\"}\n");
        free(c.text);
}

static void test_json_empty_object_is_one_line(void **state)
{
        (void)state;
        struct capture c;
        struct ds_json json;
        struct jc_doc doc;
        capture_open(&c);
        ds_json_begin(&json, c.out);
        ds_json_end(&json);
        capture_parse(&c, &doc);
        assert_string_equal(c.text, "{}\n");
        assert_int_equal(doc.count, 0);
        free(c.text);
}

static void test_json_escapes_quotes_backslashes_and_control_characters(void **state)
{
        (void)state;
        static const char nasty[] = "a\"b\\c\nd\re\tf\x01g\x1fh\x7fi/j";
        struct capture c;
        struct ds_json json;
        struct jc_doc doc;
        capture_open(&c);
        ds_json_begin(&json, c.out);
        ds_json_str(&json, "nasty", nasty);
        ds_json_str(&json, "key \"quoted\"\n", "v");
        ds_json_str(&json, "null", NULL);
        ds_json_str(&json, "utf8", "caf\xc3\xa9");
        ds_json_end(&json);
        assert_int_equal(fclose(c.out), 0);
        /* Non-ASCII passes through untouched; the test reader handles ASCII only. */
        assert_non_null(strstr(c.text, "\"utf8\":\"caf\xc3\xa9\""));
        assert_non_null(strstr(c.text, "\\u0001"));
        assert_non_null(strstr(c.text, "\\u001f"));

        struct capture c2;
        capture_open(&c2);
        ds_json_begin(&json, c2.out);
        ds_json_str(&json, "nasty", nasty);
        ds_json_str(&json, "key \"quoted\"\n", "v");
        ds_json_str(&json, "null", NULL);
        ds_json_end(&json);
        capture_parse(&c2, &doc);
        assert_int_equal(doc.count, 3);
        assert_string_equal(jc_find(&doc, "nasty")->value, nasty);
        assert_string_equal(jc_find(&doc, "key \"quoted\"\n")->value, "v");
        assert_string_equal(jc_find(&doc, "null")->value, "");
        free(c.text);
        free(c2.text);
}

static void test_json_nests_objects_with_commas_in_the_right_places(void **state)
{
        (void)state;
        struct capture c;
        struct ds_json json;
        struct jc_doc doc;
        capture_open(&c);
        ds_json_begin(&json, c.out);
        ds_json_str(&json, "a", "1");
        ds_json_open(&json, "outer");
        ds_json_open(&json, "empty");
        ds_json_close(&json);
        ds_json_u64(&json, "x", 1);
        ds_json_open(&json, "inner");
        ds_json_bool(&json, "t", true);
        ds_json_bool(&json, "f", false);
        ds_json_close(&json);
        ds_json_close(&json);
        ds_json_i64(&json, "after", -5);
        ds_json_open(&json, "left_open");
        ds_json_u64(&json, "y", 2);
        ds_json_end(&json); /* closes left_open and the outermost object */
        capture_parse(&c, &doc);
        assert_string_equal(c.text, "{\"a\":\"1\",\"outer\":{\"empty\":{},\"x\":1,\"inner\":{\"t\":"
                                    "true,\"f\":false}},\"after\":-5,\"left_open\":{\"y\":2}}\n");
        static const char *const order[] = {
            "a",           "outer",         "outer.empty",   "outer.x",
            "outer.inner", "outer.inner.t", "outer.inner.f", "after",
            "left_open",   "left_open.y"};
        assert_int_equal(doc.count, 10);
        for (int i = 0; i < doc.count; i++)
                assert_string_equal(doc.members[i].path, order[i]);
        free(c.text);
}

static void test_json_arrays_hold_values_and_objects_without_keys(void **state)
{
        (void)state;
        struct capture c;
        struct ds_json json;
        capture_open(&c);
        ds_json_begin(&json, c.out);
        ds_json_open_array(&json, "empty");
        ds_json_close(&json);
        ds_json_open_array(&json, "entries");
        ds_json_open(&json, NULL);
        ds_json_str(&json, "name", "a");
        ds_json_u64(&json, "size", 1);
        ds_json_close(&json);
        ds_json_open(&json, NULL);
        ds_json_str(&json, "name", "b");
        ds_json_close(&json);
        ds_json_str(&json, NULL, "c");
        ds_json_close(&json);
        ds_json_open_array(&json, "left_open");
        ds_json_u64(&json, NULL, 7);
        ds_json_end(&json); /* closes the array with ] and the object with } */
        assert_int_equal(fclose(c.out), 0);
        assert_string_equal(c.text, "{\"empty\":[],\"entries\":[{\"name\":\"a\",\"size\":1},"
                                    "{\"name\":\"b\"},\"c\"],\"left_open\":[7]}\n");
        free(c.text);
}

static void test_json_numbers_are_exact_and_non_finite_is_null(void **state)
{
        (void)state;
        struct capture c;
        struct ds_json json;
        struct jc_doc doc;
        capture_open(&c);
        ds_json_begin(&json, c.out);
        ds_json_u64(&json, "u64max", UINT64_MAX);
        ds_json_i64(&json, "i64min", INT64_MIN);
        ds_json_double(&json, "rate", 1234.56789);
        ds_json_double(&json, "tiny", 1e-12);
        ds_json_double(&json, "zero", 0.0);
        ds_json_double(&json, "nan", NAN);
        ds_json_double(&json, "inf", INFINITY);
        ds_json_double(&json, "ninf", -INFINITY);
        ds_json_end(&json);
        capture_parse(&c, &doc);
        assert_string_equal(jc_find(&doc, "u64max")->value, "18446744073709551615");
        assert_string_equal(jc_find(&doc, "i64min")->value, "-9223372036854775808");
        assert_string_equal(jc_find(&doc, "rate")->value, "1234.56789");
        assert_true(strtod(jc_find(&doc, "tiny")->value, NULL) == 1e-12);
        assert_string_equal(jc_find(&doc, "zero")->value, "0");
        assert_int_equal(jc_find(&doc, "nan")->type, 'z');
        assert_int_equal(jc_find(&doc, "inf")->type, 'z');
        assert_int_equal(jc_find(&doc, "ninf")->type, 'z');
        free(c.text);
}

static void test_json_each_report_is_its_own_line(void **state)
{
        (void)state;
        struct capture c;
        struct ds_json json;
        capture_open(&c);
        for (int i = 0; i < 3; i++) {
                ds_json_begin(&json, c.out);
                ds_json_i64(&json, "i", i);
                ds_json_end(&json);
        }
        assert_int_equal(fclose(c.out), 0);
        assert_string_equal(c.text, "{\"i\":0}\n{\"i\":1}\n{\"i\":2}\n");
        free(c.text);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_json_empty_object_is_one_line),
            cmocka_unit_test(test_json_invalid_utf8_becomes_replacement_characters),
            cmocka_unit_test(test_json_escapes_quotes_backslashes_and_control_characters),
            cmocka_unit_test(test_json_nests_objects_with_commas_in_the_right_places),
            cmocka_unit_test(test_json_arrays_hold_values_and_objects_without_keys),
            cmocka_unit_test(test_json_numbers_are_exact_and_non_finite_is_null),
            cmocka_unit_test(test_json_each_report_is_its_own_line),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
