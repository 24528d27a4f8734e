/* The control connection of the client: replies are read line by line through a bounded
 * buffer with a deadline on each, and everything in them is checked before use. */
#include "ftp.h"

#include "ftptime.h"
#include "xtls.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <dragstrip/error.h>
#include <dragstrip/net.h>
#include <dragstrip/serve.h>

#include "listing.h"
#include "modee.h"
#include "xverbs.h"

/* One line of a reply, without its CR LF, into line, by deadline (a whole reply's: a
 * server dripping a byte at a time cannot stretch it). Returns 0 or a negative errno. */
static int read_line(struct ftp *ftp, char *line, size_t room, uint64_t deadline,
                     struct ds_error *err)
{
        for (;;) {
                char *nl = memchr(ftp->in, '\n', ftp->in_len);
                if (nl) {
                        size_t len = (size_t)(nl - ftp->in);
                        size_t keep = len > 0 && ftp->in[len - 1] == '\r' ? len - 1 : len;
                        if (keep >= room)
                                return ds_fail(err, 0, "%s: reply line over %zu bytes", ftp->host,
                                               room - 1),
                                       -EPROTO;
                        memcpy(line, ftp->in, keep);
                        line[keep] = '\0';
                        ftp->in_len -= len + 1;
                        memmove(ftp->in, nl + 1, ftp->in_len);
                        return 0;
                }
                if (ftp->in_len >= sizeof(ftp->in))
                        return ds_fail(err, 0, "%s: reply line over %zu bytes", ftp->host,
                                       room - 1),
                               -EPROTO;
                int left = ftp->timeout_ms < 0 ? -1 : ds_deadline_left_ms(deadline);
                int rc =
                    left == 0 ? -ETIMEDOUT : xftp_conn_wait(&ftp->ctl, POLLIN, left, ftp->stop);
                if (rc == 0)
                        rc = -ETIMEDOUT;
                if (rc < 0)
                        return ds_fail(err, rc == -ETIMEDOUT ? 0 : rc,
                                       rc == -ETIMEDOUT ? "%s: no reply within %d ms"
                                                        : "%s: waiting for a reply",
                                       ftp->host, ftp->timeout_ms),
                               rc;
                ssize_t n = xftp_conn_recv(&ftp->ctl, ftp->in + ftp->in_len,
                                           sizeof(ftp->in) - ftp->in_len, MSG_DONTWAIT);
                if (n == 0)
                        return ds_fail(err, 0, "%s closed the control connection", ftp->host),
                               -ECONNRESET;
                if (n < 0 && n != -EAGAIN && n != -EINTR)
                        return ds_fail(err, (int)n, "%s: control connection", ftp->host);
                if (n > 0)
                        ftp->in_len += (size_t)n;
        }
}

/* The three-digit code at the start of line, or -1. */
static int line_code(const char *line)
{
        if (line[0] < '1' || line[0] > '5' || line[1] < '0' || line[1] > '9' || line[2] < '0' ||
            line[2] > '9')
                return -1;
        return (line[0] - '0') * 100 + (line[1] - '0') * 10 + (line[2] - '0');
}

