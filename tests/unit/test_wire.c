/* The frame parser: everything a peer can send wrong is rejected with its own reason. */
#include <dragstrip/wire.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

static size_t data_frame(uint8_t *out, uint32_t msg_len, uint32_t off, uint32_t len)
{
        struct ds_wire_hdr h = {.type = DS_WIRE_DATA,
                                .session = 0xabcdef01,
                                .seq = 42,
                                .msg_len = msg_len,
                                .frag_off = off,
                                .frag_len = len};
        ds_wire_encode(out, &h);
        memset(out + DS_WIRE_HDR_LEN, 0x5a, len);
        return DS_WIRE_HDR_LEN + len;
}

static void test_wire_round_trips_a_header(void **state)
{
        (void)state;
        uint8_t frame[DS_WIRE_HDR_LEN + 100];
        size_t n = data_frame(frame, 1000, 900, 100);
        struct ds_wire_hdr h;
        assert_int_equal(ds_wire_parse(frame, n, 1000, 0, &h), DS_WIRE_OK);
        assert_int_equal(h.type, DS_WIRE_DATA);
        assert_int_equal(h.session, 0xabcdef01);
        assert_int_equal(h.seq, 42);
        assert_int_equal(h.msg_len, 1000);
        assert_int_equal(h.frag_off, 900);
        assert_int_equal(h.frag_len, 100);
}

static void test_wire_accepts_padding_after_a_fragment(void **state)
{
        (void)state;
        uint8_t frame[60] = {0};
        data_frame(frame, 8, 0, 8); /* 40 bytes, padded to Ethernet's minimum */
        struct ds_wire_hdr h;
        assert_int_equal(ds_wire_parse(frame, sizeof(frame), 8, 0, &h), DS_WIRE_OK);
}

static void test_wire_rejects_short_frames_at_every_length(void **state)
{
        (void)state;
        uint8_t frame[DS_WIRE_HDR_LEN + 16];
        size_t n = data_frame(frame, 16, 0, 16);
        struct ds_wire_hdr h;
        for (size_t len = 0; len < DS_WIRE_HDR_LEN; len++)
                assert_int_equal(ds_wire_parse(frame, len, 16, 0, &h), DS_WIRE_SHORT);
        for (size_t len = DS_WIRE_HDR_LEN; len < n; len++)
                assert_int_equal(ds_wire_parse(frame, len, 16, 0, &h), DS_WIRE_LENGTH_BAD);
}

static void test_wire_rejects_each_damaged_field(void **state)
{
        (void)state;
        uint8_t good[DS_WIRE_HDR_LEN + 10], bad[sizeof(good)];
        size_t n = data_frame(good, 10, 0, 10);
        struct ds_wire_hdr h;
        memcpy(bad, good, n);
        bad[0] ^= 1;
        assert_int_equal(ds_wire_parse(bad, n, 10, 0, &h), DS_WIRE_MAGIC_BAD);
        memcpy(bad, good, n);
        bad[2] = 2;
        assert_int_equal(ds_wire_parse(bad, n, 10, 0, &h), DS_WIRE_VERSION_BAD);
        memcpy(bad, good, n);
        bad[3] = 0;
        assert_int_equal(ds_wire_parse(bad, n, 10, 0, &h), DS_WIRE_TYPE_BAD);
        memcpy(bad, good, n);
        bad[3] = DS_WIRE_TYPE_MAX + 1;
        assert_int_equal(ds_wire_parse(bad, n, 10, 0, &h), DS_WIRE_TYPE_BAD);
        /* any other byte of the header breaks its checksum */
        for (unsigned i = 4; i < DS_WIRE_HDR_LEN; i++) {
                memcpy(bad, good, n);
                bad[i] ^= 0x40;
                assert_int_equal(ds_wire_parse(bad, n, 10, 0, &h), DS_WIRE_CHECK_BAD);
        }
}

