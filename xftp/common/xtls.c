/* TLS connections over OpenSSL (xtls.h). The socket is non-blocking underneath; a call
 * that may wait (no MSG_DONTWAIT) waits at most one slice, as a data socket's
 * SO_RCVTIMEO would, so the pipeline's stop and idle checks keep their rhythm. */
#include "xtls.h"

#include "filemap.h"
#include "xconn.h"

#include <dragstrip/clock.h>
#include <dragstrip/error.h>
#include <dragstrip/serve.h>
#include <dragstrip/stop.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/tls.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#define SLICE_MS    100
#define SHUTDOWN_MS 2000 /* at most this for a close_notify to leave */
#define READ_AHEAD  (256u << 10)

struct xftp_tls {
        SSL_CTX *ctx;
};

struct tls_conn {
        SSL *ssl;
        /* The control connection is read by the transfer's watcher while the session
         * writes replies: one SSL object is not for two threads at once. Held only for
         * the (non-blocking) OpenSSL call, never across a wait. */
        pthread_mutex_t lock;
        bool broken;                /* a fatal error: no close_notify may follow */
        char why[160];              /* OpenSSL's reason for the last fatal error */
        struct xftp_filemap window; /* tls_user_sendfile's view of the file */
        /* tls_user_sendfile's records, gathered for one write() (made at its first call);
         * their plaintext counts as sent only once all of them are on the socket. */
        BIO *gather;
        char *gathered;
        size_t gathered_len, gathered_sent, owed;
};

/* OpenSSL's oldest queued reason, for a message. */
static const char *ssl_reason(char *buf, size_t len)
{
        unsigned long code = ERR_get_error();
        if (code == 0)
                snprintf(buf, len, "no reason given");
        else
                ERR_error_string_n(code, buf, len);
        ERR_clear_error();
        return buf;
}

static int ctx_common(SSL_CTX *ctx)
{
        SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
        /* The kernel takes the keys where it can (tls.ko); silently user space where not.
         * A peer that closes without close_notify ends the stream as a close does in the
         * clear (MODE E's EOD still says whether all came). */
        SSL_CTX_set_options(ctx, SSL_OP_ENABLE_KTLS | SSL_OP_IGNORE_UNEXPECTED_EOF |
                                     SSL_OP_NO_RENEGOTIATION);
        return SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) == 1 ? 0 : -EPROTO;
}

int xftp_tls_server(struct xftp_tls **out, const char *cert_file, const char *key_file,
                    struct ds_error *err)
{
        char why[256];
        struct xftp_tls *tls = calloc(1, sizeof(*tls));