/* One reply, all its lines by deadline. */
static int reply_by(struct ftp *ftp, uint64_t deadline, struct ds_error *err)
{
        char line[FTP_LINE_MAX];
        size_t used = 0;

        int rc = read_line(ftp, line, sizeof(line), deadline, err);
        if (rc < 0)
                return rc;
        int code = line_code(line);
        if (code < 0 || (line[3] != ' ' && line[3] != '-' && line[3] != '\0'))
                return ds_fail(err, 0, "%s: not an FTP reply: '%.60s'", ftp->host, line), -EPROTO;
        used = (size_t)snprintf(ftp->reply, sizeof(ftp->reply), "%s", line);
        if (line[3] == '-') {
                /* RFC 959 4.2: continuation lines until one that starts "code " */
                for (;;) {
                        rc = read_line(ftp, line, sizeof(line), deadline, err);
                        if (rc < 0)
                                return rc;
                        if (used + strlen(line) + 2 >= sizeof(ftp->reply))
                                return ds_fail(err, 0, "%s: reply over %u bytes", ftp->host,
                                               FTP_REPLY_MAX),
                                       -EPROTO;
                        used += (size_t)snprintf(ftp->reply + used, sizeof(ftp->reply) - used,
                                                 "\n%s", line);
                        if (line_code(line) == code && line[3] == ' ')
                                break;
                }
        }
        ftp->code = code;
        /* The server ends the session, whatever the reply answered (a command sent ahead
         * too): its words are kept for the goodbye, and nothing more is said to it. */
        if (code == 421 && !ftp->ended[0]) {
                snprintf(ftp->ended, sizeof(ftp->ended), "%.*s", (int)sizeof(ftp->ended) - 1,
                         ftp->reply);
                ftp->broken = true;
        }
        return code;
}

/* The replies of the commands sent ahead, in order, by deadline: a refusal is kept in
 * ftp->refused_ahead (the first one). Returns 0 or a negative errno. */
static int owed_replies(struct ftp *ftp, uint64_t deadline, struct ds_error *err)
{
        while (ftp->owed > 0) {
                int rc = reply_by(ftp, deadline, err);
                if (rc < 0)
                        return rc;
                bool note = ftp->owed_note & 1u;
                ftp->owed_note >>= 1;
                ftp->owed--;
                if (note && rc >= 400 && !ftp->refused_ahead[0])
                        snprintf(ftp->refused_ahead, sizeof(ftp->refused_ahead), "%.*s",
                                 (int)sizeof(ftp->refused_ahead) - 1, ftp->reply);
        }
        return 0;
}

int ftp_reply(struct ftp *ftp, struct ds_error *err)
{
        uint64_t deadline = ds_deadline_in(ftp->timeout_ms);
        int rc = owed_replies(ftp, deadline, err);
        if (rc == 0)
                rc = reply_by(ftp, deadline, err);
        ftp->broken |= rc < 0; /* a reply not read whole leaves the dialogue out of step */
        return rc;
}

/* The timeout, cut to FTP_BRIEF_MS: the wait for a reply that only tells or ends. */
static int brief(int timeout_ms)
{
        return timeout_ms < 0 || timeout_ms > FTP_BRIEF_MS ? FTP_BRIEF_MS : timeout_ms;
}

int ftp_reply_brief(struct ftp *ftp, struct ds_error *err)
{
        int timeout_ms = ftp->timeout_ms;
        ftp->timeout_ms = brief(timeout_ms);
        int rc = ftp_reply(ftp, err);
        ftp->timeout_ms = timeout_ms;
        return rc;
}

int ftp_settle(struct ftp *ftp, struct ds_error *err)
{
        int rc = owed_replies(ftp, ds_deadline_in(ftp->timeout_ms), err);
        ftp->broken |= rc < 0;
        return rc;
}

static int send_line(struct ftp *ftp, const char *line, struct ds_error *err)
{
        struct xftp_data_opts opts = {.timeout_ms = ftp->timeout_ms, .stop = ftp->stop};
        char buf[FTP_LINE_MAX + 2];
        int n = snprintf(buf, sizeof(buf), "%s\r\n", line);

        if (n < 0 || (size_t)n >= sizeof(buf))
                return ds_fail(err, 0, "command too long"), -ENAMETOOLONG;
        int rc = xftp_data_write_all(&ftp->ctl, buf, (size_t)n, &opts, err);
        ftp->broken |= rc < 0;
        return rc;
}

static int vsend(struct ftp *ftp, struct ds_error *err, const char *fmt, va_list ap)
{
        char line[FTP_LINE_MAX];
        int n = vsnprintf(line, sizeof(line), fmt, ap);

        if (n < 0 || (size_t)n >= sizeof(line))
                return ds_fail(err, 0, "command too long"), -ENAMETOOLONG;
        if (strpbrk(line, "\r\n"))
                return ds_fail(err, 0, "a name with CR or LF cannot be sent"), -EINVAL;
        return send_line(ftp, line, err);
}

