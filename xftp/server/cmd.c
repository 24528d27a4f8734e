/* The command parser (RFC 959 section 5.3, with RFC 2389, 2428, 3659 and the extensions of
 * docs/xftp.md). Everything here reads bytes from an unauthenticated peer. */
#include "cmd.h"

#include "ftptime.h"

#include <errno.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define IAC 255 /* Telnet: interpret as command (RFC 854) */
#define SB  250
#define SE  240

enum arg_rule {
        ARG_NONE,    /* nothing but spaces may follow */
        ARG_OPT,     /* free text, possibly empty */
        ARG_REQ,     /* free text, not empty */
        ARG_NUM,     /* one decimal number */
        ARG_ALLO,    /* a number, optionally "R number" after it */
        ARG_RANG,    /* two decimal numbers */
        ARG_TYPE,    /* A [N], I, L 8 */
        ARG_MODE,    /* S, E */
        ARG_STRU,    /* F */
        ARG_MISSING, /* a known verb xftpd does not do: 502 */
};

struct verb_entry {
        const char *name;
        enum xftpd_verb verb;
        enum arg_rule rule;
};

static const struct verb_entry verbs[] = {
    {"USER", V_USER, ARG_REQ},      {"PASS", V_PASS, ARG_OPT},      {"CWD", V_CWD, ARG_REQ},
    {"XCWD", V_CWD, ARG_REQ},       {"CDUP", V_CDUP, ARG_NONE},     {"XCUP", V_CDUP, ARG_NONE},
    {"PWD", V_PWD, ARG_NONE},       {"XPWD", V_PWD, ARG_NONE},      {"TYPE", V_TYPE, ARG_TYPE},
    {"MODE", V_MODE, ARG_MODE},     {"STRU", V_STRU, ARG_STRU},     {"PORT", V_PORT, ARG_REQ},
    {"PASV", V_PASV, ARG_NONE},     {"EPRT", V_EPRT, ARG_REQ},      {"EPSV", V_EPSV, ARG_OPT},
    {"LIST", V_LIST, ARG_OPT},      {"NLST", V_NLST, ARG_OPT},      {"RETR", V_RETR, ARG_REQ},
    {"STOR", V_STOR, ARG_REQ},      {"APPE", V_APPE, ARG_REQ},      {"DELE", V_DELE, ARG_REQ},
    {"MKD", V_MKD, ARG_REQ},        {"XMKD", V_MKD, ARG_REQ},       {"RMD", V_RMD, ARG_REQ},
    {"XRMD", V_RMD, ARG_REQ},       {"RNFR", V_RNFR, ARG_REQ},      {"RNTO", V_RNTO, ARG_REQ},
    {"ABOR", V_ABOR, ARG_NONE},     {"NOOP", V_NOOP, ARG_NONE},     {"QUIT", V_QUIT, ARG_NONE},
    {"SYST", V_SYST, ARG_NONE},     {"STAT", V_STAT, ARG_OPT},      {"ALLO", V_ALLO, ARG_ALLO},
    {"FEAT", V_FEAT, ARG_NONE},     {"OPTS", V_OPTS, ARG_REQ},      {"SIZE", V_SIZE, ARG_REQ},
    {"MDTM", V_MDTM, ARG_REQ},      {"MFMT", V_MFMT, ARG_REQ},      {"REST", V_REST, ARG_NUM},
    {"MLST", V_MLST, ARG_OPT},      {"MLSD", V_MLSD, ARG_OPT},      {"HASH", V_HASH, ARG_REQ},
    {"RANG", V_RANG, ARG_RANG},     {"PSIZ", V_PSIZ, ARG_REQ},      {"HELP", V_HELP, ARG_OPT},
    {"ACCT", V_COUNT, ARG_MISSING}, {"SMNT", V_COUNT, ARG_MISSING}, {"REIN", V_COUNT, ARG_MISSING},
    {"STOU", V_COUNT, ARG_MISSING}, {"SITE", V_COUNT, ARG_MISSING}, {"AUTH", V_AUTH, ARG_REQ},
    {"PBSZ", V_PBSZ, ARG_REQ},      {"PROT", V_PROT, ARG_REQ},      {"CCC", V_CCC, ARG_NONE},
    {"RPSV", V_RPSV, ARG_NONE},     {"RPRT", V_RPRT, ARG_REQ},
};

