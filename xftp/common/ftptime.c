#include "ftptime.h"

#include <errno.h>
#include <string.h>

/* The value of n digits at text, or -1 when one of them is not a digit. */
static int digits(const char *text, size_t n)
{
        int value = 0;

        for (size_t i = 0; i < n; i++) {
                if (text[i] < '0' || text[i] > '9')
                        return -1;
                value = value * 10 + (text[i] - '0');
        }
        return value;
}

int xftp_time_parse(const char *text, struct timespec *out)
{
        static const size_t widths[] = {4, 2, 2, 2, 2, 2};
        int fields[6];
        size_t at = 0;

        for (size_t i = 0; i < 6; i++) {
                fields[i] = digits(text + at, widths[i]); /* stops at the first non-digit */
                if (fields[i] < 0)
                        return -EINVAL;
                at += widths[i];
        }
        long nsec = 0;
        if (text[at] == '.') {
                size_t n = strspn(text + at + 1, "0123456789");
                if (n == 0 || n > 9)
                        return -EINVAL;
                nsec = digits(text + at + 1, n);
                for (size_t i = n; i < 9; i++)
                        nsec *= 10;
                at += 1 + n;
        }
        struct tm tm = {.tm_year = fields[0] - 1900,
                        .tm_mon = fields[1] - 1,
                        .tm_mday = fields[2],
                        .tm_hour = fields[3],
                        .tm_min = fields[4],
                        .tm_sec = fields[5]};
        time_t t = timegm(&tm);
        struct tm back;
        /* timegm folds February 30 into March 2: a date that comes back changed is none. */
        if (!gmtime_r(&t, &back) || back.tm_year != fields[0] - 1900 ||
            back.tm_mon != fields[1] - 1 || back.tm_mday != fields[2] ||
            back.tm_hour != fields[3] || back.tm_min != fields[4] || back.tm_sec != fields[5])
                return -EINVAL;
        *out = (struct timespec){.tv_sec = t, .tv_nsec = nsec};
        return (int)at;
}

void xftp_time_format(const struct timespec *when, char *out, size_t room)
{
        struct tm tm;
        time_t sec = when->tv_sec;

        gmtime_r(&sec, &tm);
        strftime(out, room, "%Y%m%d%H%M%S", &tm);
}
