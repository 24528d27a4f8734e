/* TLS connections over OpenSSL (xtls.h). The socket is non-blocking underneath; a call
 * that may wait (no MSG_DONTWAIT) waits at most one slice, as a data socket's
 * SO_RCVTIMEO would, so the pipeline's stop and idle checks keep their rhythm. */
#include "xtls.h"

#include "filemap.h"
#include "tls_open.h"
#include "tls_seal.h"
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
        /* A data connection's records on their way to the socket (out: made at the first
         * use), in the order made: sealed here (sealing, tls_seal.h), or OpenSSL's own,
         * kept from one SSL_write (gathering). The plaintext of a sendv or sendfile (owed)
         * counts as sent only once all its records are on the socket. */
        bool records; /* a data connection: its writes go through the records BIO */
        int fd;       /* the socket (the records BIO has no xftp_conn) */
        /* TLS 1.3 reading (opening, tls_open.h): the peer's traffic secret as the key log
         * reported it, then the records read from the socket (in, from in_off) and the
         * content of one that did not fit the caller's buffer (plain, from plain_off). */
        uint8_t in_secret[EVP_MAX_MD_SIZE];
        size_t in_secret_len;
        struct xftp_tls_open open;
        bool opening, in_eof;
        bool update_asked; /* the peer's KeyUpdate, opened here, asked for ours */
        int in_error;      /* the error that ended reading, given to every later call */
        uint8_t *in, *plain;
        size_t in_len, in_off, plain_len, plain_off;
        struct xftp_tls_seal seal;
        bool sealing, gathering;
        uint8_t next_type; /* the record type of OpenSSL's next message to seal */
        char *out;
        size_t out_len, out_sent, owed;
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

/* OpenSSL's key log, of which nothing is logged: a data connection takes from it the TLS
 * 1.3 traffic secrets OpenSSL hands over no other way.
 * - The secret of the direction it reads (the peer's), to open the peer's records itself
 *   (tls_open.h).
 * - After a KeyUpdate it sent, the next secret of the direction it seals. OpenSSL 3.0
 *   offers no keys then: it changes its own and goes on handing the records BIO
 *   plaintext, which the sealer would seal under the old keys, and the peer would refuse
 *   all that follows. The secret is logged after the KeyUpdate itself went under the old
 *   keys; from it the sealer derives the next keys.
 * A line is "LABEL <client random> <secret>", both in hex. */
#define CLIENT_RANDOM_HEX 64

/* The secret of a key log line that begins with label into secret: its length, or 0. */
static size_t line_secret(const char *line, const char *label, uint8_t *secret, size_t room)
{
        size_t label_len = strlen(label), len = 0;

        if (strncmp(line, label, label_len) != 0 ||
            strlen(line) < label_len + CLIENT_RANDOM_HEX + 1 ||
            line[label_len + CLIENT_RANDOM_HEX] != ' ' ||
            OPENSSL_hexstr2buf_ex(secret, room, &len, line + label_len + CLIENT_RANDOM_HEX + 1,
                                  '\0') != 1)
                return 0;
        return len;
}

static void keylog(const SSL *ssl, const char *line)
{
        struct tls_conn *t = SSL_get_app_data(ssl);
        bool server = SSL_is_server(ssl);
        const char *next = server ? "SERVER_TRAFFIC_SECRET_N " : "CLIENT_TRAFFIC_SECRET_N ";
        uint8_t secret[EVP_MAX_MD_SIZE];

        if (!t || !t->records)
                return; /* the control connection's records are OpenSSL's */
        size_t len =
            line_secret(line, server ? "CLIENT_TRAFFIC_SECRET_0 " : "SERVER_TRAFFIC_SECRET_0 ",
                        t->in_secret, sizeof(t->in_secret));
        if (len > 0) {
                t->in_secret_len = len;
                return;
        }
        if (!t->sealing || strncmp(line, next, strlen(next)) != 0)
                return;
        len = line_secret(line, next, secret, sizeof(secret));
        const EVP_MD *md = SSL_CIPHER_get_handshake_digest(SSL_get_current_cipher(ssl));
        if (len == 0 || !md || (int)len != EVP_MD_get_size(md) ||
            xftp_tls_seal_next_keys(&t->seal, md, secret, len) < 0) {
                xftp_tls_seal_free(&t->seal); /* nothing more is sealed, under any keys */
                t->broken = true;
        }
        OPENSSL_cleanse(secret, sizeof(secret));
}