static int refuse(const char **reply, int code, const char *text)
{
        *reply = text;
        return code;
}

/* Copies buf without its Telnet commands (IAC IAC is a literal 255; IAC SB ... IAC SE and
 * every other IAC pair or triple vanish) and without the line end. Returns the length, or
 * -1 for a NUL byte. */
static long strip_telnet(const unsigned char *buf, size_t len, char *out)
{
        size_t used = 0;

        for (size_t i = 0; i < len; i++) {
                if (buf[i] == 0)
                        return -1;
                if (buf[i] != IAC) {
                        out[used++] = (char)buf[i];
                        continue;
                }
                if (i + 1 >= len)
                        break;
                unsigned char op = buf[++i];
                if (op == IAC) {
                        out[used++] = (char)IAC;
                } else if (op == SB) {
                        while (i + 1 < len && !(buf[i] == IAC && buf[i + 1] == SE))
                                i++;
                        i++;
                } else if (op >= 251) { /* WILL, WONT, DO, DONT take an option byte */
                        i++;
                }
        }
        while (used > 0 && (out[used - 1] == '\n' || out[used - 1] == '\r'))
                used--;
        out[used] = '\0';
        return (long)used;
}

/* The largest number a command takes: 18 digits, below 2^63, what an off_t holds. */
#define NUMBER_MAX 999999999999999999
#define QUOTED_(x) #x
#define QUOTED(x)  QUOTED_(x)

/* A decimal number, at most NUMBER_MAX; *end gets where it stopped. Returns 0, -EINVAL
 * when no digit comes first, or -ERANGE for a number too large. */
static int parse_number(const char *text, const char **end, uint64_t *value)
{
        const char *p = text;
        uint64_t n = 0;

        if (*p < '0' || *p > '9')
                return -EINVAL;
        for (; *p >= '0' && *p <= '9'; p++) {
                n = n * 10 + (uint64_t)(*p - '0'); /* n was at most NUMBER_MAX: no wrap */
                if (n > (uint64_t)NUMBER_MAX)
                        return -ERANGE;
        }
        *end = p;
        *value = n;
        return 0;
}

/* A number parse_number refused (rc): too large, said with the limit, or malformed. */
static int refuse_number(const char **reply, int rc, const char *malformed)
{
        return refuse(reply, 501,
                      rc == -ERANGE ? "501 Number too large: the largest is " QUOTED(NUMBER_MAX) "."
                                    : malformed);
}

static int check_numbers(struct xftpd_cmd *cmd, enum arg_rule rule, const char **reply)
{
        const char *p;
        int rc = parse_number(cmd->arg, &p, &cmd->num[0]);

        if (rc < 0)
                return refuse_number(reply, rc, "501 Expected a decimal number.");
        if (rule == ARG_ALLO && strncasecmp(p, " R ", 3) == 0) {
                uint64_t record;
                if ((rc = parse_number(p + 3, &p, &record)) < 0)
                        return refuse_number(reply, rc,
                                             "501 ALLO takes a size, then R and a number.");
        } else if (rule == ARG_RANG) {
                if ((rc = *p == ' ' ? parse_number(p + 1, &p, &cmd->num[1]) : -EINVAL) < 0)
                        return refuse_number(reply, rc, "501 RANG takes a start and an end.");
                if (cmd->num[1] < cmd->num[0] && !(cmd->num[0] == 1 && cmd->num[1] == 0))
                        return refuse(reply, 501, "501 RANG end lies before its start.");
        }
        if (*p)
                return refuse(reply, 501, "501 Unexpected text after the number.");
        return 0;
}

