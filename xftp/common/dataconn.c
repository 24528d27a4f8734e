/* FTP data connections: the PORT/PASV/EPRT/EPSV codecs and opening connections with
 * deadlines. */
#include "dataconn.h"
#include "xconn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dragstrip/clock.h>
#include <dragstrip/error.h>
#include <dragstrip/net.h>
#include <dragstrip/serve.h>
#include <dragstrip/stop.h>

/* A decimal number 0..max at *p with at most digits_max digits, advancing p. */
static int parse_number(const char **p, unsigned max, unsigned digits_max, unsigned *value)
{
        unsigned n = 0, digits = 0;

        while (**p >= '0' && **p <= '9') {
                if (++digits > digits_max)
                        return -EINVAL;
                n = n * 10 + (unsigned)(**p - '0');
                (*p)++;
        }
        if (digits == 0 || n > max)
                return -EINVAL;
        *value = n;
        return 0;
}

static void skip_spaces(const char **p)
{
        while (**p == ' ')
                (*p)++;
}

/* h1,h2,h3,h4,p1,p2 at *p, advancing p past it. */
static int parse_six(const char **p, struct xftp_addr *out)
{
        unsigned n[6];

        for (int i = 0; i < 6; i++) {
                skip_spaces(p);
                if (parse_number(p, 255, 3, &n[i]) < 0)
                        return -EINVAL;
                skip_spaces(p);
                if (i < 5 && *(*p)++ != ',')
                        return -EINVAL;
        }
        if (n[4] == 0 && n[5] == 0)
                return -EINVAL; /* port 0: nothing to connect to */
        struct sockaddr_in *in = (struct sockaddr_in *)&out->ss;
        memset(out, 0, sizeof(*out));
        in->sin_family = AF_INET;
        in->sin_addr.s_addr = htonl(n[0] << 24 | n[1] << 16 | n[2] << 8 | n[3]);
        in->sin_port = htons((uint16_t)(n[4] << 8 | n[5]));
        out->len = sizeof(*in);
        return 0;
}

int xftp_parse_port(const char *arg, struct xftp_addr *out)
{
        const char *p = arg;
        struct xftp_addr addr;

        if (parse_six(&p, &addr) < 0)
                return -EINVAL;
        skip_spaces(&p);
        if (*p != '\0')
                return -EINVAL;
        *out = addr;
        return 0;
}

/* The IPv4 address of addr in host order (also from an IPv4-mapped IPv6 one). */
static int ipv4_of(const struct xftp_addr *addr, uint32_t *ip)
{
        if (addr->ss.ss_family == AF_INET) {
                *ip = ntohl(((const struct sockaddr_in *)&addr->ss)->sin_addr.s_addr);
                return 0;
        }
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)&addr->ss)->sin6_addr;
        if (addr->ss.ss_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(a6)) {
                memcpy(ip, &a6->s6_addr[12], 4);
                *ip = ntohl(*ip);
                return 0;
        }
        return -EAFNOSUPPORT;
}

int xftp_format_port(const struct xftp_addr *addr, char *buf, size_t len)
{
        uint32_t ip;
        uint16_t port = xftp_addr_port(addr);

        if (ipv4_of(addr, &ip) < 0)
                return -EAFNOSUPPORT;
        int n = snprintf(buf, len, "%u,%u,%u,%u,%u,%u", ip >> 24, ip >> 16 & 255, ip >> 8 & 255,
                         ip & 255, port >> 8, port & 255);
        return n > 0 && (size_t)n < len ? 0 : -ENOSPC;
}

int xftp_parse_pasv(const char *reply, struct xftp_addr *out)
{
        /* Past the code, the first digit starts the six numbers (RFC 1123 4.1.2.6: the
         * parentheses are not to be relied on). */
        const char *p = reply;
        if (strncmp(p, "227", 3) == 0)
                p += 3;
        while (*p && (*p < '0' || *p > '9'))
                p++;
        return parse_six(&p, out);
}

