/* Socket set-up shared by the tools: names or addresses, IPv4 or IPv6, TCP or UDP. */
#include <dragstrip/net.h>

#include <dragstrip/error.h>
#include <dragstrip/stop.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int ds_port_parse(const char *text, uint16_t *port)
{
        unsigned value = 0;

        if (!text || !*text)
                return -EINVAL;
        for (const char *p = text; *p; p++) {
                if (*p < '0' || *p > '9')
                        return -EINVAL;
                value = value * 10 + (unsigned)(*p - '0');
                if (value > 65535)
                        return -EINVAL;
        }
        if (value == 0)
                return -EINVAL;
        *port = (uint16_t)value;
        return 0;
}

/* Closes fd on a failure path, keeping the errno that explains the failure. */
static int close_failed(int fd, int neg_errno)
{
        close(fd);
        return neg_errno;
}

/* Maps a getaddrinfo failure to a negative errno and a message naming the host. */
static int resolve_failed(struct ds_error *err, const char *host, int gai_rc)
{
        int neg_errno = gai_rc == EAI_SYSTEM   ? -errno
                        : gai_rc == EAI_MEMORY ? -ENOMEM
                        : gai_rc == EAI_AGAIN  ? -EAGAIN
                                               : -EHOSTUNREACH;
        ds_fail(err, 0, "%s: %s", host,
                gai_rc == EAI_SYSTEM ? strerror(-neg_errno) : gai_strerror(gai_rc));
        return neg_errno;
}

static int resolve(const char *host, uint16_t port, int socktype, int flags, struct addrinfo **list,
                   struct ds_error *err)
{
        char service[8];
        struct addrinfo hints = {
            .ai_family = AF_UNSPEC,
            .ai_socktype = socktype,
            .ai_flags = flags | AI_NUMERICSERV,
        };

        snprintf(service, sizeof(service), "%u", port);
        int rc = getaddrinfo(host, service, &hints, list);
        return rc == 0 ? 0 : resolve_failed(err, host ? host : "localhost", rc);
}

/* One socket bound to addr, listening when it is a stream. Returns fd or -errno. */
static int bind_one(const struct sockaddr *addr, socklen_t len, int socktype)
{
        int fd = socket(addr->sa_family, socktype | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;

        int on = 1, off = 0;
        /* A restarted server must not wait out TIME_WAIT. Not for UDP: there it would let
         * two receivers share the port and split the traffic silently. */
        if (socktype == SOCK_STREAM &&
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) < 0)
                return close_failed(fd, -errno);
        /* One socket for both families where the system allows mapped addresses. */
        if (addr->sa_family == AF_INET6 &&
            IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)addr)->sin6_addr) &&
            setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)) < 0)
                return close_failed(fd, -errno);
        if (bind(fd, addr, len) < 0)
                return close_failed(fd, -errno);
        if (socktype == SOCK_STREAM && listen(fd, SOMAXCONN) < 0)
                return close_failed(fd, -errno);
        return fd;
}

/* Every address: [::] taking IPv4 too, or 0.0.0.0 where IPv6 is missing or disabled. */
static int bind_any(uint16_t port, int socktype)
{
        struct sockaddr_in6 any6 = {
            .sin6_family = AF_INET6, .sin6_port = htons(port), .sin6_addr = IN6ADDR_ANY_INIT};
        int fd = bind_one((struct sockaddr *)&any6, sizeof(any6), socktype);
        if (fd != -EAFNOSUPPORT && fd != -EADDRNOTAVAIL)
                return fd;

        struct sockaddr_in any4 = {
            .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_ANY)};
        return bind_one((struct sockaddr *)&any4, sizeof(any4), socktype);
}

int ds_net_listen(const char *host, uint16_t port, int socktype, struct ds_error *err)
{
        int fd = -EADDRNOTAVAIL;

        if (!host) {
                fd = bind_any(port, socktype);
        } else {
                struct addrinfo *list;
                int rc = resolve(host, port, socktype, AI_PASSIVE, &list, err);
                if (rc < 0)
                        return rc;
                for (struct addrinfo *ai = list; ai; ai = ai->ai_next) {
                        fd = bind_one(ai->ai_addr, ai->ai_addrlen, socktype);
                        if (fd >= 0)
                                break;
                }
                freeaddrinfo(list);
        }
        if (fd == -EADDRINUSE)
                return ds_fail(err, 0, "port %u is in use", port), -EADDRINUSE;
        if (fd < 0)
                return ds_fail(err, fd, "listen on %s port %u", host ? host : "*", port);
        return fd;
}

/* Restores blocking mode once the connection is made; the tools' I/O blocks. */
static int set_blocking(int fd)
{
        int flags = fcntl(fd, F_GETFL);
        if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0)
                return -errno;
        return 0;
}

