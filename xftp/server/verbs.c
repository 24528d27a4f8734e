/* RPSV, RPRT and the verbs links of a transfer (xverbs.h carries the bytes). */
#include "verbs.h"

#include "channel.h"
#include "transfer.h"

#include <dragstrip/error.h>

#include "xverbs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

void xfer_verbs_allow_locking(uint64_t bytes)
{
        struct rlimit lim;

        if (getrlimit(RLIMIT_MEMLOCK, &lim) < 0 || lim.rlim_cur >= bytes)
                return;
        lim.rlim_cur = bytes;
        if (lim.rlim_max < bytes)
                lim.rlim_max = bytes;
        (void)setrlimit(RLIMIT_MEMLOCK, &lim);
}

/* Whether this session offers the channel: looked up once, at the first ask. */
static bool offered(struct session *s)
{
        if (s->verbs_offer == 0)
                s->verbs_offer = !s->config->no_rdma && xftp_verbs_available(&s->local) ? 1 : -1;
        return s->verbs_offer > 0;
}

void xfer_feat_verbs(struct session *s)
{
        if (!offered(s))
                return;
        session_reply(s, " RPRT");
        session_reply(s, " RPSV");
}

/* What RPSV and RPRT both refuse: a server that does not offer the channel, and data
 * that PROT P wants encrypted (verbs carries it in the clear). */
static bool may_set_up(struct session *s)
{
        if (!offered(s)) {
                session_reply(s, "502 No verbs data channel here.");
                return false;
        }
        if (s->prot_p) {
                session_reply(s, "521 The verbs data channel is not encrypted: PROT C first.");
                return false;
        }
        return true;
}

/* The buffers the next transfer's streams will borrow, made in a thread while the client
 * sends its transfer command and opens its links (xverbs.h), once the budget has taken
 * them; given back with the set-up (xfer_forget_verbs), when the transfer ends. A budget
 * that cannot leaves the transfer to take its own. */
static void warm_buffers(struct session *s)
{
        unsigned n = s->mode == 'E' ? s->streams : 1;
        uint64_t pool = xftp_verbs_buffers_stream_bytes(), have = s->verbs_held / pool;
        uint64_t more = n > have ? n - have : 0, bytes = more * pool;

        if (more && xfer_budget_take(s, bytes)) {
                s->verbs_held += bytes;
                xftp_verbs_buffers_warm(&s->verbs_buffers, n);
        }
}

void xfer_cmd_rpsv(struct session *s)
{
        struct ds_error err;

        if (!may_set_up(s))
                return;
        xfer_forget_data(s);
        int rc = xftp_verbs_listen(&s->verbs_listener, &s->local, s->config->pasv_lo,
                                   s->config->pasv_hi, &err);
        if (rc < 0) {
                s->verbs_listener = NULL;
                session_reply(s, "425 Cannot open a verbs port%s.",
                              rc == -EADDRINUSE ? ": all in use, try later" : "");
                return;
        }
        session_reply(s, "229 Entering RDMA Passive Mode (|||%u|)",
                      xftp_verbs_port(s->verbs_listener));
        warm_buffers(s);
}

/* RPRT's argument: a port on the client's host, or an address as EPRT names one. */
static int parse_rprt(const struct session *s, const char *arg, struct xftp_addr *to)
{
        uint64_t port = 0;
        size_t digits = strspn(arg, "0123456789");

        if (digits == 0 || arg[digits] != '\0')
                return xftp_parse_eprt(arg, to);
        if (digits > 5 || (port = strtoull(arg, NULL, 10)) == 0 || port > 65535)
                return -EINVAL;
        *to = s->peer;
        xftp_addr_set_port(to, (uint16_t)port);
        return 0;
}

void xfer_cmd_rprt(struct session *s, const char *arg)
{
        struct xftp_addr to;

        if (parse_rprt(s, arg, &to) < 0) {
                session_reply(s, "501 RPRT takes a port from 1 to 65535, or |af|host|port|.");
                return;
        }
        if (!xfer_may_connect(s, &to, "verbs links") || !may_set_up(s))
                return;
        xfer_forget_data(s);
        s->verbs_to = to;
        session_reply(s, "200 RPRT command successful: the next RETR goes over verbs.");
        warm_buffers(s);
}

bool xfer_verbs_asked(const struct session *s)
{
        return s->verbs_listener || s->verbs_to.len;
}

void xfer_free_verbs_buffers(struct session *s)
{
        xftp_verbs_buffers_free(&s->verbs_buffers);
        xfer_budget_give(s, s->verbs_held);
        s->verbs_held = 0;
}

/* Counted from the bytes held, not the pools made, so that the reply need not wait for
 * the warming thread (the links join it before any borrows a pool): a pool it failed to
 * make is held bytes that the stream's own replaces. */
uint64_t xfer_verbs_need(const struct session *s, unsigned n)
{
        uint64_t pool = xftp_verbs_buffers_stream_bytes(), held = s->verbs_held / pool;
        uint64_t lent = n < held ? n : held;

        return n * xftp_verbs_stream_bytes() - lent * pool;
}

void xfer_forget_verbs(struct session *s)
{
        xfer_free_verbs_buffers(s);
        xftp_verbs_unlisten(s->verbs_listener);
        s->verbs_listener = NULL;
        s->verbs_to.len = 0;
}

int xfer_open_verbs(struct session *s, struct xftp_conn *conns, unsigned n, bool upload,
                    bool blocks)
{
        struct ds_error err;
        struct xftp_verbs_opts opts = {
            .timeout_ms = s->config->data_ms, .stop = &s->xfer_stop, .buffers = &s->verbs_buffers};
        int rc;

        for (unsigned i = 0; i < n; i++)
                xftp_conn_none(&conns[i]);
        if (!blocks) {
                session_reply(s, "425 The verbs data channel carries MODE E: send MODE E first.");
                return -EPROTO;
        }
        if (upload ? !s->verbs_listener : !s->verbs_to.len) {
                session_reply(s, upload ? "425 An upload over verbs follows RPSV, not RPRT."
                                        : "425 A download over verbs follows RPRT, not RPSV.");
                return -ENOTCONN;
        }
        xfer_drop_kept(s);
        /* The 150 first: the client opens or accepts its links once it has read it, and
         * the rdma_cm handshake hides the rest of the buffers' making (the links join the
         * warming thread before their hello). */
        session_reply(s, "150 Opening %u verbs data channel%s.", n, n > 1 ? "s" : "");
        if (upload) {
                rc = xftp_verbs_accept(s->verbs_listener, xfer_third_host_ok(s) ? NULL : &s->peer,
                                       conns, n, &opts, &err);
        } else {
                rc = xftp_verbs_connect(&s->verbs_to, conns, n, &opts, &err);
        }
        if (rc < 0)
                session_reply(s, "425 Cannot open the verbs data channel: %s.", err.text);
        return rc;
}