int xftp_parse_eprt(const char *arg, struct xftp_addr *out)
{
        char delim = arg[0], host[INET6_ADDRSTRLEN];
        const char *p = arg + 1;
        unsigned af, port;
        struct xftp_addr addr = {0};

        if (delim < 33 || delim > 126 || (delim >= '0' && delim <= '9'))
                return -EINVAL;
        if (parse_number(&p, 65535, 5, &af) < 0 || *p++ != delim)
                return -EINVAL;
        const char *end = strchr(p, delim);
        if (!end || (size_t)(end - p) >= sizeof(host) || end == p)
                return -EINVAL;
        memcpy(host, p, (size_t)(end - p));
        host[end - p] = '\0';
        p = end + 1;
        if (parse_number(&p, 65535, 5, &port) < 0 || port == 0 || *p++ != delim || *p != '\0')
                return -EINVAL;
        if (af == 1) {
                struct sockaddr_in *in = (struct sockaddr_in *)&addr.ss;
                in->sin_family = AF_INET;
                if (inet_pton(AF_INET, host, &in->sin_addr) != 1)
                        return -EINVAL;
                addr.len = sizeof(*in);
        } else if (af == 2) {
                struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&addr.ss;
                in6->sin6_family = AF_INET6;
                if (inet_pton(AF_INET6, host, &in6->sin6_addr) != 1)
                        return -EINVAL;
                addr.len = sizeof(*in6);
        } else {
                return -EAFNOSUPPORT;
        }
        xftp_addr_set_port(&addr, (uint16_t)port);
        *out = addr;
        return 0;
}

/* The address of addr as text, without the port; an IPv4-mapped one as IPv4. af gets the
 * RFC 2428 family number. */
static int host_text(const struct xftp_addr *addr, char *text, size_t len, int *af)
{
        uint32_t ip;

        if (ipv4_of(addr, &ip) == 0) {
                struct in_addr in = {.s_addr = htonl(ip)};
                *af = 1;
                return inet_ntop(AF_INET, &in, text, (socklen_t)len) ? 0 : -ENOSPC;
        }
        if (addr->ss.ss_family != AF_INET6)
                return -EAFNOSUPPORT;
        *af = 2;
        return inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)&addr->ss)->sin6_addr, text,
                         (socklen_t)len)
                   ? 0
                   : -ENOSPC;
}

int xftp_format_eprt(const struct xftp_addr *addr, char *buf, size_t len)
{
        char text[INET6_ADDRSTRLEN];
        int af;
        int rc = host_text(addr, text, sizeof(text), &af);
        if (rc < 0)
                return rc;
        int n = snprintf(buf, len, "|%d|%s|%u|", af, text, xftp_addr_port(addr));
        return n > 0 && (size_t)n < len ? 0 : -ENOSPC;
}

int xftp_parse_epsv(const char *reply, uint16_t *port)
{
        const char *p = strchr(reply, '(');
        unsigned value;

        if (!p)
                return -EINVAL;
        char delim = p[1];
        if (delim < 33 || delim > 126 || (delim >= '0' && delim <= '9'))
                return -EINVAL;
        p += 2;
        if (p[0] != delim || p[1] != delim)
                return -EINVAL;
        p += 2;
        if (parse_number(&p, 65535, 5, &value) < 0 || value == 0 || p[0] != delim || p[1] != ')')
                return -EINVAL;
        *port = (uint16_t)value;
        return 0;
}

int xftp_format_epsv(uint16_t port, char *buf, size_t len)
{
        int n = snprintf(buf, len, "(|||%u|)", port);
        return n > 0 && (size_t)n < len ? 0 : -ENOSPC;
}

uint16_t xftp_addr_port(const struct xftp_addr *addr)
{
        if (addr->ss.ss_family == AF_INET)
                return ntohs(((const struct sockaddr_in *)&addr->ss)->sin_port);
        if (addr->ss.ss_family == AF_INET6)
                return ntohs(((const struct sockaddr_in6 *)&addr->ss)->sin6_port);
        return 0;
}

void xftp_addr_set_port(struct xftp_addr *addr, uint16_t port)
{
        if (addr->ss.ss_family == AF_INET)
                ((struct sockaddr_in *)&addr->ss)->sin_port = htons(port);
        else if (addr->ss.ss_family == AF_INET6)
                ((struct sockaddr_in6 *)&addr->ss)->sin6_port = htons(port);
}

int xftp_addr_same_host(const struct xftp_addr *a, const struct xftp_addr *b)
{
        uint32_t ip_a, ip_b;

        if (ipv4_of(a, &ip_a) == 0 || ipv4_of(b, &ip_b) == 0)
                return ipv4_of(a, &ip_a) == 0 && ipv4_of(b, &ip_b) == 0 && ip_a == ip_b;
        if (a->ss.ss_family != AF_INET6 || b->ss.ss_family != AF_INET6)
                return 0;
        return memcmp(&((const struct sockaddr_in6 *)&a->ss)->sin6_addr,
                      &((const struct sockaddr_in6 *)&b->ss)->sin6_addr,
                      sizeof(struct in6_addr)) == 0;
}