static void test_wire_never_trusts_offsets_or_lengths(void **state)
{
        (void)state;
        uint8_t frame[DS_WIRE_HDR_LEN + 64];
        struct ds_wire_hdr h;
        /* a fragment that ends past its message, without wrapping */
        struct ds_wire_hdr evil = {
            .type = DS_WIRE_DATA, .msg_len = 100, .frag_off = 0xffffffc0u, .frag_len = 64};
        ds_wire_encode(frame, &evil);
        assert_int_equal(ds_wire_parse(frame, sizeof(frame), 1000, 0, &h), DS_WIRE_OFFSET_BAD);
        evil.frag_off = 60;
        ds_wire_encode(frame, &evil);
        assert_int_equal(ds_wire_parse(frame, sizeof(frame), 1000, 0, &h), DS_WIRE_OFFSET_BAD);
        /* larger than the link accepts */
        data_frame(frame, 1001, 0, 64);
        assert_int_equal(ds_wire_parse(frame, sizeof(frame), 1000, 0, &h), DS_WIRE_TOO_BIG);
        /* an empty data fragment */
        data_frame(frame, 10, 0, 0);
        assert_int_equal(ds_wire_parse(frame, sizeof(frame), 1000, 0, &h), DS_WIRE_LENGTH_BAD);
        /* a stream refuses fragments but trusts nothing past max_msg */
        data_frame(frame, 128, 64, 64);
        assert_int_equal(ds_wire_parse(frame, DS_WIRE_HDR_LEN, 1000, DS_WIRE_STREAM, &h),
                         DS_WIRE_OFFSET_BAD);
        data_frame(frame, 64, 0, 64);
        assert_int_equal(ds_wire_parse(frame, DS_WIRE_HDR_LEN, 1000, DS_WIRE_STREAM, &h),
                         DS_WIRE_OK);
}

static void test_wire_control_frames_are_whole_and_small(void **state)
{
        (void)state;
        uint8_t frame[DS_WIRE_HDR_LEN + 200];
        struct ds_wire_hdr h = {.type = DS_WIRE_CREDIT, .msg_len = 200, .frag_len = 200};
        ds_wire_encode(frame, &h);
        assert_int_equal(ds_wire_parse(frame, sizeof(frame), 0, 0, &h), DS_WIRE_CTL_BAD);
        h = (struct ds_wire_hdr){.type = DS_WIRE_CREDIT, .seq = 3, .msg_len = 8, .frag_len = 8};
        ds_wire_encode(frame, &h);
        assert_int_equal(ds_wire_parse(frame, sizeof(frame), 0, 0, &h), DS_WIRE_CTL_BAD);
        h = (struct ds_wire_hdr){.type = DS_WIRE_CREDIT, .msg_len = 8, .frag_len = 8};
        ds_wire_encode(frame, &h);
        assert_int_equal(ds_wire_parse(frame, sizeof(frame), 0, 0, &h), DS_WIRE_OK);
}

static void test_wire_hello_round_trips_and_checks_fields(void **state)
{
        (void)state;
        union ds_wire_ctl in = {.hello = {.flags = DS_HELLO_VERIFY,
                                          .msg_size = 65536,
                                          .count = 1000,
                                          .flow = 1,
                                          .op = 0,
                                          .streams = 4,
                                          .stream = 3,
                                          .run_id = 0x1122334455667788ull,
                                          .window = 64,
                                          .offer_window = 7,
                                          .offer_len = 3,
                                          .offer = {1, 2, 3}}};
        uint8_t buf[DS_WIRE_CTL_MAX];
        size_t n = ds_wire_ctl_encode(DS_WIRE_HELLO, &in, buf, sizeof(buf));
        assert_true(n > 0);
        union ds_wire_ctl out;
        assert_int_equal(ds_wire_ctl_decode(DS_WIRE_HELLO, buf, n, &out), DS_WIRE_OK);
        assert_memory_equal(&out.hello.run_id, &in.hello.run_id, 8);
        assert_int_equal(out.hello.stream, 3);
        assert_int_equal(out.hello.offer[2], 3);
        /* wrong length, stream past streams, unknown flags, an offer longer than sent */
        assert_int_equal(ds_wire_ctl_decode(DS_WIRE_HELLO, buf, n - 1, &out), DS_WIRE_CTL_BAD);
        in.hello.stream = 4;
        n = ds_wire_ctl_encode(DS_WIRE_HELLO, &in, buf, sizeof(buf));
        assert_int_equal(ds_wire_ctl_decode(DS_WIRE_HELLO, buf, n, &out), DS_WIRE_CTL_BAD);
        in.hello.stream = 0;
        in.hello.flags = 0x80;
        n = ds_wire_ctl_encode(DS_WIRE_HELLO, &in, buf, sizeof(buf));
        assert_int_equal(ds_wire_ctl_decode(DS_WIRE_HELLO, buf, n, &out), DS_WIRE_CTL_BAD);
        in.hello.flags = 0;
        n = ds_wire_ctl_encode(DS_WIRE_HELLO, &in, buf, sizeof(buf));
        buf[44] = DS_WIRE_OFFER_MAX + 1; /* offer_len */
        assert_int_equal(ds_wire_ctl_decode(DS_WIRE_HELLO, buf, n, &out), DS_WIRE_CTL_BAD);
}