int ftp_send(struct ftp *ftp, struct ds_error *err, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        int rc = vsend(ftp, err, fmt, ap);
        va_end(ap);
        return rc;
}

int ftp_send_ahead(struct ftp *ftp, bool note, struct ds_error *err, const char *fmt, ...)
{
        va_list ap;
        if (ftp->owed >= FTP_AHEAD_MAX)
                return ds_fail(err, 0, "too many commands sent ahead"), -EBUSY;
        va_start(ap, fmt);
        int rc = vsend(ftp, err, fmt, ap);
        va_end(ap);
        if (rc == 0 && note)
                ftp->owed_note |= 1u << ftp->owed;
        if (rc == 0)
                ftp->owed++;
        return rc;
}

int ftp_cmd(struct ftp *ftp, struct ds_error *err, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        int rc = vsend(ftp, err, fmt, ap);
        va_end(ap);
        return rc < 0 ? rc : ftp_reply(ftp, err);
}

/* One FEAT line (without its leading space). */
static void note_feature(struct ftp_features *feat, const char *line)
{
        if (strcasecmp(line, "EPSV") == 0)
                feat->epsv = true;
        else if (strcasecmp(line, "SIZE") == 0)
                feat->size = true;
        else if (strcasecmp(line, "MDTM") == 0)
                feat->mdtm = true;
        else if (strcasecmp(line, "REST STREAM") == 0)
                feat->rest_stream = true;
        else if (strncasecmp(line, "MLST", 4) == 0)
                feat->mlst = true;
        else if (strcasecmp(line, "UTF8") == 0)
                feat->utf8 = true;
        else if (strcasecmp(line, "PARALLEL") == 0)
                feat->parallel = true;
        else if (strncasecmp(line, "RANG", 4) == 0)
                feat->rang = true;
        else if (strcasecmp(line, "PSIZ") == 0)
                feat->psiz = true;
        else if (strcasecmp(line, "MFMT") == 0)
                feat->mfmt = true;
        else if (strcasecmp(line, "MODE E KEEP") == 0)
                feat->keep = true;
        else if (strcasecmp(line, "RPSV") == 0)
                feat->rpsv = true;
        else if (strcasecmp(line, "RPRT") == 0)
                feat->rprt = true;
        else if (strncasecmp(line, "HASH ", 5) == 0) {
                char list[256];
                snprintf(list, sizeof(list), "%s", line + 5);
                feat->hash = true;
                for (char *save, *name = strtok_r(list, ";", &save); name;
                     name = strtok_r(NULL, ";", &save)) {
                        size_t len = strlen(name);
                        bool selected = len > 0 && name[len - 1] == '*';
                        if (selected)
                                name[len - 1] = '\0';
                        enum xftp_hash_algo algo;
                        if (xftp_hash_parse(name, &algo) == 0) {
                                feat->hash_algo[algo] = true;
                                if (selected)
                                        feat->hash_selected = algo;
                        }
                }
        }
}

static void read_features(struct ftp *ftp, struct ds_error *err)
{
        memset(&ftp->feat, 0, sizeof(ftp->feat));
        if (ftp_cmd(ftp, err, "FEAT") != 211)
                return; /* a server without FEAT has no extensions */
        char *save;
        for (char *line = strtok_r(ftp->reply, "\n", &save); line;
             line = strtok_r(NULL, "\n", &save))
                if (line[0] == ' ')
                        note_feature(&ftp->feat, line + 1);
}

/* AUTH TLS and the handshake, as tls says. A server that refuses AUTH TLS is served in
 * the clear unless TLS is required; a certificate that fails its check ends the session
 * either way, before the login. */
