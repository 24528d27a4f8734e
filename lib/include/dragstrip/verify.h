/* The --verify message pattern (sequence accounting is seqtrack.h).
 *
 * A verified message is a fixed pseudo-random 4 KiB page of bytes, repeated, with an
 * 8-byte stamp at the start of every page: the message number mixed with the page number. The
 * sender fills each pool buffer once and then only restamps it, so --verify costs the sender a few
 * stores per page; the receiver compares the stamps and the rest against the reference page
 * (memcmp, the fastest check there is), which catches damaged bytes, short messages, stale buffers
 * and pages out of place. */
#ifndef DRAGSTRIP_VERIFY_H
#define DRAGSTRIP_VERIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ds_error;

#define DS_PATTERN_PAGE 4096u

struct ds_pattern {
        uint8_t *ref; /* one page of pattern (less for shorter messages), no stamp */
        uint32_t msg_len;
};

/* Builds the reference for messages of msg_len bytes (>= 8). Returns 0 or -ENOMEM. */
int ds_pattern_init(struct ds_pattern *pattern, uint32_t msg_len, struct ds_error *err);
void ds_pattern_free(struct ds_pattern *pattern);

/* Writes the whole pattern for message seq into buf (msg_len bytes): once per buffer. */
void ds_pattern_fill(const struct ds_pattern *pattern, void *buf, uint64_t seq);
/* Rewrites only the stamps of a buffer already filled, for message seq. */
void ds_pattern_stamp(const struct ds_pattern *pattern, void *buf, uint64_t seq);
/* True when buf (len bytes) is exactly message seq. */
bool ds_pattern_check(const struct ds_pattern *pattern, const void *buf, uint32_t len,
                      uint64_t seq);

#endif