static void test_wire_final_and_credit_round_trip(void **state)
{
        (void)state;
        union ds_wire_ctl in = {.final = {.messages = 9,
                                          .bytes = 90,
                                          .recv_ns = 5,
                                          .cpu_user_us = 1234,
                                          .cpu_sys_us = 56}},
                          out;
        in.final.faults[4] = 77;
        uint8_t buf[DS_WIRE_CTL_MAX];
        size_t n = ds_wire_ctl_encode(DS_WIRE_FINAL, &in, buf, sizeof(buf));
        assert_int_equal(n, 80);
        assert_int_equal(ds_wire_ctl_decode(DS_WIRE_FINAL, buf, n, &out), DS_WIRE_OK);
        assert_int_equal(out.final.faults[4], 77);
        assert_int_equal(out.final.recv_ns, 5);
        assert_int_equal(out.final.cpu_user_us, 1234);
        assert_int_equal(out.final.cpu_sys_us, 56);
        /* An older sink's FINAL ends before the CPU times: taken, the CPU unsaid. */
        assert_int_equal(ds_wire_ctl_decode(DS_WIRE_FINAL, buf, 64, &out), DS_WIRE_OK);
        assert_int_equal(out.final.recv_ns, 5);
        assert_true(out.final.cpu_user_us == DS_WIRE_CPU_UNSAID);
        assert_true(out.final.cpu_sys_us == DS_WIRE_CPU_UNSAID);
        assert_int_equal(ds_wire_ctl_decode(DS_WIRE_FINAL, buf, 72, &out), DS_WIRE_CTL_BAD);
        assert_int_equal(ds_wire_ctl_decode(DS_WIRE_FINAL, buf, 81, &out), DS_WIRE_CTL_BAD);
        in.credit.limit = UINT64_MAX;
        n = ds_wire_ctl_encode(DS_WIRE_CREDIT, &in, buf, sizeof(buf));
        assert_int_equal(ds_wire_ctl_decode(DS_WIRE_CREDIT, buf, n, &out), DS_WIRE_OK);
        assert_true(out.credit.limit == UINT64_MAX);
        assert_int_equal(ds_wire_ctl_decode(DS_WIRE_DATA, buf, n, &out), DS_WIRE_TYPE_BAD);
        assert_int_equal(ds_wire_ctl_encode(DS_WIRE_DATA, &in, buf, sizeof(buf)), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_wire_round_trips_a_header),
            cmocka_unit_test(test_wire_accepts_padding_after_a_fragment),
            cmocka_unit_test(test_wire_rejects_short_frames_at_every_length),
            cmocka_unit_test(test_wire_rejects_each_damaged_field),
            cmocka_unit_test(test_wire_never_trusts_offsets_or_lengths),
            cmocka_unit_test(test_wire_control_frames_are_whole_and_small),
            cmocka_unit_test(test_wire_hello_round_trips_and_checks_fields),
            cmocka_unit_test(test_wire_final_and_credit_round_trip),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
