/* The --verify pattern: a message checks as itself and as nothing else. */
#include <dragstrip/error.h>
#include <dragstrip/verify.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static void check_size(uint32_t len)
{
        struct ds_pattern p;
        struct ds_error err;
        assert_int_equal(ds_pattern_init(&p, len, &err), 0);
        uint8_t *buf = malloc(len);
        assert_non_null(buf);
        ds_pattern_fill(&p, buf, 7);
        assert_true(ds_pattern_check(&p, buf, len, 7));
        assert_false(ds_pattern_check(&p, buf, len, 8));
        assert_false(ds_pattern_check(&p, buf, len - 1, 7));
        ds_pattern_stamp(&p, buf, 8); /* restamped, the same buffer is message 8 */
        assert_true(ds_pattern_check(&p, buf, len, 8));
        buf[len - 1] ^= 1; /* the last byte, beyond any stamp */
        assert_false(ds_pattern_check(&p, buf, len, 8));
        free(buf);
        ds_pattern_free(&p);
}

static void test_verify_checks_every_length_shape(void **state)
{
        (void)state;
        uint32_t sizes[] = {8, 64, 4095, 4096, 4097, 4104, 65536, 64000, 1u << 20};
        for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
                check_size(sizes[i]);
}

static void test_verify_catches_a_flipped_bit_anywhere(void **state)
{
        (void)state;
        struct ds_pattern p;
        struct ds_error err;
        uint32_t len = 3 * DS_PATTERN_PAGE + 100;
        assert_int_equal(ds_pattern_init(&p, len, &err), 0);
        uint8_t *buf = malloc(len);
        assert_non_null(buf);
        ds_pattern_fill(&p, buf, 12345);
        for (uint32_t i = 0; i < len; i += 97) {
                buf[i] ^= 0x10;
                assert_false(ds_pattern_check(&p, buf, len, 12345));
                buf[i] ^= 0x10;
        }
        assert_true(ds_pattern_check(&p, buf, len, 12345));
        free(buf);
        ds_pattern_free(&p);
}

static void test_verify_catches_pages_swapped_between_messages(void **state)
{
        (void)state;
        struct ds_pattern p;
        struct ds_error err;
        uint32_t len = 2 * DS_PATTERN_PAGE;
        assert_int_equal(ds_pattern_init(&p, len, &err), 0);
        uint8_t *a = malloc(len), *b = malloc(len);
        assert_non_null(a);
        assert_non_null(b);
        ds_pattern_fill(&p, a, 1);
        ds_pattern_fill(&p, b, 2);
        memcpy(a + DS_PATTERN_PAGE, b + DS_PATTERN_PAGE, DS_PATTERN_PAGE); /* a stale page */
        assert_false(ds_pattern_check(&p, a, len, 1));
        memcpy(a, a + DS_PATTERN_PAGE, DS_PATTERN_PAGE); /* a page out of place */
        assert_false(ds_pattern_check(&p, a, len, 2));
        free(a);
        free(b);
        ds_pattern_free(&p);
}

static void test_verify_refuses_messages_too_short_to_stamp(void **state)
{
        (void)state;
        struct ds_pattern p;
        struct ds_error err;
        assert_true(ds_pattern_init(&p, 7, &err) < 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_verify_checks_every_length_shape),
            cmocka_unit_test(test_verify_catches_a_flipped_bit_anywhere),
            cmocka_unit_test(test_verify_catches_pages_swapped_between_messages),
            cmocka_unit_test(test_verify_refuses_messages_too_short_to_stamp),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
