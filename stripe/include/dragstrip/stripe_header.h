/* The member header: the self-describing block at the start of every member file.
 *
 * Encoded little-endian in the first bytes of a DS_STRIPE_HEADER_SIZE block (the rest is
 * zero); docs/stripe-format.md is the reference. ds_stripe_header_decode() is the one parser
 * of it and trusts no field before checking it. */
#ifndef DRAGSTRIP_STRIPE_HEADER_H
#define DRAGSTRIP_STRIPE_HEADER_H

#include <stddef.h>
#include <stdint.h>

#define DS_STRIPE_MAGIC       "DSSTRIPE" /* 8 bytes, no NUL on disk */
#define DS_STRIPE_VERSION     1u
#define DS_STRIPE_SET_ID_SIZE 16u
#define DS_STRIPE_HEADER_USED 68u /* encoded bytes; the rest of the block is zero */

enum ds_stripe_header_flags {
        /* data_crc is the CRC-32C of every data byte of this member, written in order. */
        DS_STRIPE_DATA_CRC = 1u << 0,
};

struct ds_stripe_header {
        uint32_t width;
        uint32_t member;
        uint64_t unit;
        uint64_t file_size; /* logical bytes of the whole striped file */
        uint8_t set_id[DS_STRIPE_SET_ID_SIZE];
        uint32_t flags;
        uint32_t data_crc;
};

/* Writes header into block (DS_STRIPE_HEADER_SIZE bytes, padding zeroed, checksum set). */
void ds_stripe_header_encode(const struct ds_stripe_header *header, void *block);

/* Parses len bytes read from the start of a member. Returns 0 and fills out, or -EINVAL
 * with *why (static text) naming the first check that failed: too short, magic, version,
 * checksum, a field out of range, unknown flags, non-zero padding. */
int ds_stripe_header_decode(const void *block, size_t len, struct ds_stripe_header *out,
                            const char **why);

/* CRC-32C (Castagnoli), the checksum of headers and member data: pass 0 to start, the
 * previous result to continue. Uses the implementation that ran fastest on this machine
 * when first called (timed, since an emulated CPU can make its crc32 instruction the
 * slowest); DS_CRC32C=table|slice8|sse42 in the environment forces one (a name this CPU
 * cannot run is ignored). */
uint32_t ds_crc32c(uint32_t crc, const void *data, size_t len);

#endif
