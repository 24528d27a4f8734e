/* The --verify pattern. */
#include <dragstrip/verify.h>

#include <dragstrip/error.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define STAMP_MIX 0x9E3779B97F4A7C15ull

int ds_pattern_init(struct ds_pattern *pattern, uint32_t msg_len, struct ds_error *err)
{
        if (msg_len < 8)
                return ds_fail(err, -EINVAL, "verify: messages of %u bytes are too short", msg_len);
        /* One page of reference, repeated in every page of a message: the check then reads
         * each received byte once against a page that stays in L1, where a whole-message
         * reference doubled the memory traffic. The stamps keep pages apart. */
        uint32_t ref_len = msg_len < DS_PATTERN_PAGE ? msg_len : DS_PATTERN_PAGE;
        pattern->ref = malloc(ref_len);
        if (!pattern->ref)
                return ds_fail(err, -ENOMEM, "verify: reference pattern of %u bytes", ref_len);
        pattern->msg_len = msg_len;
        /* xorshift64: any fixed stream that no buffer of zeros or repeated bytes matches */
        uint64_t x = 0x2545F4914F6CDD1Dull;
        for (uint32_t i = 0; i < ref_len; i++) {
                if (i % 8 == 0) {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                }
                pattern->ref[i] = (uint8_t)(x >> (8 * (i % 8)));
        }
        return 0;
}

void ds_pattern_free(struct ds_pattern *pattern)
{
        free(pattern->ref);
        pattern->ref = NULL;
}

static uint64_t stamp_of(uint64_t seq, uint32_t page)
{
        return seq ^ ((uint64_t)(page + 1) * STAMP_MIX);
}

void ds_pattern_stamp(const struct ds_pattern *pattern, void *buf, uint64_t seq)
{
        uint8_t *p = buf;
        for (uint32_t off = 0, page = 0; off + 8 <= pattern->msg_len;
             off += DS_PATTERN_PAGE, page++) {
                uint64_t stamp = stamp_of(seq, page);
                memcpy(p + off, &stamp, 8);
        }
}

void ds_pattern_fill(const struct ds_pattern *pattern, void *buf, uint64_t seq)
{
        uint8_t *p = buf;
        for (uint32_t off = 0; off < pattern->msg_len; off += DS_PATTERN_PAGE) {
                uint32_t left = pattern->msg_len - off;
                memcpy(p + off, pattern->ref, left < DS_PATTERN_PAGE ? left : DS_PATTERN_PAGE);
        }
        ds_pattern_stamp(pattern, buf, seq);
}

bool ds_pattern_check(const struct ds_pattern *pattern, const void *buf, uint32_t len, uint64_t seq)
{
        if (len != pattern->msg_len)
                return false;
        const uint8_t *p = buf;
        for (uint32_t off = 0, page = 0; off < len; off += DS_PATTERN_PAGE, page++) {
                uint32_t end = len - off < DS_PATTERN_PAGE ? len : off + DS_PATTERN_PAGE;
                uint32_t body = off;
                if (off + 8 <= len) {
                        uint64_t stamp = stamp_of(seq, page);
                        if (memcmp(p + off, &stamp, 8) != 0)
                                return false;
                        body += 8;
                }
                if (memcmp(p + body, pattern->ref + (body - off), end - body) != 0)
                        return false;
        }
        return true;
}
