/* xftpd's log lines and its transfer log (log.h). */
#include "log.h"

#include "text.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

static bool use_syslog;

void xftpd_log_open(bool to_syslog)
{
        use_syslog = to_syslog;
        /* LOG_NDELAY: the socket is opened now, before root is dropped and before any
         * chroot-like confinement could hide /dev/log from the sessions. */
        if (to_syslog)
                openlog("xftpd", LOG_PID | LOG_NDELAY, LOG_FTP);
}

/* The text of one line, formatted once, then written in one call so that the lines of
 * sessions logging at once do not interleave. */
static void log_text(int priority, const char *text)
{
        char line[1200], stamp[40];
        struct timespec now;
        struct tm tm;

        if (use_syslog) {
                syslog(priority, "%s", text);
                return;
        }
        clock_gettime(CLOCK_REALTIME, &now);
        localtime_r(&now.tv_sec, &tm);
        strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S%z", &tm);
        int len = snprintf(line, sizeof(line), "%s xftpd: %s\n", stamp, text);
        if (len >= (int)sizeof(line)) { /* cut, but still one line */
                len = (int)sizeof(line) - 1;
                line[len - 1] = '\n';
        }
        (void)!write(STDERR_FILENO, line, (size_t)len);
}

void xftpd_log(int priority, const char *fmt, ...)
{
        char text[1024];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(text, sizeof(text), fmt, ap);
        va_end(ap);
        /* Names come from clients: no control character of theirs (C0, DEL, C1, a line
         * separator) reaches a terminal or forges a line. */
        xftp_text_clean(text, '?');
        log_text(priority, text);
}

/* fopencookie's writer: each line written (the stream is line-buffered) is logged, less
 * its newline and the "xftpd: " the library put before it. */
static ssize_t stream_write(void *cookie, const char *buf, size_t len)
{
        char text[1024];
        size_t n = len < sizeof(text) - 1 ? len : sizeof(text) - 1;

        (void)cookie;
        memcpy(text, buf, n);
        while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r'))
                n--;
        text[n] = '\0';
        const char *start = strncmp(text, "xftpd: ", 7) == 0 ? text + 7 : text;
        if (*start)
                log_text(LOG_WARNING, start);
        return (ssize_t)len;
}

FILE *xftpd_log_stream(void)
{
        FILE *f = fopencookie(NULL, "w", (cookie_io_functions_t){.write = stream_write});
        if (f)
                setvbuf(f, NULL, _IOLBF, 0);
        return f;
}

int xftpd_xferlog_open(const char *path)
{
        int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600);
        return fd < 0 ? -errno : fd;
}

/* "192.0.2.1" of "192.0.2.1:40000", "2001:db8::1" of "[2001:db8::1]:40000". */
static void host_only(const char *text, char *out, size_t len)
{
        const char *colon = strrchr(text, ':');
        size_t n = colon ? (size_t)(colon - text) : strlen(text);

        if (text[0] == '[' && n >= 2 && text[n - 1] == ']')
                snprintf(out, len, "%.*s", (int)(n - 2), text + 1);
        else
                snprintf(out, len, "%.*s", (int)n, text);
}

void xftpd_xferlog_write(int fd, const struct xftpd_xfer_record *rec)
{
        char line[4608], name[4096], stamp[32], host[64];
        time_t now = time(NULL);
        struct tm tm;

        if (fd < 0)
                return;
        /* Fields are split at spaces: a name's spaces and control characters are '_'. */
        snprintf(name, sizeof(name), "/%s", rec->path);
        xftp_text_clean(name, '_');
        for (char *p = name; *p; p++)
                if (*p == ' ')
                        *p = '_';
        host_only(rec->host, host, sizeof(host));
        localtime_r(&now, &tm);
        strftime(stamp, sizeof(stamp), "%a %b %e %H:%M:%S %Y", &tm);
        unsigned long seconds = rec->seconds < 1.0 ? 1 : (unsigned long)(rec->seconds + 0.5);
        int len =
            snprintf(line, sizeof(line), "%s %lu %s %llu %s b _ %c %c %s ftp 0 * %c\n", stamp,
                     seconds, host, (unsigned long long)rec->bytes, name, rec->upload ? 'i' : 'o',
                     rec->anonymous ? 'a' : 'r', rec->user, rec->complete ? 'c' : 'i');
        if (len > 0 && len < (int)sizeof(line))
                (void)!write(fd, line, (size_t)len);
}