static int ctx_common(SSL_CTX *ctx)
{
        SSL_CTX_set_keylog_callback(ctx, keylog);
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

/* Plaintext a data connection's write() carries at most: 16 records. Written one record
 * at a time, as OpenSSL writes them to a socket, a TLS get of 1 GiB cost the server
 * 65 536 write()s, each a pass through TCP and a wake-up of the receiver. */
#define OUT_PLAIN (256u << 10)
#define OUT_ROOM  (OUT_PLAIN + 4096u) /* and the records' headers, nonces, MACs and tags */
/* The most a record adds to its plaintext, with OpenSSL's CBC suites too: header, IV,
 * MAC, padding. */
#define RECORD_EXTRA_MAX 128u

/* OpenSSL 3's controls that hand a BIO the keys of a direction and the type of the next
 * message, as they do a socket's under kernel TLS (its internal bio.h). */
#define CTRL_SET_KTLS        72
#define CTRL_SET_KTLS_TYPE   74
#define CTRL_CLEAR_KTLS_TYPE 75

/* The room the records of len bytes of plaintext may take in out. */
static size_t records_room(size_t len)
{
        return len + (len / XFTP_TLS_RECORD_PLAIN + 1) * RECORD_EXTRA_MAX;
}

/* Writes the records in out to the socket, without waiting: 0 when all are written,
 * -EAGAIN when some are left, or a negative errno. Under the lock. */
static int write_out(struct tls_conn *t)
{
        while (t->out_sent < t->out_len) {
                ssize_t n = send(t->fd, t->out + t->out_sent, t->out_len - t->out_sent,
                                 MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n > 0) {
                        t->out_sent += (size_t)n;
                        continue;
                }
                if (errno == EINTR)
                        continue;
                if (errno == EAGAIN)
                        return -EAGAIN;
                t->broken = true;
                return -errno;
        }
        t->out_len = t->out_sent = 0;
        return 0;
}

/* write_out, waiting for room at most the rest of the slice that began at start_ns
 * (0: not at all). */
static int send_out(struct xftp_conn *c, struct tls_conn *t, uint64_t start_ns)
{
        for (;;) {
                pthread_mutex_lock(&t->lock);
                int rc = write_out(t);
                pthread_mutex_unlock(&t->lock);
                if (rc != -EAGAIN || !start_ns || !wait_slice(c->fd, POLLOUT, start_ns))
                        return rc;
        }
}

/* The records BIO, a data connection's write side, above its socket's BIO. Offered the
 * keys of the sending direction, it lets the kernel take them where it can; else it
 * seals from then on every message OpenSSL sends, in line with the data. */
static int start_sealing(struct tls_conn *t, const void *crypto_info)
{
        /* The offer's shape is OpenSSL 3's; another major version's is not read. */
        if (OPENSSL_version_major() != 3 || xftp_tls_seal_init(&t->seal, crypto_info) < 0)
                return -ENOTSUP;
        t->sealing = true;
        t->next_type = XFTP_TLS_APPLICATION;
        return 0;
}

/* out, made at the first record: a connection that only receives needs none. */
static bool out_ready(struct tls_conn *t)
{
        return t->out || (t->out = malloc(OUT_ROOM));
}

static int records_write(BIO *bio, const char *in, int len)
{
        struct tls_conn *t = BIO_get_data(bio);

        BIO_clear_retry_flags(bio);
        if (t->gathering) { /* OpenSSL's records of one SSL_write, kept for one write() */
                /* (make_records made out) */
                if (len < 0 || (size_t)len > OUT_ROOM - t->out_len)
                        return errno = EMSGSIZE, -1;
                memcpy(t->out + t->out_len, in, (size_t)len);
                t->out_len += (size_t)len;
                return len;
        }
        /* Any other message goes after every record already made. */
        int rc = write_out(t);
        if (rc == -EAGAIN)
                BIO_set_retry_write(bio);
        if (rc < 0)
                return -1;
        if (!t->sealing) {
                int n = BIO_write(BIO_next(bio), in, len);
                BIO_copy_next_retry(bio);
                return n;
        }
        if (len <= 0)
                return 0;
        if (!out_ready(t))
                return errno = ENOMEM, -1;
        if (records_room((size_t)len) > OUT_ROOM)
                return errno = EMSGSIZE, -1;
        ssize_t made = xftp_tls_seal(&t->seal, t->next_type, in, (size_t)len, t->out);
        t->next_type = XFTP_TLS_APPLICATION;
        if (made < 0) {
                t->broken = true;
                return errno = (int)-made, -1;
        }
        t->out_len = (size_t)made;
        write_out(t); /* what is left goes by the next write or flush */
        return len;
}

static long records_ctrl(BIO *bio, int cmd, long num, void *ptr)
{
        struct tls_conn *t = BIO_get_data(bio);
        BIO *next = BIO_next(bio);

        switch (cmd) {
        case CTRL_SET_KTLS:
                if (num == 0 || t->sealing)
                        return 0; /* receiving keys go to the read side, the socket's BIO */
                if (BIO_ctrl(next, cmd, num, ptr) > 0)
                        return 1; /* the kernel seals */
                return start_sealing(t, ptr) == 0;
        case BIO_CTRL_GET_KTLS_SEND:
                return t->sealing ? 1 : BIO_ctrl(next, cmd, num, ptr);
        case CTRL_SET_KTLS_TYPE:
        case CTRL_CLEAR_KTLS_TYPE:
                if (!t->sealing)
                        break;
                t->next_type = cmd == CTRL_SET_KTLS_TYPE ? (uint8_t)num : XFTP_TLS_APPLICATION;
                return 0;
        case BIO_CTRL_FLUSH: { /* what is made goes first (SSL_sendfile flushes, too) */
                BIO_clear_retry_flags(bio);
                int rc = write_out(t);
                if (rc == -EAGAIN)
                        BIO_set_retry_write(bio);
                if (rc < 0)
                        return -1;
                if (t->sealing)
                        return 1;
                break;
        }
        default:
                break;
        }
        long ret = BIO_ctrl(next, cmd, num, ptr);
        BIO_copy_next_retry(bio);
        return ret;
}

static BIO_METHOD *records_method;
static pthread_once_t records_once = PTHREAD_ONCE_INIT;

static void make_records_method(void)
{
        records_method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_FILTER, "xftp records");
        if (records_method && (!BIO_meth_set_write(records_method, records_write) ||
                               !BIO_meth_set_ctrl(records_method, records_ctrl))) {
                BIO_meth_free(records_method);
                records_method = NULL;
        }
}