const char *xftp_addr_text(const struct xftp_addr *addr, char *buf, size_t len)
{
        return ds_net_format((const struct sockaddr *)&addr->ss, addr->len, buf, len);
}

int xftp_addr_local(int fd, struct xftp_addr *out)
{
        out->len = sizeof(out->ss);
        return getsockname(fd, (struct sockaddr *)&out->ss, &out->len) < 0 ? -errno : 0;
}

int xftp_addr_peer(int fd, struct xftp_addr *out)
{
        out->len = sizeof(out->ss);
        return getpeername(fd, (struct sockaddr *)&out->ss, &out->len) < 0 ? -errno : 0;
}

/* A TCP socket of addr's family with the data options applied. */
static int data_socket(int family, const struct xftp_data_opts *opts)
{
        int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (opts->sockbuf > 0 &&
            (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &opts->sockbuf, sizeof(opts->sockbuf)) < 0 ||
             setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &opts->sockbuf, sizeof(opts->sockbuf)) < 0)) {
                int rc = -errno;
                close(fd);
                return rc;
        }
        return fd;
}

/* Binds fd to addr's host and a port of opts' range, tried from a random one on so that
 * sessions started together do not all race for the same first port. Returns 0 or a
 * negative errno (-EADDRINUSE: every port of the range is taken). */
static int bind_in_range(int fd, struct xftp_addr *addr, const struct xftp_data_opts *opts)
{
        if (!opts->port_lo) {
                xftp_addr_set_port(addr, 0);
                return bind(fd, (struct sockaddr *)&addr->ss, addr->len) < 0 ? -errno : 0;
        }
        unsigned span = (unsigned)opts->port_hi - opts->port_lo + 1;
        unsigned first = (unsigned)(ds_now_ns() ^ ((uint64_t)getpid() << 16)) % span;
        /* A transfer's end leaves its port in TIME_WAIT for a minute: without this, a range
         * of N ports would serve N transfers a minute. A listening port stays refused. */
        int on = 1;
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) < 0)
                return -errno;

        for (unsigned i = 0; i < span; i++) {
                xftp_addr_set_port(addr, (uint16_t)(opts->port_lo + (first + i) % span));
                if (bind(fd, (struct sockaddr *)&addr->ss, addr->len) == 0)
                        return 0;
                if (errno != EADDRINUSE)
                        return -errno;
        }
        return -EADDRINUSE;
}

int xftp_data_listen(const struct xftp_addr *local, const struct xftp_data_opts *opts,
                     struct ds_error *err)
{
        struct xftp_addr addr = *local;
        char text[XFTP_ADDR_TEXT];

        int fd = data_socket(addr.ss.ss_family, opts);
        if (fd < 0)
                return ds_fail(err, fd, "data socket");
        int rc = bind_in_range(fd, &addr, opts);
        if (rc == 0 && listen(fd, 16) < 0)
                rc = -errno;
        if (rc < 0) {
                close(fd);
                xftp_addr_set_port(&addr, 0);
                return ds_fail(err, rc, "listen for data on %s",
                               xftp_addr_text(&addr, text, sizeof(text)));
        }
        return fd;
}

void xftp_data_close(int *fds, unsigned n)
{
        for (unsigned i = 0; i < n; i++) {
                if (fds[i] >= 0)
                        close(fds[i]);
                fds[i] = -1;
        }
}

int xftp_data_accept(int listen_fd, const struct xftp_addr *expect_peer, int *fds, unsigned n,
                     const struct xftp_data_opts *opts, struct xftp_data_refused *refused,
                     struct ds_error *err)
{
        unsigned got = 0;
        uint64_t deadline = ds_deadline_in(opts->timeout_ms);

