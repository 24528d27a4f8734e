/* CRC-32C: every implementation this CPU runs gives the byte table's result, whatever the
 * length and the alignment of the start. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <dragstrip/stripe_header.h>

#include "crc32c_int.h"

#define MAX_LEN 4097u

static uint8_t data[MAX_LEN + 16];

static void fill_random(void)
{
        uint64_t x = 0x2545F4914F6CDD1Dull; /* fixed seed: a failure reproduces */

        for (size_t i = 0; i < sizeof(data); i++) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                data[i] = (uint8_t)(x >> 32);
        }
}

static uint32_t crc_with(const struct crc32c_impl *impl, const void *p, size_t len)
{
        return ~impl->update(~0u, p, len);
}

static void test_crc32c_known_vector(void **state)
{
        unsigned count;
        const struct crc32c_impl *impls = crc32c_impls(&count);

        (void)state;
        assert_int_equal(ds_crc32c(0, "123456789", 9), 0xE3069283u);
        /* Continuing equals one pass. */
        assert_int_equal(ds_crc32c(ds_crc32c(0, "1234", 4), "56789", 5), 0xE3069283u);
        assert_int_equal(ds_crc32c(0, "", 0), 0);
        for (unsigned i = 0; i < count; i++)
                assert_int_equal(crc_with(&impls[i], "123456789", 9), 0xE3069283u);
}

static void test_crc32c_impls_match_table_any_length_and_start(void **state)
{
        unsigned count;
        const struct crc32c_impl *impls = crc32c_impls(&count);
        const struct crc32c_impl *table = crc32c_find("table");

        (void)state;
        assert_non_null(table);
        assert_true(count >= 2); /* the table and slicing-by-8 run everywhere */
        fill_random();
        for (size_t len = 0; len <= MAX_LEN; len++) {
                for (size_t start = 0; start < 16; start += 1 + len % 5) {
                        uint32_t want = crc_with(table, data + start, len);
                        for (unsigned i = 0; i < count; i++) {
                                if (crc_with(&impls[i], data + start, len) != want)
                                        fail_msg("%s: length %zu from byte %zu", impls[i].name, len,
                                                 start);
                        }
                }
        }
}

static void test_crc32c_impls_continue_across_a_split(void **state)
{
        unsigned count;
        const struct crc32c_impl *impls = crc32c_impls(&count);
        uint32_t want;

        (void)state;
        fill_random();
        want = crc_with(crc32c_find("table"), data + 3, MAX_LEN);
        for (unsigned i = 0; i < count; i++) {
                for (size_t split = 0; split <= MAX_LEN; split += 61) {
                        uint32_t crc = impls[i].update(~0u, data + 3, split);
                        crc = impls[i].update(crc, data + 3 + split, MAX_LEN - split);
                        if (~crc != want)
                                fail_msg("%s: split at %zu", impls[i].name, split);
                }
        }
}

static void test_crc32c_find_knows_only_real_names(void **state)
{
        (void)state;
        assert_string_equal(crc32c_find("table")->name, "table");
        assert_string_equal(crc32c_find("slice8")->name, "slice8");
        assert_null(crc32c_find("sse4.2"));
        assert_null(crc32c_find(""));
        assert_non_null(crc32c_find(crc32c_chosen()->name));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_crc32c_known_vector),
            cmocka_unit_test(test_crc32c_impls_match_table_any_length_and_start),
            cmocka_unit_test(test_crc32c_impls_continue_across_a_split),
            cmocka_unit_test(test_crc32c_find_knows_only_real_names),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