/* Gives t's SSL object the socket's BIO to read and the records BIO above it to write. */
static int attach_records(struct tls_conn *t, int fd)
{
        pthread_once(&records_once, make_records_method);
        BIO *sock = BIO_new_socket(fd, BIO_NOCLOSE);
        BIO *records = records_method ? BIO_new(records_method) : NULL;
        if (!sock || !records) {
                BIO_free(sock);
                BIO_free(records);
                return -ENOMEM;
        }
        t->records = true;
        BIO_set_data(records, t);
        BIO_set_init(records, 1);
        BIO_push(records, sock);
        BIO_up_ref(sock); /* the read side's, and the records BIO's next */
        SSL_set_bio(t->ssl, sock, records);
        return 0;
}

/* Makes the records of len bytes at data, after those in out: sealed here, or by one
 * SSL_write whose records the records BIO keeps. Returns 0 or a negative errno. */
static int make_records(struct tls_conn *t, const char *data, size_t len)
{
        int rc = 0;

        pthread_mutex_lock(&t->lock);
        if (!out_ready(t)) {
                rc = -ENOMEM;
        } else if (records_room(len) > OUT_ROOM - t->out_len) {
                rc = -EMSGSIZE;
        } else if (t->sealing) {
                ssize_t made =
                    xftp_tls_seal(&t->seal, XFTP_TLS_APPLICATION, data, len, t->out + t->out_len);
                if (made < 0)
                        t->broken = true, rc = (int)made;
                else
                        t->out_len += (size_t)made;
        } else {
                size_t written = 0;
                short want = 0;
                t->gathering = true;
                if (!SSL_write_ex(t->ssl, data, len, &written))
                        rc = (int)ssl_outcome(t, 0, &want);
                t->gathering = false;
                if (rc == 0 && written != len)
                        rc = -EPROTO;
        }
        pthread_mutex_unlock(&t->lock);
        /* Kept records never ask to wait, and a write has no peer's close to see. */
        return rc == -EAGAIN ? -EPROTO : rc;
}

