/* libFuzzer target for what the xftp data path parses from a peer: PORT and EPRT
 * arguments, PASV and EPSV replies, MODE E block headers and the Parallelism option.
 * Besides memory errors it checks what each promises on success: addresses that format
 * and parse back to themselves, block headers that encode back to the same bytes and lie
 * within the limit and the largest file offset, a stream count within 1..16. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dataconn.h"
#include "modee.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_addr_round_trip(const struct xftp_addr *addr)
{
        char text[XFTP_ADDR_TEXT];
        struct xftp_addr again;

        if (xftp_format_eprt(addr, text, sizeof(text)) != 0 || xftp_parse_eprt(text, &again) != 0 ||
            !xftp_addr_same_host(addr, &again) || xftp_addr_port(addr) != xftp_addr_port(&again))
                __builtin_trap();
        if (xftp_format_port(addr, text, sizeof(text)) == 0 &&
            (xftp_parse_port(text, &again) != 0 || !xftp_addr_same_host(addr, &again)))
                __builtin_trap();
}

static void check_block(const uint8_t *bytes, uint64_t limit)
{
        struct xftp_modee_block block;
        uint8_t again[XFTP_MODEE_HEADER];

        if (xftp_modee_decode(bytes, limit, &block, NULL) != 0)
                return;
        xftp_modee_encode(&block, again);
        if (memcmp(again, bytes, XFTP_MODEE_HEADER) != 0)
                __builtin_trap();
        if (!(block.desc & XFTP_MODEE_EOF) && block.count > 0 &&
            (block.offset > limit || block.count > limit - block.offset ||
             block.offset > XFTP_MODEE_OFFSET_MAX ||
             block.count > XFTP_MODEE_OFFSET_MAX - block.offset))
                __builtin_trap();
        struct xftp_modee_end end = {0};
        if (xftp_modee_end_note(&end, &block) == 0 && end.eods_expected > XFTP_MODEE_MAX_STREAMS)
                __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char text[512];
        struct xftp_addr addr;
        uint16_t port;
        unsigned streams;

        if (size >= XFTP_MODEE_HEADER + 8) {
                uint64_t limit;
                memcpy(&limit, data + XFTP_MODEE_HEADER, sizeof(limit));
                check_block(data, limit);
        }
        size_t len = size < sizeof(text) - 1 ? size : sizeof(text) - 1;
        memcpy(text, data, len);
        text[len] = '\0';
        if (xftp_parse_port(text, &addr) == 0)
                check_addr_round_trip(&addr);
        if (xftp_parse_pasv(text, &addr) == 0)
                check_addr_round_trip(&addr);
        if (xftp_parse_eprt(text, &addr) == 0)
                check_addr_round_trip(&addr);
        if (xftp_parse_epsv(text, &port) == 0 && port == 0)
                __builtin_trap();
        if (xftp_modee_parse_parallelism(text, &streams) == 0 &&
            (streams < 1 || streams > XFTP_MODEE_MAX_STREAMS))
                __builtin_trap();
        return 0;
}