static int start_tls(struct ftp *ftp, const struct ftp_tls_opts *tls, struct ds_error *err)
{
        if (!tls || tls->mode == FTP_TLS_NEVER)
                return 0;
        int rc = ftp_cmd(ftp, err, "AUTH TLS");
        if (rc >= 0 && rc != 234 && tls->mode == FTP_TLS_AUTO)
                return 0;
        if (rc >= 0 && rc != 234)
                return ds_fail(err, 0, "%s offers no TLS (--tls): %s", ftp->host, ftp->reply),
                       -EPROTONOSUPPORT;
        /* Nothing the server sent after its 234 came under TLS: replies read now would be a
         * third party's, injected in clear (as in curl's CVE-2021-22947). */
        if (rc >= 0 && ftp->in_len > 0)
                return ds_fail(err, 0, "%s sent more after 234 than TLS: refused", ftp->host),
                       -EPROTO;
        if (rc >= 0)
                rc = xftp_tls_client(&ftp->tls, tls->ca_file, tls->insecure, err);
        if (rc >= 0)
                rc = xftp_tls_start(&ftp->ctl, 1, ftp->tls, false, ftp->host, NULL, ftp->timeout_ms,
                                    ftp->stop, err);
        if (rc < 0 && err->text[0] && strncmp(err->text, ftp->host, strlen(ftp->host)) != 0) {
                char why[sizeof(err->text)];
                snprintf(why, sizeof(why), "%s", err->text);
                ds_fail(err, 0, "%s: %s", ftp->host, why);
        }
        return rc < 0 ? rc : 0;
}

/* After the login under TLS: PBSZ 0 and PROT P, so the data is TLS too. */
static int protect_data(struct ftp *ftp, struct ds_error *err)
{
        if (!ftp->tls)
                return 0;
        int rc = ftp_cmd(ftp, err, "PBSZ 0");
        if (rc >= 0 && rc != 200)
                return ds_fail(err, 0, "%s: PBSZ 0: %s", ftp->host, ftp->reply), -EPROTO;
        if (rc >= 0)
                rc = ftp_cmd(ftp, err, "PROT P");
        if (rc >= 0 && rc != 200)
                return ds_fail(err, 0, "%s: PROT P: %s", ftp->host, ftp->reply), -EPROTO;
        return rc < 0 ? rc : 0;
}

int ftp_data_clear(struct ftp *ftp, struct ds_error *err)
{
        if (!ftp->tls)
                return 0;
        int rc = ftp_cmd(ftp, err, "PROT C");
        if (rc >= 0 && rc != 200)
                return ds_fail(err, 0, "%s: PROT C: %s", ftp->host, ftp->reply), -EPROTO;
        if (rc >= 0)
                ftp->tls_data_clear = true;
        return rc < 0 ? rc : 0;
}

int ftp_secure_data(struct ftp *ftp, struct xftp_conn *conns, unsigned n, struct ds_error *err)
{
        if (!ftp->tls || ftp->tls_data_clear)
                return 0;
        int rc = xftp_tls_start(conns, n, ftp->tls, false, ftp->host, &ftp->ctl, ftp->timeout_ms,
                                ftp->stop, err);
        if (rc == 0) {
                ftp->data_kernel = conns[0].kernel;
                ftp->data_sealed_by = xftp_tls_sealed_by(&conns[0]);
                ftp->data_opened_by = xftp_tls_opened_by(&conns[0]);
        }
        return rc;
}