/* A KeyUpdate the peer asked for must be answered before the next application data
 * (RFC 8446 4.6.3); OpenSSL answers only at an SSL_write, which a sealed connection does
 * not call. Sent here under the old keys, after which OpenSSL gives the next ones (see
 * keylog). Returns 0, -EAGAIN when its record waits for room in the socket (the
 * next call finishes it), or a negative errno. */
static int answer_key_update(struct tls_conn *t)
{
        short want = 0;
        int rc = 0;

        pthread_mutex_lock(&t->lock);
        bool asked = SSL_get_key_update_type(t->ssl) != SSL_KEY_UPDATE_NONE || t->update_asked;
        if (t->sealing && (asked || SSL_in_init(t->ssl))) {
                if (!SSL_in_init(t->ssl) &&
                    SSL_key_update(t->ssl, SSL_KEY_UPDATE_NOT_REQUESTED) != 1)
                        rc = -EPROTO;
                int ret = rc == 0 ? SSL_do_handshake(t->ssl) : 1;
                if (ret != 1)
                        rc = (int)ssl_outcome(t, ret, &want);
                if (ret != 1 && rc == 0)
                        rc = -EPIPE; /* the peer's close_notify */
                if (rc == 0)
                        t->update_asked = false;
        }
        pthread_mutex_unlock(&t->lock);
        return rc;
}

/* Once the records made for the owed plaintext are all written, reports it sent; a call
 * that must wait returns -EAGAIN, and the retry, with the same bytes, finishes it. Before
 * new records are made, the tail of an OpenSSL message goes out first. Returns as sendv. */
static ssize_t send_owed(struct xftp_conn *c, struct tls_conn *t, uint64_t start_ns)
{
        int rc = send_out(c, t, start_ns);
        if (rc < 0)
                return rc;
        ssize_t sent = (ssize_t)t->owed;
        t->owed = 0;
        return sent;
}

/* A data connection's send: as much of iov as one write() carries, its records made
 * straight from the caller's bytes. */
static ssize_t records_sendv(struct xftp_conn *c, struct tls_conn *t, const struct iovec *iov,
                             int cnt, int flags)
{
        uint64_t start_ns = flags & MSG_DONTWAIT ? 0 : ds_now_ns();

        if (t->owed == 0) {
                int rc = send_out(c, t, start_ns);
                if (rc == 0)
                        rc = answer_key_update(t);
                size_t taken = 0;
                for (int i = 0; rc == 0 && i < cnt && taken < OUT_PLAIN; i++) {
                        size_t take =
                            iov[i].iov_len < OUT_PLAIN - taken ? iov[i].iov_len : OUT_PLAIN - taken;
                        if (taken > 0 && records_room(take) > OUT_ROOM - t->out_len)
                                break; /* many small pieces: the rest with the next call */
                        if (take > 0)
                                rc = make_records(t, iov[i].iov_base, take);
                        taken += take;
                }
                if (rc < 0)
                        return rc;
                t->owed = taken;
        }
        return send_owed(c, t, start_ns);
}

/* No writev in TLS: on the control connection each piece is its own SSL_write. A retry
 * after -EAGAIN offers the same bytes again, as OpenSSL requires. */
