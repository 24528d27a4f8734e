/* Sizes, rates and durations as people type and read them.
 *
 * The parsers scan by hand rather than trusting strtoull/strtod alone: those accept
 * leading blanks, signs, hex and exponents, none of which is a size on a command line. */
#include <dragstrip/size.h>

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SECONDS_PER_YEAR (365.0 * 24 * 3600)

static bool is_digit(char c)
{
        return c >= '0' && c <= '9';
}

/* The power of 1024 for a K/M/G/T letter (either case), or 0 for no such letter. */
static unsigned binary_shift(char c)
{
        switch (c) {
        case 'k':
        case 'K':
                return 10;
        case 'm':
        case 'M':
                return 20;
        case 'g':
        case 'G':
                return 30;
        case 't':
        case 'T':
                return 40;
        default:
                return 0;
        }
}

int ds_size_parse(const char *text, uint64_t min, uint64_t max, uint64_t *out)
{
        if (!text || !is_digit(*text))
                return -EINVAL;

        const char *p = text;
        uint64_t value = 0;
        bool overflow = false;
        for (; is_digit(*p); p++) {
                unsigned digit = (unsigned)(*p - '0');
                if (value > (UINT64_MAX - digit) / 10)
                        overflow = true;
                else
                        value = value * 10 + digit;
        }

        unsigned shift = binary_shift(*p);
        if (shift)
                p++;
        if (shift && strcmp(p, "iB") == 0)
                p += 2;
        else if (strcmp(p, "B") == 0)
                p++;
        if (*p != '\0')
                return -EINVAL;

        /* Syntax first: "99999999999999999999Q" is not a size rather than too big. */
        if (overflow || (shift && value > (UINT64_MAX >> shift)))
                return -ERANGE;
        value <<= shift;
        if (value < min || value > max)
                return -ERANGE;
        *out = value;
        return 0;
}

/* Scans a plain decimal ("10", "0.5", "2."): digits, an optional point and fraction.
 * Returns where it stopped, or NULL when there is no number there. */
static const char *scan_decimal(const char *text, double *value)
{
        const char *p = text;
        bool digits = false;

        for (; is_digit(*p); p++)
                digits = true;
        if (*p == '.')
                for (p++; is_digit(*p); p++)
                        digits = true;
        if (!digits || !is_digit(*text))
                return NULL;

        /* The text up to p is now known to be a decimal strtod reads the same way. */
        char *end;
        *value = strtod(text, &end);
        if (end != p)
                return NULL;
        return p;
}

int ds_rate_parse(const char *text, double *bits_per_s)
{
        double value;
        const char *p = text ? scan_decimal(text, &value) : NULL;
        if (!p)
                return -EINVAL;

        double scale = 1;
        switch (*p) {
        case 'k':
        case 'K':
                scale = 1e3;
                break;
        case 'm':
        case 'M':
                scale = 1e6;
                break;
        case 'g':
        case 'G':
                scale = 1e9;
                break;
        case 't':
        case 'T':
                scale = 1e12;
                break;
        }
        if (scale != 1)
                p++;
        if (*p != '\0')
                return -EINVAL;

        value *= scale;
        if (!isfinite(value) || value <= 0)
                return -ERANGE;
        *bits_per_s = value;
        return 0;
}

int ds_duration_parse(const char *text, double *seconds)
{
        double value;
        const char *p = text ? scan_decimal(text, &value) : NULL;
        if (!p)
                return -EINVAL;

        if (strcmp(p, "ms") == 0)
                value /= 1000;
        else if (strcmp(p, "s") != 0 && *p != '\0')
                return -EINVAL;

        if (!isfinite(value) || value <= 0 || value > SECONDS_PER_YEAR)
                return -ERANGE;
        *seconds = value;
        return 0;
}

const char *ds_size_format(char *buf, size_t len, uint64_t bytes)
{
        static const char letters[] = "KMGT";

        /* Exact in the largest unit that divides the count evenly. */
        for (int i = 3; i >= 0; i--) {
                unsigned shift = 10 * (unsigned)(i + 1);
                uint64_t unit = (uint64_t)1 << shift;
                if (bytes >= unit && bytes % unit == 0) {
                        snprintf(buf, len, "%llu%c", (unsigned long long)(bytes >> shift),
                                 letters[i]);
                        return buf;
                }
        }
        /* Not a whole multiple: small counts read best as they are, large ones rounded. */
        if (bytes < ((uint64_t)1 << 20)) {
                snprintf(buf, len, "%llu", (unsigned long long)bytes);
                return buf;
        }
        int i = 3;
        while (bytes < ((uint64_t)1 << (10 * (i + 1))))
                i--;
        snprintf(buf, len, "%.1f%c", (double)bytes / (double)((uint64_t)1 << (10 * (i + 1))),
                 letters[i]);
        return buf;
}

int ds_rate_unit_check(char unit)
{
        return unit && strchr("kKmMgGa", unit) ? 0 : -EINVAL;
}

const char *ds_rate_format(char *buf, size_t len, uint64_t bytes, double seconds, char unit)
{
        /* A run that took no measurable time has no rate; print zero, not inf or NaN. */
        double bytes_per_s = seconds > 0 && isfinite(seconds) ? (double)bytes / seconds : 0;

        switch (unit) {
        case 'k':
                snprintf(buf, len, "%.2f Kbit/sec", bytes_per_s * 8 / 1024);
                break;
        case 'K':
                snprintf(buf, len, "%.2f KB/sec", bytes_per_s / 1024);
                break;
        case 'm':
                snprintf(buf, len, "%.2f Mbit/sec", bytes_per_s * 8 / (1024.0 * 1024));
                break;
        case 'M':
                snprintf(buf, len, "%.2f MB/sec", bytes_per_s / (1024.0 * 1024));
                break;
        case 'g':
                snprintf(buf, len, "%.2f Gbit/sec", bytes_per_s * 8 / (1024.0 * 1024 * 1024));
                break;
        case 'G':
                snprintf(buf, len, "%.2f GB/sec", bytes_per_s / (1024.0 * 1024 * 1024));
                break;
        default: /* 'a', 0, or a letter ds_rate_unit_check would have refused */
                snprintf(buf, len, "%.2f MB/s = %.2f Gbit/s", bytes_per_s / 1e6,
                         bytes_per_s * 8 / 1e9);
                break;
        }
        return buf;
}