        for (unsigned i = 0; i < n; i++)
                fds[i] = -1;
        while (got < n) {
                int left = opts->timeout_ms < 0 ? -1 : ds_deadline_left_ms(deadline);
                int rc =
                    left == 0 ? -ETIMEDOUT : ds_poll_one_until(listen_fd, POLLIN, left, opts->stop);
                if (rc == 0)
                        rc = -ETIMEDOUT;
                if (rc < 0) {
                        xftp_data_close(fds, n);
                        return ds_fail(err, rc == -ETIMEDOUT ? 0 : rc,
                                       rc == -ETIMEDOUT ? "no data connection within %d ms"
                                                        : "waiting for data connection %d",
                                       rc == -ETIMEDOUT ? opts->timeout_ms : (int)got + 1),
                               rc;
                }
                struct xftp_addr peer = {.len = sizeof(peer.ss)};
                int fd = accept4(listen_fd, (struct sockaddr *)&peer.ss, &peer.len, SOCK_CLOEXEC);
                if (fd < 0) {
                        if (errno == EAGAIN || errno == ECONNABORTED || errno == EINTR)
                                continue;
                        rc = -errno;
                        xftp_data_close(fds, n);
                        return ds_fail(err, rc, "accept data connection");
                }
                if (expect_peer && !xftp_addr_same_host(&peer, expect_peer)) {
                        close(fd); /* someone else's connection: not ours to serve */
                        if (refused && refused->count++ == 0)
                                refused->first = peer;
                        continue;
                }
                fds[got++] = fd;
                deadline = ds_deadline_in(opts->timeout_ms);
        }
        return 0;
}

/* One non-blocking connect to addr, finished within timeout_ms or stopped. */
static int connect_one(const struct xftp_addr *addr, const struct xftp_addr *bind_host,
                       const struct xftp_data_opts *opts)
{
        int fd = data_socket(addr->ss.ss_family, opts);
        if (fd < 0)
                return fd;
        int rc = 0;
        if (bind_host) {
                struct xftp_addr local = *bind_host;
                xftp_addr_set_port(&local, 0);
                if (bind(fd, (struct sockaddr *)&local.ss, local.len) < 0)
                        rc = -errno;
        }
        if (rc == 0)
                rc = ds_net_connect_socket(fd, (const struct sockaddr *)&addr->ss, addr->len,
                                           opts->timeout_ms, opts->stop);
        if (rc < 0) {
                close(fd);
                return rc;
        }
        return fd;
}

int xftp_data_connect(const struct xftp_addr *addr, const struct xftp_addr *bind_host, int *fds,
                      unsigned n, const struct xftp_data_opts *opts, struct ds_error *err)
{
        char text[XFTP_ADDR_TEXT];

        for (unsigned i = 0; i < n; i++)
                fds[i] = -1;
        for (unsigned i = 0; i < n; i++) {
                int fd = connect_one(addr, bind_host, opts);
                if (fd < 0) {
                        xftp_data_close(fds, n);
                        return ds_fail(err, fd, "data connection to %s",
                                       xftp_addr_text(addr, text, sizeof(text)));
                }
                fds[i] = fd;
        }
        return 0;
}

int xftp_data_write_all(struct xftp_conn *conn, const void *buf, size_t len,
                        const struct xftp_data_opts *opts, struct ds_error *err)
{
        int rc = xftp_conn_write_all(conn, buf, len, opts->timeout_ms, opts->stop);
        return rc < 0 ? ds_fail(err, rc, "data send") : 0;
}

long xftp_data_read_all(struct xftp_conn *conn, char **buf, size_t max,
                        const struct xftp_data_opts *opts, struct ds_error *err)
{
        size_t used = 0, room = 4096;
        char *data = malloc(room);

        *buf = NULL;
        if (!data)
                return ds_fail(err, -ENOMEM, "data buffer");
        for (;;) {
                if (used + 1 >= room) {
                        if (room > max) {
                                free(data);
                                return ds_fail(err, 0, "more than %zu bytes of data", max), -EFBIG;
                        }
                        char *bigger = realloc(data, room * 2);
                        if (!bigger) {
                                free(data);
                                return ds_fail(err, -ENOMEM, "data buffer");
                        }
                        data = bigger;
                        room *= 2;
                }
                ssize_t n = xftp_conn_recv(conn, data + used, room - used - 1, MSG_DONTWAIT);
                if (n > 0) {
                        used += (size_t)n;
                        continue;
                }
                if (n == 0)
                        break;
                int rc = n == -EAGAIN || n == -EINTR
                             ? xftp_conn_wait(conn, POLLIN, opts->timeout_ms, opts->stop)
                             : (int)n;
                if (rc <= 0) {
                        rc = rc == 0 ? -ETIMEDOUT : rc;
                        free(data);
                        return ds_fail(err, rc, "data receive");
                }
        }
        if (used > max) {
                free(data);
                return ds_fail(err, 0, "more than %zu bytes of data", max), -EFBIG;
        }
        data[used] = '\0';
        *buf = data;
        return (long)used;
}
