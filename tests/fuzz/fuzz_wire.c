/* libFuzzer target for what sink does with frames from the wire: the header parser, the
 * control decoder, and train reassembly on a datagram link (lib/src/link_dgram.c).
 *
 * Input: 4 bytes of negotiated message size (kept small), 4 bytes of session, then frames,
 * each a 2-byte big-endian length and that many bytes (the last one takes what is left). */
#include <dragstrip/link.h>
#include <dragstrip/wire.h>

#include "../../lib/src/link_dgram.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Where the byte sum goes, so the compiler keeps the reads of the message. */
static volatile uint8_t fuzz_sink;

/* Checks one frame as the raw and udp links do, and releases what comes out. */
static void take(struct dgram *dg, const uint8_t *frame, size_t len)
{
        /* A copy of exactly len bytes, so a read past the frame is caught by ASan. */
        uint8_t *copy = malloc(len ? len : 1);
        if (!copy)
                return;
        memcpy(copy, frame, len);
        struct ds_msg msg;
        enum dgram_verdict v = dgram_take(dg, copy, len, &msg);
        if (v == DGRAM_INPLACE || v == DGRAM_OWNED) {
                if (msg.kind == DS_MSG_CTL) {
                        union ds_wire_ctl ctl;
                        (void)ds_wire_ctl_decode(msg.ctl_type, msg.buf, msg.len, &ctl);
                }
                uint8_t sum = 0; /* touch every byte the message claims */
                for (uint32_t i = 0; i < msg.len; i++)
                        sum ^= ((const uint8_t *)msg.buf)[i];
                fuzz_sink = sum;
                if (v == DGRAM_OWNED)
                        dgram_release(dg, &msg);
        }
        /* The stream parser, too: a tcp record header. */
        struct ds_wire_hdr h;
        (void)ds_wire_parse(copy, len, dg->msg_size, DS_WIRE_STREAM, &h);
        free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 8)
                return 0;
        uint32_t msg_size = ((uint32_t)data[0] << 8 | data[1]) % 8192 + 1;
        struct ds_link link = {0};
        struct dgram dg = {.link = &link};
        memcpy(&dg.session, data + 4, 4);
        if (dgram_prepare(&dg, msg_size, NULL) < 0)
                return 0;
        size_t at = 8;
        while (at < size) {
                size_t len = size - at;
                if (len >= 2) {
                        size_t want = (size_t)data[at] << 8 | data[at + 1];
                        at += 2;
                        len = want < size - at ? want : size - at;
                }
                take(&dg, data + at, len);
                at += len;
        }
        dgram_free(&dg);
        return 0;
}
