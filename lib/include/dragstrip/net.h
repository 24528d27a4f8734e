/* Socket set-up shared by the tools: names or addresses, IPv4 or IPv6, TCP or UDP. */
#ifndef DRAGSTRIP_NET_H
#define DRAGSTRIP_NET_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct ds_error;

/* Parses a port number 1..65535. Returns 0 or -EINVAL. */
int ds_port_parse(const char *text, uint16_t *port);

/* Binds and, for SOCK_STREAM, listens on host:port (host NULL: every address, IPv6 and
 * IPv4 both when the system allows). Sets SO_REUSEADDR for TCP only: on UDP it would let
 * two receivers share a port and split its traffic. Returns the descriptor or a
 * negative errno; "port in use" is -EADDRINUSE with err saying so. */
int ds_net_listen(const char *host, uint16_t port, int socktype, struct ds_error *err);

/* Connects to host:port (a name, an IPv4 or an IPv6 address), trying each address the
 * name resolves to. timeout_ms bounds each attempt (0: the system's). For SOCK_DGRAM it
 * connects the socket so send() goes to the peer. Returns the descriptor or a negative
 * errno with err naming the host and the reason. */
int ds_net_connect(const char *host, uint16_t port, int socktype, int timeout_ms,
                   struct ds_error *err);

/* Connects fd, a socket the caller set up (bound, buffers sized), to addr within
 * timeout_ms (0 or negative: no deadline of its own), the wait ending on a stop or once
 * *also (may be NULL) is set (-EINTR). fd is blocking again afterwards. Returns 0 or a
 * negative errno; the caller closes fd either way. */
int ds_net_connect_socket(int fd, const struct sockaddr *addr, socklen_t len, int timeout_ms,
                          atomic_bool *also);

/* Accepts one connection, waiting at most timeout_ms (negative: forever). Returns the
 * descriptor, -ETIMEDOUT, or a negative errno. The peer's address is written to peer. */
int ds_net_accept(int listen_fd, int timeout_ms, char *peer, size_t peer_len, struct ds_error *err);

/* Sets SO_SNDBUF and SO_RCVBUF (bytes > 0). Returns 0 or a negative errno. */
int ds_net_set_buffers(int fd, int bytes, struct ds_error *err);

/* "host:port" or "[v6]:port" for an address. */
const char *ds_net_format(const struct sockaddr *addr, socklen_t len, char *buf, size_t buf_len);

/* The same for the peer of the connected socket fd ("?" when it has none), so both ends
 * of a connection name the other alike. */
const char *ds_net_peer_name(int fd, char *buf, size_t buf_len);

#endif
