/* MODE E, GridFTP's extended block mode: the file travels as blocks, each a 17-byte header
 * and its data, over one or more data connections at once.
 *
 * Header: descriptor (1 byte), byte count (8 bytes, big-endian), offset (8 bytes,
 * big-endian); then count bytes of the file's range [offset, offset + count). Blocks may
 * arrive in any order across connections. Every connection ends with a block marked EOD;
 * exactly one block on one of them is marked EOF, and its offset field is the number of
 * connections whose EOD the receiver must see (its count is 0). Descriptor bit 0x04 says
 * the sender closes the connection after this block. */
#ifndef XFTP_MODEE_H
#define XFTP_MODEE_H

#include <stdbool.h>
#include <stdint.h>

struct ds_error;

#define XFTP_MODEE_HEADER 17u

enum xftp_modee_desc {
        XFTP_MODEE_EOR = 0x80,     /* end of record (record structure; not used for files) */
        XFTP_MODEE_EOF = 0x40,     /* offset field: connections that will send EOD */
        XFTP_MODEE_SUSPECT = 0x20, /* the sender suspects errors in this block */
        XFTP_MODEE_RESTART = 0x10, /* a restart marker, not data */
        XFTP_MODEE_EOD = 0x08,     /* no more data on this connection */
        XFTP_MODEE_CLOSE = 0x04,   /* the sender will close this connection */
};

#define XFTP_MODEE_MAX_STREAMS 16u /* Parallelism=N takes 1..16 */

/* The largest off_t: no block's data may end past it. */
#define XFTP_MODEE_OFFSET_MAX ((uint64_t)INT64_MAX)

struct xftp_modee_block {
        uint8_t desc;
        uint64_t count;
        uint64_t offset; /* for an EOF block: the count of connections to see EOD on */
};

/* Writes the 17 header bytes of block. */
void xftp_modee_encode(const struct xftp_modee_block *block, uint8_t out[XFTP_MODEE_HEADER]);

/* Reads 17 header bytes from a peer and checks them against what the receiver allows:
 * data must lie within [0, limit) (limit: the size the transfer was told of, or the
 * largest file accepted) and end by XFTP_MODEE_OFFSET_MAX, RESTART, SUSPECT and EOR blocks
 * are refused, and an EOF block must carry count 0 and 1..XFTP_MODEE_MAX_STREAMS
 * connections. Returns 0 and *out, or -EPROTO (a malformed header, data past
 * XFTP_MODEE_OFFSET_MAX) / -EFBIG (data beyond limit) with *out untouched and err (may be
 * NULL) saying what was wrong in the header's own terms. */
int xftp_modee_decode(const uint8_t in[XFTP_MODEE_HEADER], uint64_t limit,
                      struct xftp_modee_block *out, struct ds_error *err);

/* Parses what follows "OPTS RETR ": "Parallelism=N;" or GridFTP's
 * "Parallelism=start,min,max;" (start counts; min and max must be numbers too), the
 * trailing ';' optional, the name case-insensitive. *streams gets N,
 * 1 <= N <= XFTP_MODEE_MAX_STREAMS. Returns 0 or -EINVAL. */
int xftp_modee_parse_parallelism(const char *arg, unsigned *streams);

/* Tracks the end of a MODE E transfer across its connections: the receiver is done when
 * it has seen one EOF and as many EODs as that EOF announced. */
struct xftp_modee_end {
        unsigned eods_seen;
        unsigned eods_expected; /* 0 until the EOF block arrives */
};

/* Counts block's EOD and EOF bits. Returns 0, or -EPROTO for a second EOF, an EOF that
 * announces fewer connections than have already ended, or more EODs than announced. */
int xftp_modee_end_note(struct xftp_modee_end *end, const struct xftp_modee_block *block);
/* True when the EOF has arrived and every announced connection has sent its EOD. */
bool xftp_modee_end_done(const struct xftp_modee_end *end);

#endif