int ftp_open(struct ftp *ftp, const char *host, uint16_t port, const char *user, const char *pass,
             int timeout_ms, atomic_bool *stop, const struct ftp_tls_opts *tls,
             unsigned verbs_streams, struct ds_error *err)
{
        memset(ftp, 0, sizeof(*ftp));
        snprintf(ftp->host, sizeof(ftp->host), "%s", host);
        ftp->port = port;
        ftp->timeout_ms = timeout_ms;
        ftp->stop = stop;
        ftp->mode = 'S';
        ftp->streams = 1;
        int fd = ds_net_connect(host, port, SOCK_STREAM, timeout_ms, err);
        if (fd < 0) {
                xftp_conn_none(&ftp->ctl);
                return fd;
        }
        xftp_conn_plain(&ftp->ctl, fd);
        if (verbs_streams) /* while the server logs us in; failed: joins it */
                xftp_verbs_buffers_warm(&ftp->verbs_buffers, verbs_streams);
        /* A command goes out at once, not after the ACK of the one before (Nagle). */
        int on = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
        int rc = xftp_addr_local(fd, &ftp->local);
        if (rc == 0)
                rc = xftp_addr_peer(fd, &ftp->peer);
        if (rc < 0) {
                ds_fail(err, rc, "%s: control connection", host);
                goto failed;
        }
        /* 120 (ready in a while) and the 220 after it: one deadline for the lot */
        uint64_t deadline = ds_deadline_in(timeout_ms);
        rc = reply_by(ftp, deadline, err);
        while (rc >= 100 && rc < 200)
                rc = reply_by(ftp, deadline, err);
        if (rc >= 0 && rc != 220)
                rc = (ds_fail(err, 0, "%s: %s", host, ftp->reply), -ECONNREFUSED);
        if (rc < 0)
                goto failed;
        rc = start_tls(ftp, tls, err);
        if (rc < 0)
                goto failed;
        rc = ftp_cmd(ftp, err, "USER %s", user);
        if (rc == 331 || rc == 332)
                rc = ftp_cmd(ftp, err, "PASS %s", pass);
        if (rc >= 0 && rc != 230 && rc != 202) {
                rc = (ds_fail(err, 0, "%s: login as %s refused: %s", host, user, ftp->reply),
                      -EACCES);
                goto failed;
        }
        if (rc < 0)
                goto failed;
        rc = protect_data(ftp, err);
        if (rc < 0)
                goto failed;
        read_features(ftp, err);
        return 0;
failed:
        xftp_conn_close(&ftp->ctl);
        xftp_tls_free(ftp->tls);
        ftp->tls = NULL;
        xftp_verbs_buffers_free(&ftp->verbs_buffers);
        return rc;
}

int ftp_close(struct ftp *ftp, struct ds_error *err)
{
        struct ds_error quit_err;
        int timeout_ms = ftp->timeout_ms;
        int rc = 0;

        xftp_verbs_buffers_free(&ftp->verbs_buffers);
        if (ftp->ctl.fd < 0)
                return 0;
        ftp_drop_kept(ftp);
        if (!ftp->stored)
                ftp->timeout_ms = brief(timeout_ms); /* a polite goodbye, no more */
        /* A dialogue out of step (a reply that never came whole) cannot end politely: the
         * reply read would be another command's. An upload's still must be asked for. */
        bool unheard = ftp->broken && !ftp->stored;
        int code = ftp->ended[0] ? 421 : unheard ? 0 : ftp_cmd(ftp, &quit_err, "QUIT");
        ftp->timeout_ms = timeout_ms;
        if (ftp->stored && code != 221) {
                const char *why = ftp->ended[0] ? ftp->ended
                                  : code < 0    ? quit_err.text
                                                : ftp->reply;
                ds_fail(err, 0, "%s did not say the uploads are on disk: %s", ftp->host, why);
                rc = code < 0 ? code : -EIO;
        }
        xftp_conn_close(&ftp->ctl);
        xftp_tls_free(ftp->tls);
        ftp->tls = NULL;
        return rc;
}

bool ftp_ended_unasked(const struct ftp *ftp)
{
        if (ftp->owed > 0 || ftp->ctl.fd < 0)
                return false;
        struct pollfd pfd = {.fd = ftp->ctl.fd, .events = POLLIN};
        return ftp->in_len > 0 || poll(&pfd, 1, 0) != 0;
}

/* A command that must get a 2xx reply. */
static int cmd_ok(struct ftp *ftp, struct ds_error *err, const char *what)
{
        int rc = ftp_cmd(ftp, err, "%s", what);
        if (rc >= 0 && (rc < 200 || rc > 299))
                return ds_fail(err, 0, "%s: %s: %s", ftp->host, what, ftp->reply), -EPROTO;
        return rc < 0 ? rc : 0;
}