        *out = NULL;
        if (!tls || !(tls->ctx = SSL_CTX_new(TLS_server_method()))) {
                free(tls);
                return ds_fail(err, -ENOMEM, "TLS context");
        }
        int rc = ctx_common(tls->ctx);
        /* TLS 1.2: forward secrecy and AEAD only (TLS 1.3's suites all are). */
        if (rc == 0 && !SSL_CTX_set_cipher_list(
                           tls->ctx, "ECDHE+AESGCM:ECDHE+CHACHA20:DHE+AESGCM:DHE+CHACHA20"))
                rc = -EPROTO;
        SSL_CTX_set_options(tls->ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
        if (rc == 0 && SSL_CTX_use_certificate_chain_file(tls->ctx, cert_file) != 1)
                rc = ds_fail(err, -EINVAL, "--tls-cert %s: %s", cert_file,
                             ssl_reason(why, sizeof(why)));
        else if (rc == 0 && SSL_CTX_use_PrivateKey_file(tls->ctx, key_file, SSL_FILETYPE_PEM) != 1)
                rc = ds_fail(err, -EINVAL, "--tls-key %s: %s", key_file,
                             ssl_reason(why, sizeof(why)));
        else if (rc == 0 && SSL_CTX_check_private_key(tls->ctx) != 1)
                rc = ds_fail(err, -EINVAL, "--tls-key %s does not match --tls-cert %s", key_file,
                             cert_file);
        else if (rc < 0)
                ds_fail(err, rc, "TLS context: %s", ssl_reason(why, sizeof(why)));
        if (rc == 0)
                rc = xftp_tls_server_session_scope(tls, "xftpd", 5);
        if (rc < 0) {
                xftp_tls_free(tls);
                return rc;
        }
        *out = tls;
        return 0;
}

int xftp_tls_server_session_scope(struct xftp_tls *tls, const void *id, size_t len)
{
        return SSL_CTX_set_session_id_context(tls->ctx, id, (unsigned)len) == 1 ? 0 : -EINVAL;
}

int xftp_tls_client(struct xftp_tls **out, const char *ca_file, bool insecure, struct ds_error *err)
{
        char why[256];
        struct xftp_tls *tls = calloc(1, sizeof(*tls));

        *out = NULL;
        if (!tls || !(tls->ctx = SSL_CTX_new(TLS_client_method()))) {
                free(tls);
                return ds_fail(err, -ENOMEM, "TLS context");
        }
        int rc = ctx_common(tls->ctx);
        SSL_CTX_set_verify(tls->ctx, insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
        if (rc == 0 && ca_file && SSL_CTX_load_verify_locations(tls->ctx, ca_file, NULL) != 1)
                rc =
                    ds_fail(err, -EINVAL, "--cacert %s: %s", ca_file, ssl_reason(why, sizeof(why)));
        else if (rc == 0 && !ca_file && SSL_CTX_set_default_verify_paths(tls->ctx) != 1)
                rc = ds_fail(err, -EINVAL, "the system's CAs: %s", ssl_reason(why, sizeof(why)));
        if (rc < 0) {
                xftp_tls_free(tls);
                return rc;
        }
        *out = tls;
        return 0;
}

void xftp_tls_free(struct xftp_tls *tls)
{
        if (!tls)
                return;
        SSL_CTX_free(tls->ctx);
        free(tls);
}

/* The outcome of an OpenSSL call that failed with ret: -EAGAIN with *want the poll event
 * to wait for, 0 for the peer's close, or a negative errno. Called under the lock, in the
 * thread of the call (OpenSSL's error queue is per thread). */
static ssize_t ssl_outcome(struct tls_conn *t, int ret, short *want)
{
        switch (SSL_get_error(t->ssl, ret)) {
        case SSL_ERROR_WANT_READ:
                *want = POLLIN;
                return -EAGAIN;
        case SSL_ERROR_WANT_WRITE:
                *want = POLLOUT;
                return -EAGAIN;
        case SSL_ERROR_ZERO_RETURN:
                return 0;
        case SSL_ERROR_SYSCALL: {
                int rc = errno ? -errno : -EPIPE;
                t->broken = true;
                ERR_clear_error();
                return rc == -EAGAIN ? -EPIPE : rc;
        }
        default:
                t->broken = true;
                ssl_reason(t->why, sizeof(t->why));
                return -EPROTO;
        }
}

/* One wait of at most what is left of the slice that began at start_ns. */
static bool wait_slice(int fd, short want, uint64_t start_ns)
{
        uint64_t spent_ms = (ds_now_ns() - start_ns) / 1000000u;
        if (spent_ms >= SLICE_MS)
                return false;
        struct pollfd pfd = {.fd = fd, .events = want};
        return poll(&pfd, 1, (int)(SLICE_MS - spent_ms)) > 0;
}

/* No writev in TLS: each piece is its own SSL_write (a MODE E header, then 4 MiB that
 * OpenSSL cuts into records; one copy, the encryption's, into its record buffer). A retry
 * after -EAGAIN offers the same bytes again, as OpenSSL requires. */
static ssize_t tls_sendv(struct xftp_conn *c, const struct iovec *iov, int cnt, int flags)
{
        struct tls_conn *t = c->impl;
        uint64_t start_ns = ds_now_ns();
        size_t total = 0;

        for (int i = 0; i < cnt;) {
                size_t written = 0;
                short want = 0;
                ssize_t rc = 0;
                pthread_mutex_lock(&t->lock);
                int ok = iov[i].iov_len == 0 ||
                         SSL_write_ex(t->ssl, iov[i].iov_base, iov[i].iov_len, &written);
                if (!ok)
                        rc = ssl_outcome(t, 0, &want);
                pthread_mutex_unlock(&t->lock);
                if (ok) {
                        total += written;
                        i++;
                        continue;
                }
                if (rc == -EAGAIN && total == 0 && !(flags & MSG_DONTWAIT) &&
                    wait_slice(c->fd, want, start_ns))
                        continue;
                if (total > 0)
                        break;
                return rc == 0 ? -EPIPE : rc;
        }
        return (ssize_t)total;
}

static ssize_t tls_recv(struct xftp_conn *c, void *buf, size_t len, int flags)
{
        struct tls_conn *t = c->impl;
        uint64_t start_ns = ds_now_ns();
        size_t got = 0;

        while (got < len) {
                size_t n = 0;
                short want = 0;
                ssize_t rc = 0;
                pthread_mutex_lock(&t->lock);
                int ok = SSL_read_ex(t->ssl, (char *)buf + got, len - got, &n);
                if (!ok)
                        rc = ssl_outcome(t, 0, &want);
                pthread_mutex_unlock(&t->lock);
                if (ok) {
                        got += n;
                        if (!(flags & MSG_WAITALL))
                                break;
                        continue;
                }
                if (rc == -EAGAIN && !(flags & MSG_DONTWAIT) && wait_slice(c->fd, want, start_ns))
                        continue;
                if (got > 0 || rc == 0)
                        break;
                return rc;
        }
        return (ssize_t)got;
}

static size_t tls_pending(struct xftp_conn *c)
{
        struct tls_conn *t = c->impl;

        pthread_mutex_lock(&t->lock);
        int n = SSL_pending(t->ssl);
        pthread_mutex_unlock(&t->lock);
        return n > 0 ? (size_t)n : 0;
}

/* Kernel TLS: the kernel encrypts what sendfile() hands it, page-cache pages straight to
 * the wire as in the clear. */
static ssize_t tls_sendfile(struct xftp_conn *c, int file_fd, off_t *offset, size_t len)
{
        struct tls_conn *t = c->impl;

        pthread_mutex_lock(&t->lock);
        ossl_ssize_t sent = SSL_sendfile(t->ssl, file_fd, *offset, len, 0);
        short want = 0;
        ssize_t rc = sent >= 0 ? sent : ssl_outcome(t, (int)sent, &want);
        pthread_mutex_unlock(&t->lock);
        if (sent > 0)
                *offset += sent;
        if (rc == -EAGAIN) {
                struct pollfd pfd = {.fd = c->fd, .events = POLLOUT};
                poll(&pfd, 1, SLICE_MS);
        }
        return rc;
}

/* Sends close_notify (a MODE S receiver's proof that the end is the end) within
 * SHUTDOWN_MS, without waiting for the peer's. */
static void tls_shutdown(struct xftp_conn *c, struct tls_conn *t)
{
        uint64_t deadline = ds_deadline_in(SHUTDOWN_MS);

        while (!t->broken) {
                short want = 0;
                pthread_mutex_lock(&t->lock);
                int ret = SSL_shutdown(t->ssl);
                ssize_t rc = ret >= 0 ? 0 : ssl_outcome(t, ret, &want);
                pthread_mutex_unlock(&t->lock);
                int left = ds_deadline_left_ms(deadline);
                if (rc != -EAGAIN || want != POLLOUT || left == 0 ||
                    ds_poll_one(c->fd, POLLOUT, left) <= 0)
                        break;
        }
}

/* After close_notify: the end of our sending (FIN), then what the peer still sends is
 * read and dropped until it closes, within SHUTDOWN_MS. A close() with unread bytes in
 * the socket (the tickets a TLS 1.3 server sends on every connection) would be a reset,
 * and a reset can overtake the last data the peer has not yet read: vsftpd then fails an
 * upload with 426. */
static void tls_drain(struct xftp_conn *c)
{
        uint64_t deadline = ds_deadline_in(SHUTDOWN_MS);
        char sink[4096];

        if (shutdown(c->fd, SHUT_WR) < 0)
                return;
        for (;;) {
                ssize_t n = recv(c->fd, sink, sizeof(sink), MSG_DONTWAIT);
                if (n > 0)
                        continue;
                if (n == 0 || (errno != EAGAIN && errno != EINTR))
                        break;
                int left = ds_deadline_left_ms(deadline);
                if (left == 0 || ds_poll_one(c->fd, POLLIN, left) <= 0)
                        break;
        }
}

/* Plaintext a gathered write() carries: 16 records. Written one record at a time, as
 * OpenSSL writes them to a socket, a TLS get of 1 GiB cost the server 65 536 write()s,
 * each a pass through TCP and a wake-up of the receiver. */
#define GATHER_BYTES (256u << 10)
#define GATHER_ROOM  (GATHER_BYTES + 4096u) /* and the records' headers and tags */

/* The gathering BIO: OpenSSL's records appended to the connection's buffer, which never
 * refuses what one SSL_write of GATHER_BYTES makes. */
static int gather_write(BIO *bio, const char *in, int len)
{
        struct tls_conn *t = BIO_get_data(bio);

        BIO_clear_retry_flags(bio);
        if (len < 0 || (size_t)len > GATHER_ROOM - t->gathered_len)
                return -1;
        memcpy(t->gathered + t->gathered_len, in, (size_t)len);
        t->gathered_len += (size_t)len;
        return len;
}

static long gather_ctrl(BIO *bio, int cmd, long num, void *ptr)
{
        (void)bio;
        (void)num;
        (void)ptr;
        return cmd == BIO_CTRL_FLUSH; /* the flush is flush_gathered's */
}

static BIO_METHOD *gather_method;
static pthread_once_t gather_once = PTHREAD_ONCE_INIT;

static void make_gather_method(void)
{
        gather_method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "xftp gather");
        if (gather_method && (!BIO_meth_set_write(gather_method, gather_write) ||
                              !BIO_meth_set_ctrl(gather_method, gather_ctrl))) {
                BIO_meth_free(gather_method);
                gather_method = NULL;
        }
}

static int gather_start(struct tls_conn *t)
{
        if (t->gather)
                return 0;
        pthread_once(&gather_once, make_gather_method);
        if (!gather_method || !(t->gathered = malloc(GATHER_ROOM)) ||
            !(t->gather = BIO_new(gather_method)))
                return -ENOMEM;
        BIO_set_data(t->gather, t);
        BIO_set_init(t->gather, 1);
        return 0;
}

/* Encrypts len bytes of data into the gathered records: the socket's BIO is set aside
 * for the one SSL_write, so that OpenSSL's records pile up instead of each going by a
 * write() of its own. Returns 0 or a negative errno. */
static int gather_records(struct tls_conn *t, const char *data, size_t len)
{
        size_t written = 0;
        short want = 0;
        int rc = 0;

        pthread_mutex_lock(&t->lock);
        BIO *sock = SSL_get_wbio(t->ssl);
        BIO_up_ref(sock);
        BIO_up_ref(t->gather);
        SSL_set0_wbio(t->ssl, t->gather);
        if (!SSL_write_ex(t->ssl, data, len, &written))
                rc = (int)ssl_outcome(t, 0, &want);
        if (rc == 0 && written != len)
                rc = -EPROTO;
        SSL_set0_wbio(t->ssl, sock);
        pthread_mutex_unlock(&t->lock);
        /* The gathering BIO never asks to wait, and a write has no peer's close to see. */
        return rc == -EAGAIN ? -EPROTO : rc;
}

/* Writes what is gathered to the socket, waiting at most one slice: 0 when all of it
 * is written, -EAGAIN when some is left for the next call, or a negative errno. */
static int flush_gathered(struct xftp_conn *c, struct tls_conn *t)
{
        uint64_t start_ns = ds_now_ns();

        while (t->gathered_sent < t->gathered_len) {
                ssize_t n = send(c->fd, t->gathered + t->gathered_sent,
                                 t->gathered_len - t->gathered_sent, MSG_NOSIGNAL);
                if (n > 0) {
                        t->gathered_sent += (size_t)n;
                        continue;
                }
                if (errno == EINTR || (errno == EAGAIN && wait_slice(c->fd, POLLOUT, start_ns)))
                        continue;
                if (errno == EAGAIN)
                        return -EAGAIN;
                t->broken = true;
                return -errno;
        }
        t->gathered_len = t->gathered_sent = 0;
        return 0;
}

/* TLS in user space: a file's bytes are encrypted straight from the page cache, through a
 * window of the file mapped by this connection, 16 records at a time, which go by one
 * write(). A pread() into a buffer first, even one small enough to stay in the cache,
 * was a fourth of the sender's time: a TLS get of 1 GiB cost the server as much copying
 * the file as encrypting it. Bytes count as sent once their records are all written: a
 * write that must wait returns -EAGAIN, and the retry, from the same offset, finishes it.
 * A file that shrinks while it is sent fails the send, and the connection is reset
 * rather than ended: the receiver must not take zeros for the file's end. Returns as
 * sendv. */
static ssize_t tls_user_sendfile(struct xftp_conn *c, int file_fd, off_t *offset, size_t len)
{
        struct tls_conn *t = c->impl;
        struct xftp_filemap *window = &t->window;
        uint64_t at = (uint64_t)*offset;
        int rc = gather_start(t);

        if (rc == 0 && t->owed == 0 &&
            (!window->data || at < window->offset || at >= window->offset + window->len))
                rc = xftp_filemap_at(window, file_fd, at);
        if (rc < 0 || (t->owed == 0 && !window->data))
                return rc; /* 0: the end of the file */
        if (t->owed == 0) {
                size_t room = (size_t)(window->offset + window->len - at);
                size_t take = len < room ? len : room;
                take = take < GATHER_BYTES ? take : GATHER_BYTES;
                xftp_filemap_guard(window);
                rc = gather_records(t, window->data + (at - window->offset), take);
                if (xftp_filemap_unguard(window)) {
                        struct linger reset = {.l_onoff = 1, .l_linger = 0};
                        t->broken = true; /* no close_notify: that would end the stream as whole */
                        setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
                        return -EIO;
                }
                if (rc < 0)
                        return rc;
                t->owed = take;
        }
        rc = flush_gathered(c, t);
        if (rc < 0)
                return rc;
        ssize_t sent = (ssize_t)t->owed;
        t->owed = 0;
        *offset += sent;
        return sent;
}

static void tls_conn_free(struct tls_conn *t)
{
        xftp_filemap_release(&t->window);
        BIO_free(t->gather);
        free(t->gathered);
        SSL_free(t->ssl);
        pthread_mutex_destroy(&t->lock);
        free(t);
}

static int tls_close(struct xftp_conn *c)
{
        struct tls_conn *t = c->impl;

        if (t->gathered_sent < t->gathered_len)
                t->broken = true; /* a close_notify after records never sent would lie */
        tls_shutdown(c, t);
        if (!t->broken)
                tls_drain(c);
        tls_conn_free(t);
        return close(c->fd) < 0 ? -errno : 0;
}

static void tls_drop(struct xftp_conn *c)
{
        struct tls_conn *t = c->impl;
        /* Ended as agreed, though no close_notify went: OpenSSL would otherwise take the
         * session for one cut short and make it, and the control connection's it resumed,
         * no longer resumable, so that the next new data connection is refused. */
        SSL_set_shutdown(t->ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
        tls_conn_free(t);
        close(c->fd);
}

static const struct xftp_conn_ops tls_user_ops = {
    .name = "tls",
    .sendv = tls_sendv,
    .recv = tls_recv,
    .sendfile = tls_user_sendfile,
    .pending = tls_pending,
    .close = tls_close,
    .drop = tls_drop,
};

static const struct xftp_conn_ops tls_kernel_ops = {
    .name = "ktls",
    .sendv = tls_sendv,
    .recv = tls_recv,
    .sendfile = tls_sendfile,
    .pending = tls_pending,
    .close = tls_close,
    .drop = tls_drop,
};

bool xftp_tls_on(const struct xftp_conn *c)
{
        return c->fd >= 0 && (c->ops == &tls_user_ops || c->ops == &tls_kernel_ops);
}

const char *xftp_tls_version(const struct xftp_conn *c)
{
        return xftp_tls_on(c) ? SSL_get_version(((struct tls_conn *)c->impl)->ssl) : "";
}

const char *xftp_tls_cipher(const struct xftp_conn *c)
{
        return xftp_tls_on(c) ? SSL_get_cipher_name(((struct tls_conn *)c->impl)->ssl) : "";
}

/* The name a client checks the certificate against: an address literal is matched
 * against the certificate's IP addresses, a name against its DNS names (and sent as
 * SNI). */
static int check_host(SSL *ssl, const char *host)
{
        unsigned char addr[16];

        if (inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1)
                return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) == 1 ? 0 : -EINVAL;
        if (SSL_set_tlsext_host_name(ssl, host) != 1 || SSL_set1_host(ssl, host) != 1)
                return -EINVAL;
        return 0;
}

/* Wraps the plain connection c in a new SSL object, not yet shaken hands. */
static int wrap(struct xftp_conn *c, struct xftp_tls *tls, bool server, const char *host,
                struct xftp_conn *resume)
{
        struct tls_conn *t = calloc(1, sizeof(*t));
        int flags = fcntl(c->fd, F_GETFL);