static int check_letter(struct xftpd_cmd *cmd, enum arg_rule rule, const char **reply)
{
        const char *a = cmd->arg;
        char c = (char)(a[0] & ~0x20);

        if (!a[0])
                return refuse(reply, 501, "501 Argument missing.");
        if (rule == ARG_TYPE) {
                if ((c == 'A' && (!a[1] || strcasecmp(a + 1, " N") == 0)) || (c == 'I' && !a[1]) ||
                    (c == 'L' && strcmp(a + 1, " 8") == 0)) {
                        cmd->type = c == 'A' ? 'A' : 'I';
                        return 0;
                }
                return refuse(reply, 504, "504 TYPE A, A N, I or L 8 only.");
        }
        if (a[1] != '\0')
                return refuse(reply, 501, "501 One letter expected.");
        if (rule == ARG_MODE && (c == 'S' || c == 'E')) {
                cmd->type = c;
                return 0;
        }
        if (rule == ARG_STRU && c == 'F') {
                cmd->type = c;
                return 0;
        }
        return refuse(reply, 504, rule == ARG_MODE ? "504 MODE S or E only." : "504 STRU F only.");
}

static int check_arg(struct xftpd_cmd *cmd, enum arg_rule rule, const char **reply)
{
        for (size_t i = 0; i < cmd->arg_len; i++)
                if ((unsigned char)cmd->arg[i] < 0x20 || cmd->arg[i] == 0x7f)
                        return refuse(reply, 501, "501 Control characters in the argument.");
        switch (rule) {
        case ARG_NONE:
                if (cmd->arg_len > strspn(cmd->arg, " "))
                        return refuse(reply, 501, "501 This command takes no argument.");
                return 0;
        case ARG_OPT:
                return 0;
        case ARG_REQ:
                return cmd->arg_len ? 0 : refuse(reply, 501, "501 Argument missing.");
        case ARG_NUM:
        case ARG_ALLO:
        case ARG_RANG:
                return check_numbers(cmd, rule, reply);
        case ARG_TYPE:
        case ARG_MODE:
        case ARG_STRU:
                return check_letter(cmd, rule, reply);
        case ARG_MISSING:
                break;
        }
        return refuse(reply, 502, "502 Command not implemented.");
}

int xftpd_cmd_parse(const char *buf, size_t len, struct xftpd_cmd *cmd, const char **reply)
{
        char line[XFTPD_LINE_MAX + 1];

        if (len > XFTPD_LINE_MAX)
                return refuse(reply, 500, "500 Command line too long.");
        long n = strip_telnet((const unsigned char *)buf, len, line);
        if (n < 0)
                return refuse(reply, 500, "500 NUL byte in the command.");

        size_t verb_len = 0;
        while (verb_len < 5 && ((line[verb_len] | 0x20) >= 'a' && (line[verb_len] | 0x20) <= 'z'))
                verb_len++;
        if (verb_len < 3 || verb_len > 4 || (line[verb_len] != ' ' && line[verb_len] != '\0'))
                return refuse(reply, 500, "500 Not a command.");

        const struct verb_entry *entry = NULL;
        for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]) && !entry; i++)
                if (strlen(verbs[i].name) == verb_len &&
                    strncasecmp(verbs[i].name, line, verb_len) == 0)
                        entry = &verbs[i];
        if (!entry)
                return refuse(reply, 500, "500 Unknown command.");

        const char *arg = line[verb_len] == ' ' ? line + verb_len + 1 : line + verb_len;
        cmd->verb = entry->verb;
        cmd->name = entry->name;
        cmd->arg_len = (size_t)(line + n - arg);
        memcpy(cmd->arg, arg, cmd->arg_len + 1);
        cmd->num[0] = cmd->num[1] = 0;
        cmd->type = 0;
        return check_arg(cmd, entry->rule, reply);
}

int xftpd_parse_mfmt(const char *arg, struct xftpd_mfmt *out)
{
        struct timespec when;
        int n = xftp_time_parse(arg, &when);

        if (n < 0 || arg[n] != ' ' || arg[n + 1] == '\0')
                return -EINVAL;
        *out = (struct xftpd_mfmt){
            .sec = when.tv_sec, .nsec = when.tv_nsec, .time_len = (size_t)n, .path = arg + n + 1};
        return 0;
}