static int type_binary(struct ftp *ftp, struct ds_error *err)
{
        if (ftp->type_i)
                return 0;
        int rc = cmd_ok(ftp, err, "TYPE I");
        ftp->type_i = rc == 0;
        return rc;
}

void ftp_drop_kept(struct ftp *ftp)
{
        xftp_conn_drop_all(ftp->kept, ftp->kept_n); /* the server waits for commands */
        ftp->kept_n = 0;
}

int ftp_prepare(struct ftp *ftp, unsigned streams, bool blocks, struct ds_error *err)
{
        char mode = streams > 1 || blocks ? 'E' : 'S';
        int rc = type_binary(ftp, err);

        if (mode != ftp->mode || streams != ftp->streams)
                ftp_drop_kept(ftp); /* the server drops them too */
        if (rc == 0 && blocks && ftp->feat.keep && !ftp->keep) {
                rc = cmd_ok(ftp, err, "OPTS MODE E KEEP");
                ftp->keep = rc == 0;
        }
        if (rc == 0 && mode != ftp->mode) {
                rc = cmd_ok(ftp, err, mode == 'E' ? "MODE E" : "MODE S");
                if (rc == 0)
                        ftp->mode = mode;
        }
        if (rc == 0 && mode == 'E' && streams != ftp->streams) {
                char opts[64];
                snprintf(opts, sizeof(opts), "OPTS RETR Parallelism=%u,%u,%u;", streams, streams,
                         streams);
                rc = cmd_ok(ftp, err, opts);
                if (rc == 0)
                        ftp->streams = streams;
        }
        return rc;
}

/* The control connection's peer at port: whatever host PASV names, a server behind NAT
 * names one we cannot reach, and a hostile one names a victim (for a server-to-server
 * copy, a victim of the other server: an FTP bounce). */
static int passive_at(const struct ftp *ftp, uint16_t port, struct xftp_addr *addr)
{
        *addr = ftp->peer;
        xftp_addr_set_port(addr, port);
        return 0;
}

int ftp_passive_addr(struct ftp *ftp, struct xftp_addr *addr, struct ds_error *err)
{
        int rc;

        if (ftp->feat.epsv || ftp->peer.ss.ss_family == AF_INET6) {
                rc = ftp_cmd(ftp, err, "EPSV");
                if (rc < 0)
                        return rc;
                uint16_t port;
                if (rc == 229 && xftp_parse_epsv(ftp->reply, &port) == 0)
                        return passive_at(ftp, port, addr);
                if (rc == 229)
                        return ds_fail(err, 0, "%s: bad EPSV reply: %.80s", ftp->host, ftp->reply),
                               -EPROTO;
        }
        rc = ftp_cmd(ftp, err, "PASV");
        if (rc < 0)
                return rc;
        struct xftp_addr named;
        if (rc != 227 || xftp_parse_pasv(ftp->reply, &named) < 0)
                return ds_fail(err, 0, "%s: PASV: %.80s", ftp->host, ftp->reply), -EPROTO;
        return passive_at(ftp, xftp_addr_port(&named), addr);
}

int ftp_passive(struct ftp *ftp, struct xftp_conn *conns, unsigned n,
                const struct xftp_data_opts *opts, struct ds_error *err)
{
        struct xftp_addr addr;
        int fds[XFTP_MODEE_MAX_STREAMS];
        int rc = n > XFTP_MODEE_MAX_STREAMS ? -EINVAL : ftp_passive_addr(ftp, &addr, err);
        if (rc == 0)
                rc = xftp_data_connect(&addr, NULL, fds, n, opts, err);
        for (unsigned i = 0; i < n && i < XFTP_MODEE_MAX_STREAMS; i++)
                rc < 0 ? xftp_conn_none(&conns[i]) : xftp_conn_plain(&conns[i], fds[i]);
        return rc;
}

