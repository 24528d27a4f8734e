/* TLS for xftp and xftpd (RFC 4217 explicit FTPS): a backend of xftp_conn (xconn.h) over
 * OpenSSL. A connection begins plain and is turned into TLS in place, the control
 * connection after AUTH TLS, each data connection of a PROT P session after its 150.
 * TLS 1.2 and 1.3 only; a data connection resumes the control connection's session, and
 * the server refuses one that does not (what vsftpd calls require_ssl_reuse), so a data
 * connection is known to come from the client that logged in.
 *
 * Where the kernel has TLS (the tls module) OpenSSL hands it the keys: the connection is
 * then `kernel`, sendfile() serves again, and nothing is copied in user space; otherwise
 * the records are made in user space, a file's straight from its pages in the page
 * cache. */
#ifndef XFTP_XTLS_H
#define XFTP_XTLS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

struct ds_error;
struct xftp_conn;
struct xftp_tls;

/* The server's context: its certificate chain and key (PEM files), read now, so a key
 * readable only by root is read before privileges drop. Returns 0 or a negative errno
 * with err naming the file and OpenSSL's reason. */
int xftp_tls_server(struct xftp_tls **out, const char *cert_file, const char *key_file,
                    struct ds_error *err);

/* The client's context: the server's certificate is checked against ca_file (PEM; NULL:
 * the system's CAs) and the host name given to xftp_tls_connect, unless insecure. */
int xftp_tls_client(struct xftp_tls **out, const char *ca_file, bool insecure,
                    struct ds_error *err);

/* Gives the server's sessions of this process an identity of their own: a data
 * connection can then resume only a session of this process's control connection, not one
 * another client's session was given. Called once in each session process. */
int xftp_tls_server_session_scope(struct xftp_tls *tls, const void *id, size_t len);

void xftp_tls_free(struct xftp_tls *tls);

/* Turns the plain connections conns[0..n-1] into TLS and runs their handshakes together,
 * within timeout_ms (negative: none), ending on a stop or *also (may be NULL): -EINTR.
 * server: this side is the TLS server. resume (may be NULL): the control connection,
 * already TLS, whose session a client offers and a server requires. host: the name the
 * client checks the certificate against (and sends as SNI). On failure every connection
 * in conns is closed; the return is a negative errno (-EACCES: the certificate refused,
 * -EPERM: a data connection that did not resume the control's session), err saying why. */
int xftp_tls_start(struct xftp_conn *conns, unsigned n, struct xftp_tls *tls, bool server,
                   const char *host, struct xftp_conn *resume, int timeout_ms, atomic_bool *also,
                   struct ds_error *err);

/* Whether c is TLS. */
bool xftp_tls_on(const struct xftp_conn *c);
/* Who seals the records c sends: "kernel" (kernel TLS), "xftp" (tls_seal.h), "openssl"
 * (a suite neither knows), or "" when c is not TLS. */
const char *xftp_tls_sealed_by(const struct xftp_conn *c);
/* Who opens the records c receives: "xftp" (tls_open.h, TLS 1.3), "kernel", "openssl",
 * or "" when c is not TLS. */
const char *xftp_tls_opened_by(const struct xftp_conn *c);
/* c's protocol ("TLSv1.3") and cipher suite, or "" when c is not TLS. */
const char *xftp_tls_version(const struct xftp_conn *c);
const char *xftp_tls_cipher(const struct xftp_conn *c);

#endif
