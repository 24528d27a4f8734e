/* Stripe layout arithmetic and the member header codec: pure functions, no I/O. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <dragstrip/stripe_header.h>
#include <dragstrip/stripe_layout.h>

#define K4 4096u

static struct ds_stripe_layout layout_of(uint32_t width, uint64_t unit)
{
        struct ds_stripe_layout layout = {.width = width, .unit = unit};
        return layout;
}

static void test_layout_piece_at_unit_edges(void **state)
{
        struct ds_stripe_layout l = layout_of(3, 64 * 1024);
        struct ds_stripe_piece p;

        (void)state;
        p = ds_stripe_layout_piece(&l, 0, 1 << 30);
        assert_int_equal(p.member, 0);
        assert_int_equal(p.data_offset, 0);
        assert_int_equal(p.length, l.unit);
        p = ds_stripe_layout_piece(&l, l.unit - 1, 100); /* last byte of unit 0 */
        assert_int_equal(p.member, 0);
        assert_int_equal(p.data_offset, l.unit - 1);
        assert_int_equal(p.length, 1);
        p = ds_stripe_layout_piece(&l, l.unit, 100); /* first byte of unit 1 */
        assert_int_equal(p.member, 1);
        assert_int_equal(p.data_offset, 0);
        assert_int_equal(p.length, 100);
        p = ds_stripe_layout_piece(&l, 3 * l.unit + 5, l.unit); /* unit 3: member 0, round 1 */
        assert_int_equal(p.member, 0);
        assert_int_equal(p.data_offset, l.unit + 5);
        assert_int_equal(p.length, l.unit - 5);
        p = ds_stripe_layout_piece(&l, 5 * l.unit, 0);
        assert_int_equal(p.member, 2);
        assert_int_equal(p.length, 0);
}

static void test_layout_member_bytes_tail_shorter_than_unit(void **state)
{
        struct ds_stripe_layout l = layout_of(2, K4);

        (void)state;
        /* 2.5 units: member 0 has unit 0 and the half unit 2, member 1 has unit 1. */
        assert_int_equal(ds_stripe_member_bytes(&l, 0, 2 * K4 + K4 / 2), K4 + K4 / 2);
        assert_int_equal(ds_stripe_member_bytes(&l, 1, 2 * K4 + K4 / 2), K4);
        /* 3.5 units: member 1 holds the tail. */
        assert_int_equal(ds_stripe_member_bytes(&l, 0, 3 * K4 + 7), 2 * K4);
        assert_int_equal(ds_stripe_member_bytes(&l, 1, 3 * K4 + 7), K4 + 7);
}

static void test_layout_file_smaller_than_a_unit(void **state)
{
        struct ds_stripe_layout l = layout_of(4, 1 << 20);

        (void)state;
        assert_int_equal(ds_stripe_member_bytes(&l, 0, 100), 100);
        for (uint32_t m = 1; m < 4; m++)
                assert_int_equal(ds_stripe_member_bytes(&l, m, 100), 0);
}

static void test_layout_empty_file(void **state)
{
        struct ds_stripe_layout l = layout_of(16, K4);

        (void)state;
        for (uint32_t m = 0; m < 16; m++)
                assert_int_equal(ds_stripe_member_bytes(&l, m, 0), 0);
}

static void test_layout_width_one_is_the_identity(void **state)
{
        struct ds_stripe_layout l = layout_of(1, 8 * K4);

        (void)state;
        for (uint64_t off = 0; off < 20 * l.unit; off += 4093) {
                struct ds_stripe_piece p = ds_stripe_layout_piece(&l, off, 1 << 30);
                assert_int_equal(p.member, 0);
                assert_int_equal(p.data_offset, off);
                assert_int_equal(p.length, l.unit - off % l.unit);
        }
        assert_int_equal(ds_stripe_member_bytes(&l, 0, 123456789), 123456789);
}

/* Walks every piece of a file and checks each member receives a contiguous run of data
 * offsets whose length is what member_bytes says, for widths 1..16 and many sizes. */
static void check_walk(uint32_t width, uint64_t unit, uint64_t size)
{
        struct ds_stripe_layout l = layout_of(width, unit);
        uint64_t next[16] = {0}, total = 0;

        for (uint64_t off = 0; off < size;) {
                struct ds_stripe_piece p = ds_stripe_layout_piece(&l, off, size - off);
                assert_true(p.member < width);
                assert_int_equal(p.member, (off / unit) % width);
                assert_int_equal(p.data_offset, next[p.member]);
                assert_true(p.length > 0 && p.length <= unit);
                next[p.member] += p.length;
                off += p.length;
        }
        for (uint32_t m = 0; m < width; m++) {
                assert_int_equal(next[m], ds_stripe_member_bytes(&l, m, size));
                total += next[m];
        }
        assert_int_equal(total, size);
}

static void test_layout_walk_matches_member_bytes_widths_1_to_16(void **state)
{
        (void)state;
        srand(4);
        for (uint32_t width = 1; width <= 16; width++) {
                uint64_t unit = K4 * (1 + (uint64_t)(rand() % 4));
                uint64_t edges[] = {0,
                                    1,
                                    unit - 1,
                                    unit,
                                    unit + 1,
                                    width * unit - 1,
                                    width * unit,
                                    width * unit + 1,
                                    3 * width * unit + unit / 2};
                for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
                        check_walk(width, unit, edges[i]);
                for (int r = 0; r < 20; r++)
                        check_walk(width, unit, (uint64_t)rand() % (5 * width * unit));
        }
}