int ftp_data_open(struct ftp *ftp, struct xftp_conn *conns, unsigned n,
                  const struct xftp_data_opts *opts, bool *reused, struct ds_error *err)
{
        *reused = ftp->mode == 'E' && ftp->kept_n == n && n > 0;
        if (*reused) {
                memcpy(conns, ftp->kept, n * sizeof(*conns));
                ftp->kept_n = 0;
                return 0;
        }
        ftp_drop_kept(ftp); /* PASV makes the server drop them */
        return ftp_passive(ftp, conns, n, opts, err);
}

void ftp_data_done(struct ftp *ftp, struct xftp_conn *conns, unsigned n, bool keep)
{
        if (!keep || !ftp->keep || n > XFTP_MODEE_MAX_STREAMS) {
                xftp_conn_close_all(conns, n);
                return;
        }
        ftp_drop_kept(ftp);
        memcpy(ftp->kept, conns, n * sizeof(*conns));
        ftp->kept_n = n;
}

int ftp_port(struct ftp *ftp, const struct xftp_addr *addr, struct ds_error *err)
{
        char arg[XFTP_ADDR_TEXT], cmd[XFTP_ADDR_TEXT + 8];

        if (xftp_format_port(addr, arg, sizeof(arg)) == 0)
                snprintf(cmd, sizeof(cmd), "PORT %s", arg);
        else if (xftp_format_eprt(addr, arg, sizeof(arg)) == 0)
                snprintf(cmd, sizeof(cmd), "EPRT %s", arg);
        else
                return ds_fail(err, 0, "no PORT for that address"), -EAFNOSUPPORT;
        return cmd_ok(ftp, err, cmd);
}

int ftp_verbs_ask(struct ftp *ftp, bool receive, struct ftp_verbs *v, struct ds_error *err)
{
        *v = (struct ftp_verbs){0};
        if (receive) {
                int rc = xftp_verbs_listen(&v->listener, &ftp->local, 0, 0, err);
                if (rc < 0)
                        return rc;
                char cmd[32];
                snprintf(cmd, sizeof(cmd), "RPRT %u", xftp_verbs_port(v->listener));
                return cmd_ok(ftp, err, cmd);
        }
        return ftp_verbs_passive(ftp, &v->addr, err);
}

int ftp_verbs_passive(struct ftp *ftp, struct xftp_addr *addr, struct ds_error *err)
{
        int rc = ftp_cmd(ftp, err, "RPSV");
        if (rc < 0)
                return rc;
        uint16_t port;
        if (rc != 229 || xftp_parse_epsv(ftp->reply, &port) < 0)
                return ds_fail(err, 0, "%s: RPSV: %.80s", ftp->host, ftp->reply), -EPROTO;
        return passive_at(ftp, port, addr);
}

int ftp_verbs_port(struct ftp *ftp, const struct xftp_addr *addr, struct ds_error *err)
{
        char arg[XFTP_ADDR_TEXT], cmd[XFTP_ADDR_TEXT + 8];

        if (xftp_format_eprt(addr, arg, sizeof(arg)) < 0)
                return ds_fail(err, 0, "no RPRT for that address"), -EAFNOSUPPORT;
        snprintf(cmd, sizeof(cmd), "RPRT %s", arg);
        return cmd_ok(ftp, err, cmd);
}

int ftp_verbs_open(struct ftp *ftp, struct ftp_verbs *v, struct xftp_conn *conns, unsigned n,
                   const struct xftp_data_opts *opts, struct ds_error *err)
{
        struct xftp_verbs_opts vo = {
            .timeout_ms = opts->timeout_ms, .stop = opts->stop, .buffers = &ftp->verbs_buffers};
        int rc = xftp_verbs_buffers_reserve(&ftp->verbs_buffers, n, err);
        if (rc == 0)
                rc = v->listener ? xftp_verbs_accept(v->listener, &ftp->peer, conns, n, &vo, err)
                                 : xftp_verbs_connect(&v->addr, conns, n, &vo, err);
        if (rc < 0 && err->text[0] && strncmp(err->text, ftp->host, strlen(ftp->host)) != 0) {
                char why[sizeof(err->text)];
                snprintf(why, sizeof(why), "%s", err->text);
                ds_fail(err, 0, "%s: verbs data channel: %s", ftp->host, why);
        }
        return rc;
}