int ds_net_connect_socket(int fd, const struct sockaddr *addr, socklen_t len, int timeout_ms,
                          atomic_bool *also)
{
        int flags = fcntl(fd, F_GETFL);
        if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
                return -errno;
        if (connect(fd, addr, len) < 0) {
                if (errno != EINPROGRESS)
                        return -errno;
                int ready = ds_poll_one_until(fd, POLLOUT, timeout_ms > 0 ? timeout_ms : -1, also);
                if (ready == 0)
                        return -ETIMEDOUT;
                if (ready < 0)
                        return ready;
                int so_error = 0;
                socklen_t optlen = sizeof(so_error);
                if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &optlen) < 0)
                        return -errno;
                if (so_error != 0)
                        return -so_error;
        }
        return set_blocking(fd);
}

/* One attempt at one address, bounded by timeout_ms (0: the system's own timeout). */
static int connect_one(const struct addrinfo *ai, int timeout_ms)
{
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0)
                return -errno;
        int rc = ds_net_connect_socket(fd, ai->ai_addr, ai->ai_addrlen, timeout_ms, NULL);
        return rc < 0 ? close_failed(fd, rc) : fd;
}

int ds_net_connect(const char *host, uint16_t port, int socktype, int timeout_ms,
                   struct ds_error *err)
{
        struct addrinfo *list;
        const char *name = host ? host : "localhost";

        /* No AI_ADDRCONFIG: it hides ::1 on hosts without a global IPv6 address, and an
         * address family the host lacks fails fast anyway. */
        int rc = resolve(name, port, socktype, 0, &list, err);
        if (rc < 0)
                return rc;

        int fd = -EHOSTUNREACH;
        for (struct addrinfo *ai = list; ai; ai = ai->ai_next) {
                int attempt = connect_one(ai, timeout_ms);
                /* Keep the first real reason: "refused" says more than the "unreachable"
                 * of a family tried after it. */
                if (attempt >= 0 || fd == -EHOSTUNREACH || fd == -ENETUNREACH ||
                    fd == -EADDRNOTAVAIL || fd == -EAFNOSUPPORT)
                        fd = attempt;
                if (fd >= 0)
                        break;
        }
        freeaddrinfo(list);
        if (fd < 0)
                return ds_fail(err, fd, "connect to %s port %u", name, port);
        return fd;
}

int ds_net_accept(int listen_fd, int timeout_ms, char *peer, size_t peer_len, struct ds_error *err)
{
        int ready = ds_poll_one(listen_fd, POLLIN, timeout_ms);
        if (ready == 0)
                return ds_fail(err, 0, "no connection within %d ms", timeout_ms), -ETIMEDOUT;
        if (ready < 0)
                return ds_fail(err, ready, "waiting for a connection");

        struct sockaddr_storage addr;
        socklen_t len = sizeof(addr);
        int fd = accept4(listen_fd, (struct sockaddr *)&addr, &len, SOCK_CLOEXEC);
        if (fd < 0)
                return ds_fail(err, -errno, "accept");
        if (peer && peer_len)
                ds_net_format((struct sockaddr *)&addr, len, peer, peer_len);
        return fd;
}

int ds_net_set_buffers(int fd, int bytes, struct ds_error *err)
{
        if (bytes <= 0)
                return ds_fail(err, -EINVAL, "socket buffer of %d bytes", bytes);
        if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes)) < 0)
                return ds_fail(err, -errno, "SO_SNDBUF %d", bytes);
        if (setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes)) < 0)
                return ds_fail(err, -errno, "SO_RCVBUF %d", bytes);
        return 0;
}

const char *ds_net_format(const struct sockaddr *addr, socklen_t len, char *buf, size_t buf_len)
{
        char text[INET6_ADDRSTRLEN] = "?";

        if (addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
                const struct sockaddr_in *in = (const struct sockaddr_in *)addr;
                inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
                snprintf(buf, buf_len, "%s:%u", text, ntohs(in->sin_port));
        } else if (addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
                const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)addr;
                /* An IPv4 peer of a dual-stack socket reads as the IPv4 address it is. */
                if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
                        inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], text, sizeof(text));
                        snprintf(buf, buf_len, "%s:%u", text, ntohs(in6->sin6_port));
                } else {
                        inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
                        snprintf(buf, buf_len, "[%s]:%u", text, ntohs(in6->sin6_port));
                }
        } else {
                snprintf(buf, buf_len, "?");
        }
        return buf;
}

const char *ds_net_peer_name(int fd, char *buf, size_t buf_len)
{
        struct sockaddr_storage addr;
        socklen_t len = sizeof(addr);

        if (getpeername(fd, (struct sockaddr *)&addr, &len) != 0) {
                snprintf(buf, buf_len, "?");
                return buf;
        }
        return ds_net_format((struct sockaddr *)&addr, len, buf, buf_len);
}