        if (!t)
                return -ENOMEM;
        if (flags < 0 || fcntl(c->fd, F_SETFL, flags | O_NONBLOCK) < 0 ||
            !(t->ssl = SSL_new(tls->ctx)) || SSL_set_fd(t->ssl, c->fd) != 1) {
                SSL_free(t->ssl);
                free(t);
                return -ENOMEM;
        }
        pthread_mutex_init(&t->lock, NULL);
        /* A data connection reads ahead: one read() brings many records (note_kernel
         * sizes the buffer), where record by record took two per 16 KiB (header, then
         * body): 131 000 reads a GiB. Not the control connection, whose waits poll()
         * the socket and would not see whole records read ahead. */
        if (resume)
                SSL_set_read_ahead(t->ssl, 1);
        int rc = 0;
        if (server) {
                SSL_set_accept_state(t->ssl);
                /* A data connection's tickets would only sit unread in the client's socket,
                 * and its close would then reset the connection before the data is in. */
                if (resume)
                        SSL_set_num_tickets(t->ssl, 0);
        } else {
                SSL_set_connect_state(t->ssl);
                if (host && SSL_CTX_get_verify_mode(tls->ctx) != SSL_VERIFY_NONE)
                        rc = check_host(t->ssl, host);
                else if (host)
                        SSL_set_tlsext_host_name(t->ssl, host);
                SSL_SESSION *session =
                    resume && xftp_tls_on(resume)
                        ? SSL_get1_session(((struct tls_conn *)resume->impl)->ssl)
                        : NULL;
                if (session && SSL_set_session(t->ssl, session) != 1)
                        rc = -EINVAL;
                SSL_SESSION_free(session);
        }
        if (rc < 0) {
                tls_conn_free(t);
                return rc;
        }
        c->impl = t;
        c->ops = &tls_user_ops;
        c->kernel = false;
        return 0;
}

/* Whether the kernel decrypts what this socket receives, asked of the kernel. */
static bool kernel_receives(int fd)
{
        struct tls12_crypto_info_aes_gcm_256 info;
        socklen_t len = sizeof(info);

        return getsockopt(fd, SOL_TLS, TLS_RX, &info, &len) == 0;
}

/* After a handshake: whether the kernel took the keys. */
static void note_kernel(struct xftp_conn *c)
{
        struct tls_conn *t = c->impl;

        if (BIO_get_ktls_send(SSL_get_wbio(t->ssl))) {
                c->ops = &tls_kernel_ops;
                c->kernel = true;
        }
        /* The larger read-ahead buffer only where OpenSSL reads the records itself:
         * from kernel TLS (TLS 1.2 receives) one read returns as much plaintext as the
         * buffer holds, several records' worth, which OpenSSL 3.0 takes for one record
         * and refuses (record overflow). The buffer grows when next allocated; if it
         * cannot be freed now (bytes in it), it keeps the one-record size. */
        if (SSL_get_read_ahead(t->ssl) && !kernel_receives(c->fd)) {
                SSL_set_default_read_buffer_len(t->ssl, READ_AHEAD);
                SSL_free_buffers(t->ssl);
        }
}

/* One step of conns[i]'s handshake: 1 done, 0 waiting for *want, or a negative errno. */
static int handshake_step(struct xftp_conn *c, bool server, bool must_resume, short *want,
                          struct ds_error *err)
{
        struct tls_conn *t = c->impl;