void ftp_verbs_end(struct ftp_verbs *v)
{
        xftp_verbs_unlisten(v->listener);
        v->listener = NULL;
}

int ftp_size(struct ftp *ftp, const char *verb, const char *path, uint64_t *size,
             struct ds_error *err)
{
        int rc = type_binary(ftp, err); /* some servers refuse SIZE in ASCII */
        if (rc < 0)
                return rc;
        rc = ftp_cmd(ftp, err, "%s %s", verb, path);
        if (rc < 0)
                return rc;
        if (rc == 550)
                return -ENOENT;
        if (rc != 213)
                return -ENOTSUP;
        char *end;
        const char *digits = ftp->reply + 4;
        if (*digits < '0' || *digits > '9')
                return ds_fail(err, 0, "%s: bad %s reply: %.80s", ftp->host, verb, ftp->reply),
                       -EPROTO;
        errno = 0;
        unsigned long long value = strtoull(digits, &end, 10);
        if (errno != 0 || (*end != '\0' && *end != ' ' && *end != '\r'))
                return ds_fail(err, 0, "%s: bad %s reply: %.80s", ftp->host, verb, ftp->reply),
                       -EPROTO;
        *size = value;
        return 0;
}

int ftp_mlst(struct ftp *ftp, const char *path, struct listing_facts *facts, struct ds_error *err)
{
        int rc = ftp_cmd(ftp, err, "MLST %s", path);
        if (rc < 0)
                return rc;
        if (rc == 550)
                return -ENOENT;
        if (rc != 250)
                return -ENOTSUP;
        /* RFC 3659 7.2: the facts line is the one that starts with a space. */
        for (const char *line = ftp->reply; line; line = strchr(line, '\n')) {
                line += *line == '\n';
                if (*line == ' ' && listing_facts_parse(line + 1, facts))
                        return 0;
        }
        return -ENOTSUP;
}

int ftp_mlst_size(struct ftp *ftp, const char *path, uint64_t *size, struct ds_error *err)
{
        struct listing_facts facts;
        int rc = ftp_mlst(ftp, path, &facts, err);
        if (rc == 0 && facts.size == UINT64_MAX)
                rc = -ENOTSUP;
        if (rc == 0)
                *size = facts.size;
        return rc;
}

int ftp_modified(struct ftp *ftp, const char *path, char *out, size_t room, struct ds_error *err)
{
        if (!ftp->feat.mdtm && !ftp->feat.mlst)
                return -ENOTSUP;
        if (!ftp->feat.mdtm) {
                struct listing_facts facts;
                int rc = ftp_mlst(ftp, path, &facts, err);
                if (rc == 0 && (!facts.modified[0] || strlen(facts.modified) >= room))
                        rc = -ENOTSUP;
                if (rc == 0)
                        memcpy(out, facts.modified, strlen(facts.modified) + 1);
                return rc == -ENOENT ? -ENOTSUP : rc;
        }
        int rc = ftp_cmd(ftp, err, "MDTM %s", path);
        if (rc < 0)
                return rc;
        if (rc != 213)
                return -ENOTSUP;
        const char *stamp = ftp->reply + 4;
        return listing_time_copy(stamp, strcspn(stamp, " \r\n"), out, room);
}

int ftp_set_modified(struct ftp *ftp, const char *path, const struct timespec *when,
                     struct ds_error *err)
{
        char stamp[LISTING_TIME_MAX];
        if (!ftp->feat.mfmt)
                return -ENOTSUP;
        xftp_time_format(when, stamp, sizeof(stamp));
        return ftp_send_ahead(ftp, true, err, "MFMT %s %s", stamp, path);
}
