/* FTP data connections: the address arguments and replies that name them (PORT, PASV,
 * EPRT, EPSV), and opening them with a deadline and a stop flag.
 *
 * The codecs take text straight from a peer: they never read past the terminating NUL,
 * accept only the grammar of RFC 959 and RFC 2428 (numbers in range, no trailing junk)
 * and return -EINVAL for anything else. */
#ifndef XFTP_DATACONN_H
#define XFTP_DATACONN_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct ds_error;
struct xftp_conn;

/* A socket address of either family, as the codecs fill it. */
struct xftp_addr {
        struct sockaddr_storage ss;
        socklen_t len; /* 0: not set */
};

#define XFTP_ADDR_TEXT 64 /* room for any formatted argument or reply below */

/* PORT h1,h2,h3,h4,p1,p2 (RFC 959): the argument, spaces allowed around the commas.
 * IPv4 only; port 0 refused. Returns 0 or -EINVAL. */
int xftp_parse_port(const char *arg, struct xftp_addr *out);
/* The same six numbers for addr (IPv4, or an IPv4-mapped IPv6 address), as PORT's argument
 * and inside PASV's 227 reply. Returns 0, or -EAFNOSUPPORT for a true IPv6 address. */
int xftp_format_port(const struct xftp_addr *addr, char *buf, size_t len);

/* A 227 reply's text ("227 Entering Passive Mode (h1,h2,h3,h4,p1,p2)."): the six numbers
 * wherever they stand after the code, with or without parentheses, as clients accept
 * them. Returns 0 or -EINVAL. */
int xftp_parse_pasv(const char *reply, struct xftp_addr *out);

/* EPRT |af|address|port| (RFC 2428; any printable delimiter 33..126 in place of '|'),
 * af 1 (IPv4) or 2 (IPv6). Returns 0, -EAFNOSUPPORT for another af, or -EINVAL. */
int xftp_parse_eprt(const char *arg, struct xftp_addr *out);
/* "|1|1.2.3.4|5|" or "|2|::1|5|" for addr. Returns 0 or -ENOSPC. */
int xftp_format_eprt(const struct xftp_addr *addr, char *buf, size_t len);

/* A 229 reply's text ("229 Entering Extended Passive Mode (|||port|)"): the port between
 * the parentheses. Returns 0 or -EINVAL. */
int xftp_parse_epsv(const char *reply, uint16_t *port);
/* "(|||port|)", the part of a 229 reply after its text. */
int xftp_format_epsv(uint16_t port, char *buf, size_t len);

/* The port of addr, and addr with its port replaced. */
uint16_t xftp_addr_port(const struct xftp_addr *addr);
void xftp_addr_set_port(struct xftp_addr *addr, uint16_t port);
/* Whether a and b are the same host (IPv4-mapped IPv6 equal to its IPv4); ports ignored. */
int xftp_addr_same_host(const struct xftp_addr *a, const struct xftp_addr *b);
/* "1.2.3.4:5" or "[::1]:5". */
const char *xftp_addr_text(const struct xftp_addr *addr, char *buf, size_t len);
/* The local or remote end of a connected socket. Returns 0 or a negative errno. */
int xftp_addr_local(int fd, struct xftp_addr *out);
int xftp_addr_peer(int fd, struct xftp_addr *out);

/* How a data connection is opened. */
struct xftp_data_opts {
        int sockbuf;       /* SO_SNDBUF and SO_RCVBUF, set before connect/listen so the
                            * window scale fits; 0 leaves the kernel's autotuning */
        int timeout_ms;    /* deadline of connect and of accept (each connection) */
        atomic_bool *stop; /* may be NULL; when set, a wait ends with -EINTR */
        /* Passive ports: xftp_data_listen binds only within port_lo..port_hi (a firewall
         * opens that range); both 0: any port the kernel picks. */
        uint16_t port_lo, port_hi;
};

/* The passive side: a listening socket on the host of local (the control connection's own
 * address, so the data comes the way the control did), port 0 (the kernel picks one; read
 * it with xftp_addr_local), or with opts->port_lo set a port of that range: each tried
 * once, from a random one on, -EADDRINUSE when all are taken. Returns the descriptor or a
 * negative errno with err filled. */
int xftp_data_listen(const struct xftp_addr *local, const struct xftp_data_opts *opts,
                     struct ds_error *err);

/* What xftp_data_accept turned away: connections from a host other than the one expected. */
struct xftp_data_refused {
        unsigned count;
        struct xftp_addr first; /* the first of them */
};

/* Accepts n connections on listen_fd into fds[0..n-1], each within opts->timeout_ms.
 * expect_peer (may be NULL) is the control connection's peer: a connection from another
 * host is closed and not counted, and does not extend the wait (its deadline stands), so a
 * third host racing for the port gets nothing. refused (may be NULL) counts those. Returns
 * 0, or a negative errno (-ETIMEDOUT, -EINTR on stop) with every accepted descriptor
 * closed. */
int xftp_data_accept(int listen_fd, const struct xftp_addr *expect_peer, int *fds, unsigned n,
                     const struct xftp_data_opts *opts, struct xftp_data_refused *refused,
                     struct ds_error *err);

/* The active side: opens n connections to addr into fds[0..n-1], each within
 * opts->timeout_ms. bind_host (may be NULL) gives the local address to connect from (the
 * port is left to the kernel). Returns 0, or a negative errno with every descriptor closed. */
int xftp_data_connect(const struct xftp_addr *addr, const struct xftp_addr *bind_host, int *fds,
                      unsigned n, const struct xftp_data_opts *opts, struct ds_error *err);

/* Writes all len bytes to a connection (a listing, a reply-sized text), waiting at most
 * opts->timeout_ms for each stall. Returns 0 or a negative errno (-EINTR on stop). */
int xftp_data_write_all(struct xftp_conn *conn, const void *buf, size_t len,
                        const struct xftp_data_opts *opts, struct ds_error *err);

/* Reads what the peer sends until it closes, into *buf (malloc'd, NUL-terminated, the
 * caller frees it), refusing more than max bytes with -EFBIG. Returns the length read or a
 * negative errno with *buf NULL. */
long xftp_data_read_all(struct xftp_conn *conn, char **buf, size_t max,
                        const struct xftp_data_opts *opts, struct ds_error *err);

/* Closes fds[0..n-1] (those >= 0) and sets them to -1. */
void xftp_data_close(int *fds, unsigned n);

#endif