        pthread_mutex_lock(&t->lock);
        int ret = SSL_do_handshake(t->ssl);
        ssize_t rc = ret == 1 ? 1 : ssl_outcome(t, ret, want);
        long verify = SSL_get_verify_result(t->ssl);
        pthread_mutex_unlock(&t->lock);
        if (rc == -EAGAIN)
                return 0;
        if (rc == 1 && must_resume && !SSL_session_reused(t->ssl)) {
                t->broken = true;
                return ds_fail(err, 0,
                               "the data connection did not resume the control "
                               "connection's TLS session"),
                       -EPERM;
        }
        if (rc == 1) {
                note_kernel(c);
                return 1;
        }
        t->broken = true;
        if (!server && verify != X509_V_OK)
                return ds_fail(err, 0, "TLS: the server's certificate: %s",
                               X509_verify_cert_error_string(verify)),
                       -EACCES;
        if (rc == 0 || rc == -EPIPE || rc == -ECONNRESET)
                return ds_fail(err, 0, "TLS handshake: the peer closed the connection"),
                       rc == 0 ? -ECONNRESET : (int)rc;
        return ds_fail(err, 0, "TLS handshake: %s", t->why[0] ? t->why : strerror((int)-rc)),
               (int)rc;
}

int xftp_tls_start(struct xftp_conn *conns, unsigned n, struct xftp_tls *tls, bool server,
                   const char *host, struct xftp_conn *resume, int timeout_ms, atomic_bool *also,
                   struct ds_error *err)
{
        struct pollfd pfds[16];
        uint64_t deadline = ds_deadline_in(timeout_ms);
        unsigned done = 0, wrapped = 0;