static ssize_t tls_sendv(struct xftp_conn *c, const struct iovec *iov, int cnt, int flags)
{
        struct tls_conn *t = c->impl;
        uint64_t start_ns = ds_now_ns();
        size_t total = 0;

        if (t->records)
                return records_sendv(c, t, iov, cnt, flags);
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

/* Records read by one read() at most, when the reader opens them itself. */
#define IN_ROOM (256u << 10)

/* Ends reading for good: every later call gets rc. */
static ssize_t in_fail(struct tls_conn *t, int rc)
{
        t->in_error = rc;
        t->broken = true; /* no close_notify after a record refused */
        return rc;
}

/* Opens the next record in in, if it has all come: its data into dst when all of it
 * fits in room, else into plain. Returns the bytes put in dst, 0 for none (another type
 * of record, or the data in plain), -EAGAIN when no whole record is in, or a negative
 * errno that ends reading. */
static ssize_t open_next(struct tls_conn *t, uint8_t *dst, size_t room)
{
        size_t unread = t->in_len - t->in_off;
        uint8_t *rec = t->in + t->in_off, type = 0;

        if (unread < XFTP_TLS_HEADER)
                return -EAGAIN;
        ssize_t len = xftp_tls_record_len(rec);
        if (len < 0)
                return in_fail(t, (int)len);
        if ((size_t)len > unread)
                return -EAGAIN;
        uint8_t *out = room >= (size_t)len - XFTP_TLS_HEADER - XFTP_TLS_TAG ? dst : t->plain;
        ssize_t n = xftp_tls_open(&t->open, rec, (size_t)len, out, &type);
        t->in_off += (size_t)len;
        if (n < 0)
                return in_fail(t, (int)n);
        if (type == XFTP_TLS_APPLICATION && out == dst)
                return n;
        if (type == XFTP_TLS_APPLICATION) {
                t->plain_off = 0;
                t->plain_len = (size_t)n;
        } else if (type == XFTP_TLS_HANDSHAKE) {
                int taken = xftp_tls_open_handshake(&t->open, out, (size_t)n);
                if (taken < 0)
                        return in_fail(t, -EPROTO);
                t->update_asked |= taken == XFTP_TLS_UPDATE_ASKED;
        } else if (type == XFTP_TLS_ALERT && n == 2 && out[1] == 0) {
                t->in_eof = true; /* close_notify */
        } else {
                return in_fail(t, -EPROTO); /* an alert of an error, or no known type */
        }
        return 0;
}

/* Reads what the socket holds into in, without waiting: the bytes read, 0 at the peer's
 * close, or a negative errno. Called when in holds no whole record, so that what is
 * moved to make room is part of one record at most. */
static ssize_t fill_in(struct tls_conn *t, int fd)
{
        if (IN_ROOM - t->in_len < XFTP_TLS_RECORD_MAX) {
                memmove(t->in, t->in + t->in_off, t->in_len - t->in_off);
                t->in_len -= t->in_off;
                t->in_off = 0;
        }
        for (;;) {
                ssize_t n = recv(fd, t->in + t->in_len, IN_ROOM - t->in_len, MSG_DONTWAIT);
                if (n > 0)
                        t->in_len += (size_t)n;
                if (n >= 0 || errno != EINTR)
                        return n >= 0 ? n : -errno;
        }
}

/* tls_recv where the records are opened here: many read by one read(), each opened
 * straight into buf when it fits. */
static ssize_t open_recv(struct xftp_conn *c, struct tls_conn *t, void *buf, size_t len, int flags)
{
        uint64_t start_ns = ds_now_ns();
        uint8_t *dst = buf;
        size_t got = 0;

        /* Made at the first read: a connection that only sends needs neither. */
        if ((!t->in && !(t->in = malloc(IN_ROOM))) ||
            (!t->plain && !(t->plain = malloc(XFTP_TLS_RECORD_MAX))))
                return -ENOMEM;
        pthread_mutex_lock(&t->lock);
        while (got < len) {
                if (t->plain_off < t->plain_len) {
                        size_t take = t->plain_len - t->plain_off;
                        take = take < len - got ? take : len - got;
                        memcpy(dst + got, t->plain + t->plain_off, take);
                        t->plain_off += take;
                        got += take;
                        continue;
                }
                if (t->in_error || t->in_eof)
                        break;
                ssize_t n = open_next(t, dst + got, len - got);
                if (n > 0 || (n == 0 && t->plain_off < t->plain_len)) {
                        got += (size_t)n;
                        continue;
                }
                /* A record with nothing for the caller (a ticket, a KeyUpdate, an empty
                 * one): a peer may send them without end, and the call still ends within
                 * its slice, with or without MSG_DONTWAIT. */
                if (n == 0 && ds_now_ns() - start_ns >= SLICE_MS * 1000000ull)
                        break;
                if (n == 0)
                        continue;
                if (n != -EAGAIN || (got > 0 && !(flags & MSG_WAITALL)))
                        break;
                n = fill_in(t, c->fd);
                if (n == 0 && t->in_off < t->in_len)
                        in_fail(t, -EPIPE); /* the peer closed inside a record */
                else if (n == 0)
                        t->in_eof = true; /* without close_notify: as a close in the clear */
                else if (n < 0 && n != -EAGAIN)
                        in_fail(t, (int)n);
                if (n != -EAGAIN)
                        continue;
                if (flags & MSG_DONTWAIT)
                        break;
                pthread_mutex_unlock(&t->lock);
                bool ready = wait_slice(c->fd, POLLIN, start_ns);
                pthread_mutex_lock(&t->lock);
                if (!ready)
                        break;
        }
        int error = t->in_error;
        bool eof = t->in_eof;
        pthread_mutex_unlock(&t->lock);
        if (got > 0)
                return (ssize_t)got;
        return error ? error : eof ? 0 : -EAGAIN;
}

static ssize_t tls_recv(struct xftp_conn *c, void *buf, size_t len, int flags)
{
        struct tls_conn *t = c->impl;
        uint64_t start_ns = ds_now_ns();
        size_t got = 0;

        if (t->opening)
                return open_recv(c, t, buf, len, flags);
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
        size_t held = 0;

        pthread_mutex_lock(&t->lock);
        if (t->opening) {
                /* Data opened, and a whole record to open (a part waits for the socket). */
                size_t unread = t->in_len - t->in_off;
                ssize_t whole =
                    unread >= XFTP_TLS_HEADER ? xftp_tls_record_len(t->in + t->in_off) : 0;
                held = t->plain_len - t->plain_off +
                       (whole < 0 || (whole > 0 && (size_t)whole <= unread) ? unread : 0);
        } else {
                int n = SSL_pending(t->ssl);
                held = n > 0 ? (size_t)n : 0;
        }
        pthread_mutex_unlock(&t->lock);
        return held;
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
 * SHUTDOWN_MS, without waiting for the peer's. Sealed here, it may wait in out after
 * OpenSSL is done with it; SSL_shutdown is then not called again, as a second call waits
 * for the peer's close_notify (WANT_READ) and would leave ours cut short. */
static void tls_shutdown(struct xftp_conn *c, struct tls_conn *t)
{
        uint64_t deadline = ds_deadline_in(SHUTDOWN_MS);
        bool handed = false; /* OpenSSL took our close_notify: what is left of it is in out */

        while (!t->broken) {
                short want = POLLOUT;
                ssize_t rc = 0;
                pthread_mutex_lock(&t->lock);
                if (!handed) {
                        int ret = SSL_shutdown(t->ssl);
                        if (ret >= 0)
                                handed = true;
                        else
                                rc = ssl_outcome(t, ret, &want);
                }
                if (handed)
                        rc = write_out(t);
                pthread_mutex_unlock(&t->lock);
                int left = ds_deadline_left_ms(deadline);
                if (rc != -EAGAIN || want != POLLOUT || left == 0 ||
                    ds_poll_one(c->fd, POLLOUT, left) <= 0)
                        break;
        }
        if (t->out_sent < t->out_len)
                t->broken = true; /* a close_notify cut short: no orderly end follows */
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

/* TLS in user space: a file's bytes are encrypted straight from the page cache, through a
 * window of the file mapped by this connection, 16 records at a time, which go by one
 * write(). A pread() into a buffer first, even one small enough to stay in the cache,
 * was a fourth of the sender's time: a TLS get of 1 GiB cost the server as much copying
 * the file as encrypting it. Bytes count as sent once their records are all written (see
 * send_owed). A file that shrinks while it is sent fails the send, and the connection is
 * reset rather than ended: the receiver must not take zeros for the file's end. Returns
 * as sendv. */
static ssize_t tls_user_sendfile(struct xftp_conn *c, int file_fd, off_t *offset, size_t len)
{
        struct tls_conn *t = c->impl;
        struct xftp_filemap *window = &t->window;
        uint64_t at = (uint64_t)*offset;
        uint64_t start_ns = ds_now_ns();

        if (t->owed == 0) {
                int rc = send_out(c, t, start_ns);
                if (rc == 0)
                        rc = answer_key_update(t);
                if (rc == 0 &&
                    (!window->data || at < window->offset || at >= window->offset + window->len))
                        rc = xftp_filemap_at(window, file_fd, at);
                if (rc < 0 || !window->data)
                        return rc; /* 0: the end of the file */
                size_t room = (size_t)(window->offset + window->len - at);
                size_t take = len < room ? len : room;
                take = take < OUT_PLAIN ? take : OUT_PLAIN;
                xftp_filemap_guard(window);
                rc = make_records(t, window->data + (at - window->offset), take);
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
        ssize_t sent = send_owed(c, t, start_ns);
        if (sent > 0)
                *offset += sent;
        return sent;
}

static void tls_conn_free(struct tls_conn *t)
{
        xftp_filemap_release(&t->window);
        xftp_tls_seal_free(&t->seal);
        xftp_tls_open_free(&t->open);
        OPENSSL_cleanse(t->in_secret, sizeof(t->in_secret));
        free(t->in);
        free(t->plain);
        free(t->out);
        SSL_free(t->ssl);
        pthread_mutex_destroy(&t->lock);
        free(t);
}

static int tls_close(struct xftp_conn *c)
{
        struct tls_conn *t = c->impl;

        if (t->owed || t->out_sent < t->out_len)
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

/* Whether the kernel holds the keys of a direction of this socket (TLS_TX, TLS_RX), asked
 * of the kernel for the version and suite only: it gives the keys only to a buffer of
 * exactly their suite's size and refuses any other (a buffer sized for AES-256-GCM took
 * AES-128-GCM for no kernel TLS at all). */
static bool kernel_has(int fd, int direction)
{
        struct tls_crypto_info info;
        socklen_t len = sizeof(info);

        return getsockopt(fd, SOL_TLS, direction, &info, &len) == 0;
}

const char *xftp_tls_sealed_by(const struct xftp_conn *c)
{
        if (!xftp_tls_on(c))
                return "";
        return c->kernel ? "kernel" : ((struct tls_conn *)c->impl)->sealing ? "xftp" : "openssl";
}

const char *xftp_tls_opened_by(const struct xftp_conn *c)
{
        if (!xftp_tls_on(c))
                return "";
        return ((struct tls_conn *)c->impl)->opening ? "xftp"
               : kernel_has(c->fd, TLS_RX)           ? "kernel"
                                                     : "openssl";
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
        t->fd = c->fd;
        /* A data connection writes through the records BIO; the control connection,
         * used by two threads and carrying little, writes to its socket. */
        if (flags < 0 || fcntl(c->fd, F_SETFL, flags | O_NONBLOCK) < 0 ||
            !(t->ssl = SSL_new(tls->ctx)) ||
            (resume ? attach_records(t, c->fd) < 0 : SSL_set_fd(t->ssl, c->fd) != 1)) {
                SSL_free(t->ssl);
                free(t);
                return -ENOMEM;
        }
        pthread_mutex_init(&t->lock, NULL);
        SSL_set_app_data(t->ssl, t); /* for keylog */
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

/* Reading: a data connection of TLS 1.3 opens its records itself (tls_open.h), unless
 * OpenSSL already holds bytes past the handshake (it read none ahead: the handshake ran
 * without read-ahead). Else OpenSSL reads ahead into its buffer of one record: a read()
 * brings a record and the next one's start, where record by record took two per 16 KiB
 * (header, then body). A larger buffer cost more than it saved: before each record
 * OpenSSL moves what it holds to the buffer's start, and with 256 KiB that was a fifth of
 * a TLS get's client CPU. Not the control connection, whose waits poll() the socket and
 * would not see records read ahead. */
static void choose_reader(struct tls_conn *t)
{
        const SSL_CIPHER *cipher = SSL_get_current_cipher(t->ssl);

        if (SSL_version(t->ssl) == TLS1_3_VERSION && t->in_secret_len && cipher &&
            !SSL_has_pending(t->ssl) &&
            xftp_tls_open_init(&t->open, SSL_CIPHER_get_cipher_nid(cipher),
                               SSL_CIPHER_get_handshake_digest(cipher), t->in_secret,
                               t->in_secret_len) == 0)
                t->opening = true;
        else
                SSL_set_read_ahead(t->ssl, 1);
        OPENSSL_cleanse(t->in_secret, sizeof(t->in_secret));
}

/* After a handshake: whether the kernel took the sending keys, and who reads a data
 * connection's records (choose_reader). Only the kernel's word moves the connection to
 * SSL_sendfile, which writes to the socket as it is: with keys sealed here, that would be
 * plaintext. */
static void after_handshake(struct xftp_conn *c)
{
        if (kernel_has(c->fd, TLS_TX)) {
                c->ops = &tls_kernel_ops;
                c->kernel = true;
        }
        if (((struct tls_conn *)c->impl)->records)
                choose_reader(c->impl);
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
                after_handshake(c);
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
