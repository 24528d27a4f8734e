/* The xftp codecs: PORT/PASV/EPRT/EPSV text, MODE E block headers, Parallelism=N, the
 * end of a MODE E transfer, and hash names and digests. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <dragstrip/error.h>

#include "dataconn.h"
#include "hash.h"
#include "modee.h"

static void test_port_round_trips_and_rejects_junk(void **state)
{
        (void)state;
        struct xftp_addr addr;
        char text[XFTP_ADDR_TEXT];

        assert_int_equal(xftp_parse_port("127,0,0,1,19,137", &addr), 0);
        assert_int_equal(addr.ss.ss_family, AF_INET);
        assert_int_equal(xftp_addr_port(&addr), 19 * 256 + 137);
        assert_int_equal(xftp_format_port(&addr, text, sizeof(text)), 0);
        assert_string_equal(text, "127,0,0,1,19,137");
        assert_int_equal(xftp_parse_port(" 10 , 1,2,3,0,21 ", &addr), 0);
        assert_string_equal(xftp_addr_text(&addr, text, sizeof(text)), "10.1.2.3:21");
        static const char *const junk[] = {
            "",           "1,2,3,4,5",        "1,2,3,4,5,6,7", "256,0,0,1,0,1", "1,2,3,4,5,6x",
            "1,,3,4,5,6", "0001,2,3,4,5,6",   "-1,2,3,4,5,6",  "1.2.3.4,5,6",   "a,b,c,d,e,f",
            "1,2,3,4,5,", "1,2,3,4,5,6 junk", "1,2,3,4,0,0"};
        for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++)
                if (xftp_parse_port(junk[i], &addr) != -EINVAL)
                        fail_msg("PORT '%s' should be -EINVAL", junk[i]);
}

static void test_pasv_reply_found_with_or_without_parentheses(void **state)
{
        (void)state;
        struct xftp_addr addr;
        char text[XFTP_ADDR_TEXT];

        assert_int_equal(xftp_parse_pasv("227 Entering Passive Mode (127,0,0,1,200,10).", &addr),
                         0);
        assert_string_equal(xftp_addr_text(&addr, text, sizeof(text)), "127.0.0.1:51210");
        assert_int_equal(xftp_parse_pasv("227 =192,168,0,9,0,20", &addr), 0);
        assert_string_equal(xftp_addr_text(&addr, text, sizeof(text)), "192.168.0.9:20");
        assert_int_equal(xftp_parse_pasv("227 Entering Passive Mode.", &addr), -EINVAL);
        assert_int_equal(xftp_parse_pasv("227 (1,2,3,4,5,999)", &addr), -EINVAL);
}

static void test_eprt_both_families_and_any_delimiter(void **state)
{
        (void)state;
        struct xftp_addr addr;
        char text[XFTP_ADDR_TEXT];

        assert_int_equal(xftp_parse_eprt("|1|132.235.1.2|6275|", &addr), 0);
        assert_string_equal(xftp_addr_text(&addr, text, sizeof(text)), "132.235.1.2:6275");
        assert_int_equal(xftp_format_eprt(&addr, text, sizeof(text)), 0);
        assert_string_equal(text, "|1|132.235.1.2|6275|");
        assert_int_equal(xftp_parse_eprt("!2!::1!5282!", &addr), 0);
        assert_int_equal(addr.ss.ss_family, AF_INET6);
        assert_string_equal(xftp_addr_text(&addr, text, sizeof(text)), "[::1]:5282");
        assert_int_equal(xftp_format_eprt(&addr, text, sizeof(text)), 0);
        assert_string_equal(text, "|2|::1|5282|");
        assert_int_equal(xftp_parse_eprt("|3|1.2.3.4|5|", &addr), -EAFNOSUPPORT);
        static const char *const junk[] = {"",
                                           "|1|1.2.3.4|5",
                                           "|1|1.2.3.4|0|",
                                           "|1|::1|5|",
                                           "|2|1.2.3.4|5|",
                                           "|1||5|",
                                           "|1|1.2.3.4|65536|",
                                           "1|1.2.3.4|5|1",
                                           "|1|1.2.3.4|5|x",
                                           "\x7f"
                                           "1\x7f"
                                           "1.2.3.4\x7f"
                                           "5\x7f"};
        for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++)
                if (xftp_parse_eprt(junk[i], &addr) != -EINVAL)
                        fail_msg("EPRT '%s' should be -EINVAL", junk[i]);
}

static void test_epsv_reply_gives_the_port(void **state)
{
        (void)state;
        uint16_t port = 0;
        char text[XFTP_ADDR_TEXT];

        assert_int_equal(xftp_parse_epsv("229 Entering Extended Passive Mode (|||6446|)", &port),
                         0);
        assert_int_equal(port, 6446);
        assert_int_equal(xftp_format_epsv(6446, text, sizeof(text)), 0);
        assert_string_equal(text, "(|||6446|)");
        assert_int_equal(xftp_parse_epsv("229 (!!!21!)", &port), 0);
        assert_int_equal(port, 21);
        static const char *const junk[] = {"229 Extended",    "229 (|||0|)",   "229 (||6446|)",
                                           "229 (|||70000|)", "229 (|||64x|)", "229 (|||6446)"};
        for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++)
                if (xftp_parse_epsv(junk[i], &port) != -EINVAL)
                        fail_msg("EPSV '%s' should be -EINVAL", junk[i]);
}

static void test_same_host_sees_through_mapped_ipv4(void **state)
{
        (void)state;
        struct xftp_addr v4, v6, other;

        assert_int_equal(xftp_parse_port("127,0,0,1,0,1", &v4), 0);
        assert_int_equal(xftp_parse_eprt("|2|::ffff:127.0.0.1|9|", &v6), 0);
        assert_int_equal(xftp_parse_port("127,0,0,2,0,1", &other), 0);
        assert_true(xftp_addr_same_host(&v4, &v6));
        assert_false(xftp_addr_same_host(&v4, &other));
        char text[XFTP_ADDR_TEXT];
        assert_int_equal(xftp_format_port(&v6, text, sizeof(text)), 0);
        assert_string_equal(text, "127,0,0,1,0,9");
        assert_int_equal(xftp_parse_eprt("|2|::1|9|", &v6), 0);
        assert_int_equal(xftp_format_port(&v6, text, sizeof(text)), -EAFNOSUPPORT);
}

static void test_modee_header_round_trips(void **state)
{
        (void)state;
        uint8_t wire[XFTP_MODEE_HEADER];
        struct xftp_modee_block in = {.desc = XFTP_MODEE_EOD,
                                      .count = 0x0102030405060708ull,
                                      .offset = 0x1112131415161718ull},
                                out;

        xftp_modee_encode(&in, wire);
        assert_int_equal(wire[0], XFTP_MODEE_EOD);
        assert_int_equal(wire[1], 0x01);
        assert_int_equal(wire[8], 0x08);
        assert_int_equal(wire[9], 0x11);
        assert_int_equal(wire[16], 0x18);
        assert_int_equal(xftp_modee_decode(wire, UINT64_MAX, &out, NULL), 0);
        assert_int_equal(xftp_modee_decode(wire, 0x1214161819191b1full, &out, NULL), -EFBIG);
        in.offset = UINT64_MAX - 5;
        in.count = 10;
        xftp_modee_encode(&in, wire);
        assert_int_equal(xftp_modee_decode(wire, UINT64_MAX, &out, NULL), -EPROTO); /* wraps */
        /* Data past the largest off_t, though the limit allows it: malformed, not too big. */
        in.offset = 1ull << 63;
        in.count = 1;
        xftp_modee_encode(&in, wire);
        assert_int_equal(xftp_modee_decode(wire, UINT64_MAX, &out, NULL), -EPROTO);
        in.offset = XFTP_MODEE_OFFSET_MAX - 4;
        in.count = 8;
        xftp_modee_encode(&in, wire);
        assert_int_equal(xftp_modee_decode(wire, UINT64_MAX, &out, NULL), -EPROTO);
        in.count = 4; /* its last byte at the largest offset a file has */
        xftp_modee_encode(&in, wire);
        assert_int_equal(xftp_modee_decode(wire, UINT64_MAX, &out, NULL), 0);
        in.offset = 4096;
        in.count = 1 << 20;
        xftp_modee_encode(&in, wire);
        assert_int_equal(xftp_modee_decode(wire, UINT64_MAX, &out, NULL), 0);
        assert_int_equal(out.desc, in.desc);
        assert_int_equal(out.count, in.count);
        assert_int_equal(out.offset, in.offset);
}

