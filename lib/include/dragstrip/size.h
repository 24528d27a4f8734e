/* Sizes, rates and durations as people type and read them. */
#ifndef DRAGSTRIP_SIZE_H
#define DRAGSTRIP_SIZE_H

#include <stddef.h>
#include <stdint.h>

/* Parses a byte count: digits with an optional suffix K, M, G, T (powers of 1024, either
 * case, an optional trailing "B" or "iB"). Returns 0, -EINVAL for anything that is not a
 * size ("12Q", "-5", "", "1.5K"), -ERANGE when the value overflows or lies outside
 * [min, max]. */
int ds_size_parse(const char *text, uint64_t min, uint64_t max, uint64_t *out);

/* Parses a rate in bits per second: digits with an optional fraction and suffix k, M, G, T
 * (powers of 1000, as iperf3 and nuttcp read them). Returns 0, -EINVAL or -ERANGE. */
int ds_rate_parse(const char *text, double *bits_per_s);

/* Parses a duration in seconds: a positive decimal ("10", "0.5"), optional suffix s or ms.
 * Returns 0, -EINVAL or -ERANGE (zero, negative, or beyond a year). */
int ds_duration_parse(const char *text, double *seconds);

/* Writes a byte count the way ds_size_parse reads it ("64K", "960K", "1M", "1536"),
 * exact when the value is a whole multiple, else with one decimal ("1.5G"). */
const char *ds_size_format(char *buf, size_t len, uint64_t bytes);

/* Classic ttcp/nuttcp unit letters for -f: k K m M g G (lower case bits, upper case bytes,
 * both in powers of 1024 as classic ttcp printed them), plus the default 'a' which prints
 * MB/s (10^6) and Gbit/s. Returns 0 or -EINVAL. */
int ds_rate_unit_check(char unit);

/* Formats bytes over seconds in the unit of -f (see ds_rate_unit_check), e.g.
 * "1234.56 MB/s = 9.88 Gbit/s" for 'a', "1205.63 KB/sec" for 'K'. */
const char *ds_rate_format(char *buf, size_t len, uint64_t bytes, double seconds, char unit);

#endif
