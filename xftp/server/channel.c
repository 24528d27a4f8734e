/* PASV, EPSV, PORT and EPRT; the data connections they set up (or a MODE E transfer
 * kept) opened for a transfer or a listing; the replies that end a transfer. */
#include "channel.h"

#include "ftps.h"
#include "log.h"
#include "verbs.h"

#include <dragstrip/error.h>
#include <dragstrip/stop.h>

#include "modee.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

void xfer_forget_data(struct session *s)
{
        if (s->pasv_fd >= 0)
                close(s->pasv_fd);
        s->pasv_fd = -1;
        s->active.len = 0;
        xfer_forget_verbs(s);
}

void xfer_drop_kept(struct session *s)
{
        xftp_conn_drop_all(s->kept, s->kept_n); /* the client waits for replies */
        s->kept_n = 0;
}

/* Whether the kept connections can carry a transfer: nothing came on them since (a client
 * that closed its end, or sent bytes no transfer asked for, has them no more). */
static bool kept_alive(struct session *s)
{
        for (unsigned i = 0; i < s->kept_n; i++) {
                struct pollfd pfd = {.fd = s->kept[i].fd, .events = POLLIN | POLLRDHUP};
                bool pending = s->kept[i].ops->pending && s->kept[i].ops->pending(&s->kept[i]) > 0;
                if (pending || poll(&pfd, 1, 0) != 0)
                        return false;
        }
        return true;
}

void xfer_reset(struct session *s)
{
        xfer_forget_data(s);
        s->rest = s->allocate = 0;
        s->range_start = s->range_end = 0;
}

struct xftp_data_opts xfer_data_opts(struct session *s, atomic_bool *stop)
{
        size_t buf = s->config->block < (64u << 20) ? s->config->block : (64u << 20);
        return (struct xftp_data_opts){.sockbuf = (int)buf,
                                       .timeout_ms = s->config->data_ms,
                                       .stop = stop,
                                       .port_lo = s->config->pasv_lo,
                                       .port_hi = s->config->pasv_hi};
}

void xfer_cmd_pasv(struct session *s, bool extended, const char *arg)
{
        struct ds_error err;
        struct xftp_addr bound;
        char text[XFTP_ADDR_TEXT];
        int family = s->local.ss.ss_family;
        bool v4 = family == AF_INET || xftp_format_port(&s->local, text, sizeof(text)) == 0;

        if (extended && strcasecmp(arg, "ALL") == 0) {
                s->epsv_all = true;
                session_reply(s, "200 EPSV ALL: only EPSV from now on.");
                return;
        }
        if (extended && arg[0] && strcmp(arg, v4 ? "1" : "2") != 0) {
                session_reply(s, "522 Network protocol not supported, use (%s)", v4 ? "1" : "2");
                return;
        }
        if (!extended && s->epsv_all) {
                session_reply(s, "503 EPSV ALL was given: use EPSV.");
                return;
        }
        if (!extended && !v4) {
                session_reply(s, "425 PASV is for IPv4: use EPSV.");
                return;
        }
        xfer_forget_data(s);
        struct xftp_data_opts opts = xfer_data_opts(s, NULL);
        int fd = xftp_data_listen(&s->local, &opts, &err);
        s->pasv_fd = fd;
        if (fd < 0 || xftp_addr_local(fd, &bound) < 0) {
                xfer_forget_data(s);
                session_reply(s, "425 Cannot open a passive port%s.",
                              fd == -EADDRINUSE ? ": all in use, try later" : "");
                return;
        }
        if (extended) {
                xftp_format_epsv(xftp_addr_port(&bound), text, sizeof(text));
                session_reply(s, "229 Entering Extended Passive Mode %s", text);
        } else {
                /* Behind NAT the address clients reach (--pasv-address) is not ours. EPSV
                 * names no address (RFC 2428): the client uses the control connection's. */
                if (s->config->pasv_addr.len) {
                        uint16_t port = xftp_addr_port(&bound);
                        bound = s->config->pasv_addr;
                        xftp_addr_set_port(&bound, port);
                }
                xftp_format_port(&bound, text, sizeof(text));
                session_reply(s, "227 Entering Passive Mode (%s).", text);
        }
}

bool xfer_third_host_ok(const struct session *s)
{
        return s->config->fxp && !s->anonymous;
}

/* FTP bounce protection: never a privileged port, and a third host only with --fxp for a
 * user who logged in with a password (server-to-server copies). */
bool xfer_may_connect(struct session *s, const struct xftp_addr *to, const char *what)
{
        if (xftp_addr_port(to) < 1024) {
                session_reply(s, "504 Refused: port below 1024.");
                return false;
        }
        if (!xftp_addr_same_host(to, &s->peer) && !xfer_third_host_ok(s)) {
                session_reply(s, "504 Refused: %s go to your own address.", what);
                return false;
        }
        return true;
}

