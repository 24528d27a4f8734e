/* Member header encoding and the one parser of it. Layout (little-endian):
 *
 *   0 magic "DSSTRIPE"    8 version u32    12 header_size u32   16 width u32
 *  20 member u32         24 unit u64       32 file_size u64     40 set_id[16]
 *  56 flags u32          60 data_crc u32   64 header_crc u32 (CRC-32C of bytes 0..63)
 *  68 .. DS_STRIPE_HEADER_SIZE-1: zero */
#include <errno.h>
#include <string.h>

#include <dragstrip/stripe_header.h>
#include <dragstrip/stripe_layout.h>

#define KNOWN_FLAGS DS_STRIPE_DATA_CRC

static void put32(uint8_t *p, uint32_t v)
{
        for (int i = 0; i < 4; i++)
                p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
        for (int i = 0; i < 8; i++)
                p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
        uint32_t v = 0;
        for (int i = 3; i >= 0; i--)
                v = (v << 8) | p[i];
        return v;
}

static uint64_t get64(const uint8_t *p)
{
        uint64_t v = 0;
        for (int i = 7; i >= 0; i--)
                v = (v << 8) | p[i];
        return v;
}

void ds_stripe_header_encode(const struct ds_stripe_header *header, void *block)
{
        uint8_t *p = block;

        memset(p, 0, DS_STRIPE_HEADER_SIZE);
        memcpy(p, DS_STRIPE_MAGIC, 8);
        put32(p + 8, DS_STRIPE_VERSION);
        put32(p + 12, DS_STRIPE_HEADER_SIZE);
        put32(p + 16, header->width);
        put32(p + 20, header->member);
        put64(p + 24, header->unit);
        put64(p + 32, header->file_size);
        memcpy(p + 40, header->set_id, DS_STRIPE_SET_ID_SIZE);
        put32(p + 56, header->flags);
        put32(p + 60, header->data_crc);
        put32(p + 64, ds_crc32c(0, p, 64));
}

static int reject(const char **why, const char *reason)
{
        if (why)
                *why = reason;
        return -EINVAL;
}

int ds_stripe_header_decode(const void *block, size_t len, struct ds_stripe_header *out,
                            const char **why)
{
        const uint8_t *p = block;
        struct ds_stripe_header h;
        struct ds_stripe_layout layout;

        if (len < 8 || memcmp(p, DS_STRIPE_MAGIC, 8) != 0)
                return reject(why, "no stripe magic (not a stripe member)");
        if (len < 12 || get32(p + 8) != DS_STRIPE_VERSION)
                return reject(why, "unknown format version (this build reads version 1)");
        if (len < DS_STRIPE_HEADER_SIZE)
                return reject(why, "header block cut short");
        if (get32(p + 64) != ds_crc32c(0, p, 64))
                return reject(why, "header checksum mismatch (header corrupted)");
        if (get32(p + 12) != DS_STRIPE_HEADER_SIZE)
                return reject(why, "header size is not 4096");
        h.width = get32(p + 16);
        h.member = get32(p + 20);
        h.unit = get64(p + 24);
        h.file_size = get64(p + 32);
        memcpy(h.set_id, p + 40, DS_STRIPE_SET_ID_SIZE);
        h.flags = get32(p + 56);
        h.data_crc = get32(p + 60);
        layout.width = h.width;
        layout.unit = h.unit;
        if (h.width < 1 || h.width > DS_STRIPE_MAX_WIDTH)
                return reject(why, "width out of range (1..64)");
        if (h.member >= h.width)
                return reject(why, "member index not below width");
        if (!ds_stripe_layout_valid(&layout))
                return reject(why, "unit out of range (a multiple of 4K, at most 1G)");
        if (h.file_size > DS_STRIPE_MAX_SIZE)
                return reject(why, "file size out of range");
        if (h.flags & ~(uint32_t)KNOWN_FLAGS)
                return reject(why, "unknown flags");
        for (size_t i = DS_STRIPE_HEADER_USED; i < DS_STRIPE_HEADER_SIZE; i++)
                if (p[i] != 0)
                        return reject(why, "non-zero bytes after the header fields");
        *out = h;
        return 0;
}