static void test_modee_decode_refuses_what_the_receiver_was_not_told(void **state)
{
        (void)state;
        uint8_t wire[XFTP_MODEE_HEADER];
        struct xftp_modee_block out;
        struct xftp_modee_block cases[] = {
            {.desc = 0, .count = 10, .offset = 95},                /* past limit 100 */
            {.desc = XFTP_MODEE_RESTART, .count = 0, .offset = 0}, /* restart marker */
            {.desc = XFTP_MODEE_SUSPECT, .count = 1, .offset = 0},
            {.desc = 0x01, .count = 1},
            {.desc = XFTP_MODEE_EOF, .count = 1, .offset = 1}, /* EOF carries no data */
            {.desc = XFTP_MODEE_EOF, .count = 0, .offset = 0}, /* zero connections */
            {.desc = XFTP_MODEE_EOF, .count = 0, .offset = 17},
        };
        int expect[] = {-EFBIG, -EPROTO, -EPROTO, -EPROTO, -EPROTO, -EPROTO, -EPROTO};
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                xftp_modee_encode(&cases[i], wire);
                if (xftp_modee_decode(wire, 100, &out, NULL) != expect[i])
                        fail_msg("case %zu: expected %d", i, expect[i]);
        }
        struct xftp_modee_block edge = {.count = 10, .offset = 90};
        xftp_modee_encode(&edge, wire);
        assert_int_equal(xftp_modee_decode(wire, 100, &out, NULL), 0);
        struct xftp_modee_block eof = {.desc = XFTP_MODEE_EOF | XFTP_MODEE_EOD, .offset = 16};
        xftp_modee_encode(&eof, wire);
        assert_int_equal(xftp_modee_decode(wire, 0, &out, NULL), 0);
}

