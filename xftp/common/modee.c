/* MODE E block headers, the Parallelism option, and the end of a transfer. */
#include "modee.h"

#include <errno.h>
#include <strings.h>

#include <dragstrip/error.h>

static void put_be64(uint8_t *out, uint64_t value)
{
        for (int i = 7; i >= 0; i--) {
                out[i] = (uint8_t)value;
                value >>= 8;
        }
}

static uint64_t get_be64(const uint8_t *in)
{
        uint64_t value = 0;
        for (int i = 0; i < 8; i++)
                value = value << 8 | in[i];
        return value;
}

void xftp_modee_encode(const struct xftp_modee_block *block, uint8_t out[XFTP_MODEE_HEADER])
{
        out[0] = block->desc;
        put_be64(out + 1, block->count);
        put_be64(out + 9, block->offset);
}

/* What a refused descriptor asks for, by its first bit the receiver does not take. */
static const char *refused_kind(uint8_t refused)
{
        if (refused & XFTP_MODEE_RESTART)
                return "a restart marker";
        if (refused & XFTP_MODEE_SUSPECT)
                return "suspect data";
        if (refused & XFTP_MODEE_EOR)
                return "a record";
        return "an unknown bit";
}

int xftp_modee_decode(const uint8_t in[XFTP_MODEE_HEADER], uint64_t limit,
                      struct xftp_modee_block *out, struct ds_error *err)
{
        const uint8_t known = XFTP_MODEE_EOF | XFTP_MODEE_EOD | XFTP_MODEE_CLOSE;
        const struct xftp_modee_block block = {
            .desc = in[0],
            .count = get_be64(in + 1),
            .offset = get_be64(in + 9),
        };
        const unsigned long long count = block.count, offset = block.offset;

        /* Every message is made of the header's own bytes and of limit, nothing else. */
        if (block.desc & ~known)
                return ds_fail(err, 0, "block descriptor 0x%02x: %s, not accepted", block.desc,
                               refused_kind(block.desc & ~known)),
                       -EPROTO;
        if (block.desc & XFTP_MODEE_EOF) {
                if (block.count != 0)
                        return ds_fail(err, 0, "an EOF block with %llu data bytes", count), -EPROTO;
                if (block.offset < 1 || block.offset > XFTP_MODEE_MAX_STREAMS)
                        return ds_fail(err, 0, "an EOF block announcing %llu connections (1 to %u)",
                                       offset, XFTP_MODEE_MAX_STREAMS),
                               -EPROTO;
        } else if (block.count > 0) {
                /* No file has a byte past off_t's largest offset: such a block is the peer's
                 * error, not one for the disk to be blamed for (pwrite's EINVAL). */
                if (block.count > XFTP_MODEE_OFFSET_MAX ||
                    block.offset > XFTP_MODEE_OFFSET_MAX - block.count)
                        return ds_fail(err, 0, "block %llu+%llu ends past the largest file offset",
                                       offset, count),
                               -EPROTO;
                if (block.offset + block.count > limit)
                        return ds_fail(err, 0, "block %llu+%llu beyond the limit %llu", offset,
                                       count, (unsigned long long)limit),
                               -EFBIG;
        }
        *out = block;
        return 0;
}

/* A decimal number of at most 9 digits at *p, advancing p. */
static int parse_count(const char **p, unsigned *value)
{
        unsigned n = 0, digits = 0;

        while (**p >= '0' && **p <= '9') {
                if (++digits > 9)
                        return -EINVAL;
                n = n * 10 + (unsigned)(**p - '0');
                (*p)++;
        }
        if (digits == 0)
                return -EINVAL;
        *value = n;
        return 0;
}

int xftp_modee_parse_parallelism(const char *arg, unsigned *streams)
{
        static const char name[] = "Parallelism=";
        const char *p = arg;
        unsigned first, other;

        if (strncasecmp(p, name, sizeof(name) - 1) != 0)
                return -EINVAL;
        p += sizeof(name) - 1;
        if (parse_count(&p, &first) < 0)
                return -EINVAL;
        if (*p == ',') { /* GridFTP's start,min,max */
                for (int i = 0; i < 2; i++) {
                        if (*p++ != ',' || parse_count(&p, &other) < 0)
                                return -EINVAL;
                }
        }
        if (*p == ';')
                p++;
        if (*p != '\0' || first < 1 || first > XFTP_MODEE_MAX_STREAMS)
                return -EINVAL;
        *streams = first;
        return 0;
}

int xftp_modee_end_note(struct xftp_modee_end *end, const struct xftp_modee_block *block)
{
        if (block->desc & XFTP_MODEE_EOF) {
                if (end->eods_expected != 0 || block->offset < end->eods_seen)
                        return -EPROTO;
                end->eods_expected = (unsigned)block->offset;
        }
        if (block->desc & XFTP_MODEE_EOD) {
                end->eods_seen++;
                if (end->eods_seen > XFTP_MODEE_MAX_STREAMS ||
                    (end->eods_expected != 0 && end->eods_seen > end->eods_expected))
                        return -EPROTO;
        }
        return 0;
}

bool xftp_modee_end_done(const struct xftp_modee_end *end)
{
        return end->eods_expected != 0 && end->eods_seen == end->eods_expected;
}
