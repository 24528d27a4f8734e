/* libFuzzer target for what xftp parses of a server's text: replies on the control
 * connection (read_line's bounds, multi-line replies, SIZE's and MLST's answers) fed
 * through a socket pair as a server would send them, and listing lines (LIST and MLSD
 * entries, the size fact, the sanitiser). Besides memory errors it checks what each
 * promises: reply codes in 100..599 and texts within FTP_REPLY_MAX, entry names that are
 * non-empty, within the line, without '/' and neither "." nor "..", and shown text without
 * a control byte. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <dragstrip/error.h>

#include "ftp.h"
#include "ftptime.h"
#include "listing.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct ftp ftp; /* 72 KiB: not on the stack */

static void check_replies(const uint8_t *data, size_t size)
{
        int sv[2];
        struct ds_error err;
        uint64_t value;

        if (size > (32u << 10) || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                return;
        if (write(sv[1], data, size) != (ssize_t)size) {
                close(sv[0]);
                close(sv[1]);
                return;
        }
        shutdown(sv[1], SHUT_WR); /* the commands sent below still find room to land */
        memset(&ftp, 0, sizeof(ftp));
        xftp_conn_plain(&ftp.ctl, sv[0]); /* closed below, by xftp_conn_close */
        snprintf(ftp.host, sizeof(ftp.host), "fuzz");
        ftp.timeout_ms = 1000;
        ftp.type_i = true;
        ftp_mlst_size(&ftp, "f", &value, &err);
        ftp_size(&ftp, "SIZE", "f", &value, &err);
        for (int i = 0; i < 1000; i++) {
                int code = ftp_reply(&ftp, &err);
                if (code < 0)
                        break;
                if (code < 100 || code > 599 || strlen(ftp.reply) >= FTP_REPLY_MAX)
                        __builtin_trap();
        }
        xftp_conn_close(&ftp.ctl);
        close(sv[1]);
}

static void check_line(const char *text, size_t len, bool mlsd)
{
        char *line = malloc(len + 1);
        char *name;
        struct listing_facts facts;
        uint64_t value;
        struct timespec when;

        if (!line)
                return;
        memcpy(line, text, len);
        line[len] = '\0';
        listing_size_fact(line, &value);
        if (xftp_time_parse(line, &when) > (int)len)
                __builtin_trap(); /* a parser that read past the text */
        const char *left_out;
        bool usable = listing_entry(line, mlsd, &name, &facts, &left_out);
        if (usable && (name < line || name >= line + len || !*name || strchr(name, '/') ||
                       strcmp(name, ".") == 0 || strcmp(name, "..") == 0))
                __builtin_trap();
        if (!usable && left_out && (name < line || name >= line + len))
                __builtin_trap(); /* a left-out entry's name lies in its line */
        free(line);
}

static void check_shown(const char *text, size_t len)
{
        char shown[512];
        FILE *out = fmemopen(shown, sizeof(shown), "w");

        if (!out)
                return;
        listing_show(out, text, len < 256 ? len : 256, false);
        long used = ftell(out);
        fclose(out);
        for (long i = 0; i < used && i < (long)sizeof(shown); i++)
                if ((unsigned char)shown[i] < 0x20 || shown[i] == 0x7f)
                        __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const char *text = (const char *)data;

        check_replies(data, size);
        for (size_t start = 0; start < size;) {
                const char *nl = memchr(text + start, '\n', size - start);
                size_t len = nl ? (size_t)(nl - (text + start)) : size - start;
                if (!memchr(text + start, '\0', len)) {
                        check_line(text + start, len, true);
                        check_line(text + start, len, false);
                }
                start += len + 1;
        }
        check_shown(text, size);
        return 0;
}