/* A refused header leaves the block alone and is described by its own bytes only. */
static void test_modee_decode_says_what_was_wrong_from_the_header(void **state)
{
        (void)state;
        uint8_t wire[XFTP_MODEE_HEADER];
        struct xftp_modee_block untouched, out;
        struct ds_error err;
        struct {
                struct xftp_modee_block block;
                const char *text;
        } cases[] = {
            {{.desc = XFTP_MODEE_SUSPECT, .count = 5, .offset = 7},
             "block descriptor 0x20: suspect data, not accepted"},
            {{.desc = XFTP_MODEE_RESTART | XFTP_MODEE_EOD},
             "block descriptor 0x18: a restart marker"},
            {{.desc = XFTP_MODEE_EOF, .count = 5, .offset = 2}, "an EOF block with 5 data bytes"},
            {{.desc = XFTP_MODEE_EOF, .offset = 40}, "an EOF block announcing 40 connections"},
            {{.count = 10, .offset = UINT64_MAX - 5}, "block 18446744073709551610+10 ends past"},
            {{.count = 1, .offset = 1ull << 63}, "block 9223372036854775808+1 ends past"},
            {{.count = 10, .offset = 95}, "block 95+10 beyond the limit 100"},
        };
        memset(&untouched, 0xa5, sizeof(untouched));
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                xftp_modee_encode(&cases[i].block, wire);
                out = untouched;
                memset(err.text, 0, sizeof(err.text));
                assert_true(xftp_modee_decode(wire, 100, &out, &err) < 0);
                assert_memory_equal(&out, &untouched, sizeof(out));
                if (!strstr(err.text, cases[i].text))
                        fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err.text, cases[i].text);
        }
}

