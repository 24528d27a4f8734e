/* Which bytes of an upload have arrived: a whole prefix from the first byte, and the
 * disjoint ranges written beyond it, in a table the caller sizes once. MODE E blocks come
 * in any order over several connections; the receiver commits a file only when they
 * leave no gap, and records the prefix as the point a REST may continue from.
 *
 * Adding is a binary search and a memmove of the table at most, no allocation: a few
 * microseconds beside a block of megabytes. A peer that scatters more disjoint ranges
 * than the table holds is refused rather than tracked without limit. */
#ifndef XFTP_RANGES_H
#define XFTP_RANGES_H

#include <stdbool.h>
#include <stdint.h>

struct xftp_range {
        uint64_t start, end; /* [start, end) */
};

struct xftp_ranges {
        uint64_t prefix;          /* [first byte, prefix) has all arrived */
        struct xftp_range *items; /* beyond prefix: sorted, disjoint, none touching another */
        unsigned count, cap;
};

/* Starts tracking an upload whose first byte is start, with room for cap ranges beyond
 * the prefix in slots (the caller's, kept while r is used). */
void xftp_ranges_init(struct xftp_ranges *r, uint64_t start, struct xftp_range *slots,
                      unsigned cap);

/* Notes that [start, end) arrived; ranges that overlap or touch join into one. Returns 0,
 * or -E2BIG (r unchanged) when that would need more than cap ranges beyond the prefix. */
int xftp_ranges_add(struct xftp_ranges *r, uint64_t start, uint64_t end);

/* True when every byte from the first up to the last that arrived has arrived. When false,
 * *gap_start and *gap_end (may be NULL) get the first range missing. */
bool xftp_ranges_whole(const struct xftp_ranges *r, uint64_t *gap_start, uint64_t *gap_end);

#endif