void xfer_cmd_port(struct session *s, bool extended, const char *arg)
{
        struct xftp_addr addr;

        if (s->epsv_all) {
                session_reply(s, "503 EPSV ALL was given: use EPSV.");
                return;
        }
        int rc = extended ? xftp_parse_eprt(arg, &addr) : xftp_parse_port(arg, &addr);
        if (rc == -EAFNOSUPPORT) {
                session_reply(s, "522 Network protocol not supported, use (1,2)");
                return;
        }
        if (rc < 0) {
                session_reply(s, "501 Malformed %s argument.", extended ? "EPRT" : "PORT");
                return;
        }
        if (!xfer_may_connect(s, &addr, "data connections"))
                return;
        xfer_forget_data(s);
        s->active = addr;
        session_reply(s, "200 %s command successful.", extended ? "EPRT" : "PORT");
}

/* One line per transfer for the connections a passive port turned away. */
static void log_refused(struct session *s, const struct xftp_data_refused *refused)
{
        char from[XFTP_ADDR_TEXT];

        xftp_addr_text(&refused->first, from, sizeof(from));
        xftpd_log(LOG_WARNING, "%s %s refused %u data connection%s from another host (first %s)%s",
                  s->user, s->peer_text, refused->count, refused->count == 1 ? "" : "s", from,
                  s->anonymous ? "" : "; --fxp allows them");
}

bool xfer_kept_serve(const struct session *s, unsigned n)
{
        return s->kept_n == n && s->kept_prot_p == s->prot_p && s->pasv_fd < 0 && !s->active.len;
}

/* Opens the n data connections of the next transfer: with reuse (a MODE E transfer), the
 * connections kept from the last one when no PASV or PORT came since (*reused says so);
 * else those PASV or PORT set up. Replies 425 and returns a negative errno when it
 * cannot. */
int xfer_open_data(struct session *s, struct xftp_conn *conns, unsigned n, bool reuse, bool *reused)
{
        struct ds_error err;
        struct xftp_data_opts opts = xfer_data_opts(s, &s->xfer_stop);
        int fds[XFTP_MODEE_MAX_STREAMS];
        int rc;

        *reused = false;
        if (ftps_data_refused(s))
                return -EACCES;
        if (xfer_verbs_asked(s)) { /* transfers take the verbs links in transfer.c */
                session_reply(s, "425 Listings go over TCP: use PASV or PORT.");
                return -ENOTCONN;
        }
        if (reuse && xfer_kept_serve(s, n)) {
                if (!kept_alive(s)) {
                        xfer_drop_kept(s);
                        session_reply(s, "425 The kept data connections were closed: use PASV "
                                         "or PORT.");
                        return -ENOTCONN;
                }
                memcpy(conns, s->kept, n * sizeof(*conns));
                s->kept_n = 0;
                *reused = true;
                return 0;
        }
        xfer_drop_kept(s);
        if (s->pasv_fd >= 0) {
                /* A third host that races the client for the port gets nothing. */
                struct xftp_data_refused refused = {0};
                rc = xftp_data_accept(s->pasv_fd, xfer_third_host_ok(s) ? NULL : &s->peer, fds, n,
                                      &opts, &refused, &err);
                if (refused.count)
                        log_refused(s, &refused);
        } else if (s->active.len) {
                struct xftp_addr from = s->local;
                xftp_addr_set_port(&from, 0);
                rc = xftp_data_connect(&s->active, &from, fds, n, &opts, &err);
        } else {
                session_reply(s, "425 Use PORT, EPRT, PASV or EPSV first.");
                return -ENOTCONN;
        }
        for (unsigned i = 0; i < n; i++)
                rc < 0 ? xftp_conn_none(&conns[i]) : xftp_conn_plain(&conns[i], fds[i]);
        if (rc < 0)
                session_reply(s, "425 Cannot open the data connection: %s.", err.text);
        return rc;
}

void xfer_reply_unopened(struct session *s)
{
        if (atomic_load(&s->aborted))
                session_reply(s, "226 ABOR done.");
}

/* Replies for a transfer cut short, and for the ABOR that cut it. */
void xfer_reply_cut(struct session *s, int rc, bool local, const char *why)
{
        if (atomic_load(&s->ctl_gone))
                return;
        if (atomic_load(&s->aborted)) {
                session_reply(s, "426 Transfer aborted.");
                session_reply(s, "226 ABOR done.");
        } else if (rc == -ENOSPC || rc == -EDQUOT) {
                session_reply(s, "452 Insufficient storage space; the partial file is removed.");
        } else if (rc == -EFBIG && s->allocate) {
                session_reply(s,
                              "552 More data than the %llu bytes announced; the partial file is "
                              "removed.",
                              (unsigned long long)s->allocate);
        } else if (rc == -EFBIG) {
                /* No ALLO: the limit is the file system's largest file, as the write says. */
                session_reply(s,
                              "552 Beyond the largest file this store takes (%s); the partial "
                              "file is removed.",
                              why);
        } else if (ds_stopping()) {
                session_reply(s, "426 Server shutting down.");
        } else if (local) {
                session_reply(s, "451 Local error: %s.", why);
        } else {
                session_reply(s, "426 Transfer failed: %s.", why);
        }
}

/* A transfer that ended well: 226, and a second 226 for an ABOR that came too late to
 * cut it (the client waits for a reply to it). */
void xfer_reply_done(struct session *s, const char *text)
{
        session_reply(s, "226 %s", text);
        if (atomic_load(&s->aborted))
                session_reply(s, "226 ABOR: the transfer had ended.");
}