static void test_parallelism_takes_both_forms_within_1_to_16(void **state)
{
        (void)state;
        unsigned n = 0;
        assert_int_equal(xftp_modee_parse_parallelism("Parallelism=4;", &n), 0);
        assert_int_equal(n, 4);
        assert_int_equal(xftp_modee_parse_parallelism("parallelism=8,8,8;", &n), 0);
        assert_int_equal(n, 8);
        assert_int_equal(xftp_modee_parse_parallelism("Parallelism=16", &n), 0);
        assert_int_equal(n, 16);
        static const char *const junk[] = {
            "Parallelism=0;",   "Parallelism=17;", "Parallelism=;",
            "Parallelism=4,4;", "Parallelism=4;x", "Parallelism=9999999999;",
            "Parallel=4;",      "Parallelism=-1;", "Parallelism=4,,4;"};
        for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++)
                if (xftp_modee_parse_parallelism(junk[i], &n) != -EINVAL)
                        fail_msg("'%s' should be -EINVAL", junk[i]);
        assert_int_equal(n, 16);
}

static void test_end_needs_eof_and_every_eod(void **state)
{
        (void)state;
        struct xftp_modee_end end = {0};
        struct xftp_modee_block eod = {.desc = XFTP_MODEE_EOD};
        struct xftp_modee_block eof = {.desc = XFTP_MODEE_EOF | XFTP_MODEE_EOD, .offset = 3};

        assert_int_equal(xftp_modee_end_note(&end, &eod), 0);
        assert_false(xftp_modee_end_done(&end));
        assert_int_equal(xftp_modee_end_note(&end, &eof), 0);
        assert_false(xftp_modee_end_done(&end));
        assert_int_equal(xftp_modee_end_note(&end, &eod), 0);
        assert_true(xftp_modee_end_done(&end));
        assert_int_equal(xftp_modee_end_note(&end, &eod), -EPROTO); /* one too many */
        struct xftp_modee_end again = {0};
        assert_int_equal(xftp_modee_end_note(&again, &eof), 0);
        assert_int_equal(xftp_modee_end_note(&again, &eof), -EPROTO); /* a second EOF */
        struct xftp_modee_end late = {0};
        struct xftp_modee_block eof1 = {.desc = XFTP_MODEE_EOF, .offset = 1};
        assert_int_equal(xftp_modee_end_note(&late, &eod), 0);
        assert_int_equal(xftp_modee_end_note(&late, &eod), 0);
        assert_int_equal(xftp_modee_end_note(&late, &eof1), -EPROTO); /* fewer than ended */
}

static void test_hash_names_and_known_digests(void **state)
{
        (void)state;
        enum xftp_hash_algo algo;
        struct xftp_hash hash;
        char hex[XFTP_HASH_HEX_MAX];

        assert_int_equal(xftp_hash_parse("sha-256", &algo), 0);
        assert_int_equal(algo, XFTP_HASH_SHA256);
        assert_int_equal(xftp_hash_parse("CRC32C", &algo), 0);
        assert_int_equal(algo, XFTP_HASH_CRC32C);
        assert_int_equal(xftp_hash_parse("MD5", &algo), -EINVAL);
        assert_string_equal(xftp_hash_name(XFTP_HASH_SHA256), "SHA-256");

        assert_int_equal(xftp_hash_begin(&hash, XFTP_HASH_SHA256), 0);
        xftp_hash_update(&hash, "ab", 2);
        xftp_hash_update(&hash, "c", 1);
        xftp_hash_end(&hash, hex);
        assert_string_equal(hex,
                            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_int_equal(xftp_hash_begin(&hash, XFTP_HASH_CRC32C), 0);
        xftp_hash_update(&hash, "123456789", 9);
        xftp_hash_end(&hash, hex);
        assert_string_equal(hex, "e3069283"); /* the CRC-32C check value */
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_port_round_trips_and_rejects_junk),
            cmocka_unit_test(test_pasv_reply_found_with_or_without_parentheses),
            cmocka_unit_test(test_eprt_both_families_and_any_delimiter),
            cmocka_unit_test(test_epsv_reply_gives_the_port),
            cmocka_unit_test(test_same_host_sees_through_mapped_ipv4),
            cmocka_unit_test(test_modee_header_round_trips),
            cmocka_unit_test(test_modee_decode_refuses_what_the_receiver_was_not_told),
            cmocka_unit_test(test_modee_decode_says_what_was_wrong_from_the_header),
            cmocka_unit_test(test_parallelism_takes_both_forms_within_1_to_16),
            cmocka_unit_test(test_end_needs_eof_and_every_eod),
            cmocka_unit_test(test_hash_names_and_known_digests),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
