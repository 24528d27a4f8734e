/* Where the bytes of a striped file live: pure arithmetic, no I/O.
 *
 * A striped file of width W and unit U keeps stripe unit k (logical bytes [kU, kU+U)) in
 * member k mod W at data offset (k div W) * U. Each member file starts with a header block
 * of DS_STRIPE_HEADER_SIZE bytes, so data offset d sits at file offset
 * DS_STRIPE_HEADER_SIZE + d and stays O_DIRECT-aligned when d is. */
#ifndef DRAGSTRIP_STRIPE_LAYOUT_H
#define DRAGSTRIP_STRIPE_LAYOUT_H

#include <stdbool.h>
#include <stdint.h>

#define DS_STRIPE_HEADER_SIZE  4096u
#define DS_STRIPE_MAX_WIDTH    64u
#define DS_STRIPE_MIN_UNIT     4096u               /* keeps units O_DIRECT-aligned */
#define DS_STRIPE_MAX_UNIT     (1ull << 30)        /* 1 GiB */
#define DS_STRIPE_MAX_SIZE     (UINT64_C(1) << 60) /* far beyond any disk, far from overflow */
#define DS_STRIPE_DEFAULT_UNIT (1024u * 1024u)

struct ds_stripe_layout {
        uint32_t width; /* members, 1..DS_STRIPE_MAX_WIDTH */
        uint64_t unit;  /* bytes per stripe unit, a multiple of DS_STRIPE_MIN_UNIT */
};

/* One contiguous piece of a logical range that lies in one member. */
struct ds_stripe_piece {
        uint32_t member;      /* which member holds it */
        uint64_t data_offset; /* offset in that member's data (after the header block) */
        uint64_t length;      /* bytes, never crossing a unit boundary */
};

/* True when width and unit are within the limits above. */
bool ds_stripe_layout_valid(const struct ds_stripe_layout *layout);

/* The piece that starts at logical offset and runs for at most length bytes: it ends at
 * the end of offset's stripe unit or after length bytes, whichever comes first. */
struct ds_stripe_piece ds_stripe_layout_piece(const struct ds_stripe_layout *layout,
                                              uint64_t offset, uint64_t length);

/* Bytes of data member holds in a file of file_size logical bytes. */
uint64_t ds_stripe_member_bytes(const struct ds_stripe_layout *layout, uint32_t member,
                                uint64_t file_size);

#endif
