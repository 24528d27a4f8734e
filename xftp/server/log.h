/* xftpd's log. Every line the server writes about itself goes through xftpd_log: on
 * stderr each begins with the time (ISO 8601, local offset), because a log an
 * administrator reads a week later is useless without; with --syslog the lines go to
 * syslog (the journal, under systemd) instead, which keeps its own time. The transfer log
 * (--xferlog) is a file of its own in the wu-ftpd format that log analysers read. */
#ifndef XFTPD_LOG_H
#define XFTPD_LOG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <syslog.h>

/* Called once, before the first line: to_syslog sends every later line to syslog
 * (facility ftp), not to stderr. */
void xftpd_log_open(bool to_syslog);

/* One line (no newline in fmt): "2026-11-25T19:20:01+0000 xftpd: ..." on stderr, or a
 * syslog record of the given priority (LOG_INFO, LOG_WARNING, LOG_ERR). */
void xftpd_log(int priority, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A stream whose lines go through xftpd_log (LOG_WARNING), for library calls that report
 * on a FILE (ds_accept_survive). NULL if it cannot be made: then use stderr. */
FILE *xftpd_log_stream(void);

/* One transfer, as the transfer log records it. */
struct xftpd_xfer_record {
        const char *host; /* the client's address as xftp_addr_text writes it; the
                           * port (and an IPv6 address's brackets) are left out */
        const char *path; /* the file, from the store's root */
        const char *user; /* the login name */
        uint64_t bytes;   /* bytes moved */
        double seconds;   /* how long it took */
        bool upload;      /* i (to the server) or o */
        bool anonymous;   /* a (anonymous) or r (a real user) */
        bool complete;    /* c, or i (incomplete) */
};

/* Opens the transfer log for appending (created 0600 if missing), as root before the
 * server drops it, so the file may live where only root writes. Returns the descriptor
 * (close-on-exec: sessions are forked, not executed) or a negative errno. */
int xftpd_xferlog_open(const char *path);

/* Appends rec to the transfer log fd as one line in one write(2), so that the lines of
 * sessions writing at once never interleave:
 *   Wed Nov 25 19:20:01 2026 3 127.0.0.1 1048576 /pub/f b _ o r alice ftp 0 * c
 * (current time, seconds taken (at least 1), host, bytes, file, binary, no special action,
 * direction, access mode, user, service, authentication, user id, completion). Blanks and
 * control bytes in the file's name become '_', as in vsftpd, so that every field stays
 * one word. Does nothing when fd < 0. */
void xftpd_xferlog_write(int fd, const struct xftpd_xfer_record *rec);

#endif
