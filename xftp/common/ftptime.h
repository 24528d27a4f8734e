/* RFC 3659's time-val, "YYYYMMDDHHMMSS" and an optional fraction ".F", always UTC: MLSD's
 * modify fact and MDTM's reply, which the client reads, and MFMT's argument, which the
 * server reads. One parser for both ends, so that neither takes a time the other refuses. */
#ifndef XFTP_FTPTIME_H
#define XFTP_FTPTIME_H

#include <stddef.h>
#include <time.h>

#define XFTP_TIME_MAX 16 /* "YYYYMMDDHHMMSS" and its NUL */

/* Parses the time-val text starts with into *out (the fraction's nine digits at most, as
 * nanoseconds). Returns how many characters it took, or -EINVAL when text starts with no
 * date and time that exist (February 30, hour 24, second 60, a dot with no digit). */
int xftp_time_parse(const char *text, struct timespec *out);

/* when's whole seconds as "YYYYMMDDHHMMSS" in UTC; room is at least XFTP_TIME_MAX. */
void xftp_time_format(const struct timespec *when, char *out, size_t room);

#endif