        if (n > 16)
                return ds_fail(err, -EINVAL, "%u connections", n);
        int rc = 0;

        for (; rc == 0 && wrapped < n; wrapped++)
                rc = wrap(&conns[wrapped], tls, server, host, resume);
        if (rc < 0)
                ds_fail(err, rc, "TLS set-up");
        for (unsigned i = 0; i < n; i++)
                pfds[i] = (struct pollfd){.fd = conns[i].fd, .events = 0};
        while (rc == 0 && done < n) {
                for (unsigned i = 0; rc == 0 && i < n; i++) {
                        if (pfds[i].fd < 0 || (pfds[i].events && !pfds[i].revents))
                                continue;
                        short want = 0;
                        int step = handshake_step(&conns[i], server, server && resume, &want, err);
                        if (step < 0)
                                rc = step;
                        pfds[i].events = want;
                        if (step == 1) {
                                pfds[i].fd = -1; /* poll() skips it */
                                done++;
                        }
                }
                if (rc < 0 || done == n)
                        break;
                int left = timeout_ms < 0 ? SLICE_MS : ds_deadline_left_ms(deadline);
                if (ds_stopping() || (also && atomic_load(also)))
                        rc = ds_fail(err, -EINTR, "TLS handshake");
                else if (left == 0)
                        rc = (ds_fail(err, 0, "no TLS handshake within %d ms", timeout_ms),
                              -ETIMEDOUT);
                else if (poll(pfds, n, left < SLICE_MS ? left : SLICE_MS) < 0 && errno != EINTR)
                        rc = ds_fail(err, -errno, "TLS handshake");
        }
        if (rc < 0) {
                for (unsigned i = 0; i < n; i++) {
                        if (i < wrapped && conns[i].impl && xftp_tls_on(&conns[i]))
                                ((struct tls_conn *)conns[i].impl)->broken = true;
                        xftp_conn_close(&conns[i]);
                }
        }
        return rc;
}