static void test_layout_valid_limits(void **state)
{
        struct ds_stripe_layout l;

        (void)state;
        l = layout_of(1, K4);
        assert_true(ds_stripe_layout_valid(&l));
        l = layout_of(64, 1 << 30);
        assert_true(ds_stripe_layout_valid(&l));
        l = layout_of(0, K4);
        assert_false(ds_stripe_layout_valid(&l));
        l = layout_of(65, K4);
        assert_false(ds_stripe_layout_valid(&l));
        l = layout_of(2, K4 / 2);
        assert_false(ds_stripe_layout_valid(&l));
        l = layout_of(2, K4 + 512);
        assert_false(ds_stripe_layout_valid(&l));
        l = layout_of(2, (1ull << 30) + K4);
        assert_false(ds_stripe_layout_valid(&l));
}

static struct ds_stripe_header sample_header(void)
{
        struct ds_stripe_header h = {.width = 4,
                                     .member = 3,
                                     .unit = 1 << 20,
                                     .file_size = 123456789,
                                     .flags = DS_STRIPE_DATA_CRC,
                                     .data_crc = 0xdeadbeef};
        for (unsigned i = 0; i < DS_STRIPE_SET_ID_SIZE; i++)
                h.set_id[i] = (uint8_t)(i * 17 + 1);
        return h;
}

static void test_header_round_trip(void **state)
{
        uint8_t block[DS_STRIPE_HEADER_SIZE];
        struct ds_stripe_header in = sample_header(), out;
        const char *why = NULL;

        (void)state;
        ds_stripe_header_encode(&in, block);
        assert_int_equal(ds_stripe_header_decode(block, sizeof(block), &out, &why), 0);
        assert_memory_equal(&in, &out, sizeof(in));
}

/* Re-encodes a header with one field changed, fixing the checksum, and expects the decoder
 * to name the field. */
static void expect_rejected(struct ds_stripe_header h, const char *reason_part)
{
        uint8_t block[DS_STRIPE_HEADER_SIZE];
        struct ds_stripe_header out;
        const char *why = NULL;

        ds_stripe_header_encode(&h, block);
        assert_int_equal(ds_stripe_header_decode(block, sizeof(block), &out, &why), -EINVAL);
        assert_non_null(why);
        if (!strstr(why, reason_part))
                fail_msg("expected '%s' in '%s'", reason_part, why);
}

static void test_header_rejects_fields_out_of_range(void **state)
{
        struct ds_stripe_header h;

        (void)state;
        h = sample_header(), h.width = 0;
        expect_rejected(h, "width");
        h = sample_header(), h.width = 65, h.member = 0;
        expect_rejected(h, "width");
        h = sample_header(), h.member = 4;
        expect_rejected(h, "member");
        h = sample_header(), h.unit = 1000;
        expect_rejected(h, "unit");
        h = sample_header(), h.unit = 0;
        expect_rejected(h, "unit");
        h = sample_header(), h.file_size = UINT64_MAX;
        expect_rejected(h, "size");
        h = sample_header(), h.flags = 0x80;
        expect_rejected(h, "flags");
}

static void test_header_rejects_damage(void **state)
{
        uint8_t block[DS_STRIPE_HEADER_SIZE];
        struct ds_stripe_header h = sample_header(), out;
        const char *why;

        (void)state;
        ds_stripe_header_encode(&h, block);
        assert_int_equal(ds_stripe_header_decode(block, 100, &out, &why), -EINVAL);
        assert_non_null(strstr(why, "short"));
        assert_int_equal(ds_stripe_header_decode(block, 3, &out, &why), -EINVAL);
        assert_non_null(strstr(why, "magic"));
        block[33] ^= 0x01; /* file size, checksum now stale */
        assert_int_equal(ds_stripe_header_decode(block, sizeof(block), &out, &why), -EINVAL);
        assert_non_null(strstr(why, "checksum"));
        block[33] ^= 0x01;
        block[0] = 'X';
        assert_int_equal(ds_stripe_header_decode(block, sizeof(block), &out, &why), -EINVAL);
        assert_non_null(strstr(why, "magic"));
        block[0] = 'D';
        block[8] = 2; /* version */
        assert_int_equal(ds_stripe_header_decode(block, sizeof(block), &out, &why), -EINVAL);
        assert_non_null(strstr(why, "version"));
        block[8] = 1;
        block[DS_STRIPE_HEADER_SIZE - 1] = 1;
        assert_int_equal(ds_stripe_header_decode(block, sizeof(block), &out, &why), -EINVAL);
        assert_non_null(strstr(why, "non-zero"));
        block[DS_STRIPE_HEADER_SIZE - 1] = 0;
        assert_int_equal(ds_stripe_header_decode(block, sizeof(block), &out, &why), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_layout_piece_at_unit_edges),
            cmocka_unit_test(test_layout_member_bytes_tail_shorter_than_unit),
            cmocka_unit_test(test_layout_file_smaller_than_a_unit),
            cmocka_unit_test(test_layout_empty_file),
            cmocka_unit_test(test_layout_width_one_is_the_identity),
            cmocka_unit_test(test_layout_walk_matches_member_bytes_widths_1_to_16),
            cmocka_unit_test(test_layout_valid_limits),
            cmocka_unit_test(test_header_round_trip),
            cmocka_unit_test(test_header_rejects_fields_out_of_range),
            cmocka_unit_test(test_header_rejects_damage),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
