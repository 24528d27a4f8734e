/* xftpd's command parser: one line from a client, as bytes, into a verb and its checked
 * argument. The only place that reads a command line; the fuzz target drives it. */
#ifndef XFTPD_CMD_H
#define XFTPD_CMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define XFTPD_LINE_MAX 2048u /* bytes of a command line, CRLF included */

enum xftpd_verb {
        V_USER,
        V_PASS,
        V_ACCT,
        V_CWD,
        V_CDUP,
        V_PWD,
        V_TYPE,
        V_MODE,
        V_STRU,
        V_PORT,
        V_PASV,
        V_EPRT,
        V_EPSV,
        V_LIST,
        V_NLST,
        V_RETR,
        V_STOR,
        V_APPE,
        V_DELE,
        V_MKD,
        V_RMD,
        V_RNFR,
        V_RNTO,
        V_ABOR,
        V_NOOP,
        V_QUIT,
        V_SYST,
        V_STAT,
        V_ALLO,
        V_FEAT,
        V_OPTS,
        V_SIZE,
        V_MDTM,
        V_MFMT, /* draft-somers-ftp-mfxx */
        V_REST,
        V_MLST,
        V_MLSD,
        V_HASH,
        V_RANG,
        V_PSIZ,
        V_HELP,
        V_AUTH, /* RFC 4217 */
        V_PBSZ,
        V_PROT,
        V_CCC,
        V_RPSV, /* the verbs data channel (docs/xftp.md) */
        V_RPRT,
        V_COUNT
};

/* What the verb's argument is; the parser checks it before the session sees it. */
struct xftpd_cmd {
        enum xftpd_verb verb;
        const char *name;         /* the verb in upper case, as the table spells it */
        char arg[XFTPD_LINE_MAX]; /* the argument, NUL-terminated, Telnet commands removed */
        size_t arg_len;
        uint64_t num[2]; /* REST n, ALLO n, RANG start end, RPRT port */
        char type;       /* TYPE: 'A' or 'I'; MODE: 'S' or 'E' */
};

/* Parses the line buf[0..len) (its CR LF or LF included or not). Returns 0 with cmd
 * filled, or a reply code with *reply pointing at a static one-line text for it:
 * 500 (not a command, a line over XFTPD_LINE_MAX, NUL bytes), 501 (argument missing,
 * extra, or malformed), 502 (a verb xftpd knows but does not do), 504 (a TYPE, MODE or
 * STRU it does not serve). Never reads outside buf. */
int xftpd_cmd_parse(const char *buf, size_t len, struct xftpd_cmd *cmd, const char **reply);

/* MFMT's argument, "YYYYMMDDHHMMSS[.s...] path" (a UTC time, up to nine digits of a second
 * after the point): the time as seconds and nanoseconds since the epoch, the length of
 * its text, and where the path starts. Returns 0, or -EINVAL for a malformed time, a date
 * that does not exist (February 30, a 60th second) or no path. */
struct xftpd_mfmt {
        int64_t sec;
        long nsec;
        size_t time_len;
        const char *path;
};
int xftpd_parse_mfmt(const char *arg, struct xftpd_mfmt *out);

#endif
