/* A data connection of xftp's TLS (xftp/common/xtls.h) whose records are sealed in user
 * space, against a plain OpenSSL peer over a socket pair: the xftp side is the server,
 * its control connection first (whose session the data connection resumes), then the
 * data connection. The peer reads as any FTPS client would, so every record xftp sends,
 * its close_notify included, must open under the keys the peer holds at that moment.
 *
 * send() is wrapped (-Wl,--wrap=send): a test can have it refuse the next short writes
 * (EAGAIN), as a socket whose buffer is full does, without racing a reader. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cmocka.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <dragstrip/error.h>

#include "xconn.h"
#include "xtls.h"

#define TIMEOUT_MS 5000
#define SHORT_SEND 64 /* a close_notify's record or an alert's, not a data record */

ssize_t __real_send(int fd, const void *buf, size_t len, int flags);
ssize_t __wrap_send(int fd, const void *buf, size_t len, int flags);

static atomic_int short_sends_refused; /* how many short sends are yet to be refused */

ssize_t __wrap_send(int fd, const void *buf, size_t len, int flags)
{
        if (len < SHORT_SEND && atomic_load(&short_sends_refused) > 0) {
                atomic_fetch_sub(&short_sends_refused, 1);
                errno = EAGAIN;
                return -1;
        }
        return __real_send(fd, buf, len, flags);
}

static char cert_path[] = "/tmp/test_xftp_tls_data.crt.XXXXXX";
static char key_path[] = "/tmp/test_xftp_tls_data.key.XXXXXX";

/* A self-signed P-256 certificate and its key, in PEM files for xftp_tls_server. */
static int make_cert_files(void **state)
{
        (void)state;
        EVP_PKEY *key = EVP_EC_gen("P-256");
        X509 *cert = X509_new();
        assert_non_null(key);
        assert_non_null(cert);
        ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
        X509_gmtime_adj(X509_getm_notBefore(cert), 0);
        X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
        X509_set_pubkey(cert, key);
        X509_NAME *name = X509_get_subject_name(cert);
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"xftpd", -1, -1,
                                   0);
        X509_set_issuer_name(cert, name);
        assert_true(X509_sign(cert, key, EVP_sha256()) > 0);
        int cert_fd = mkstemp(cert_path), key_fd = mkstemp(key_path);
        assert_true(cert_fd >= 0 && key_fd >= 0);
        FILE *cert_file = fdopen(cert_fd, "w"), *key_file = fdopen(key_fd, "w");
        assert_true(cert_file && key_file);
        assert_int_equal(PEM_write_X509(cert_file, cert), 1);
        assert_int_equal(PEM_write_PrivateKey(key_file, key, NULL, NULL, 0, NULL, NULL), 1);
        assert_int_equal(fclose(cert_file), 0);
        assert_int_equal(fclose(key_file), 0);
        X509_free(cert);
        EVP_PKEY_free(key);
        return 0;
}

static int remove_cert_files(void **state)
{
        (void)state;
        unlink(cert_path);
        unlink(key_path);
        return 0;
}

struct server;
typedef void server_act(struct server *s);

/* xftp's side, in a thread of its own. */
struct server {
        struct xftp_tls *tls;
        int ctl_fd, data_fd;
        struct xftp_conn ctl, data;
        server_act *act; /* what it does on its data connection, then closes it */
        size_t len;      /* how many bytes act moves */
        int rc;
        struct ds_error err;
};

/* The peer: a plain OpenSSL client of the given highest version (and TLS 1.3 suite). */
struct peer {
        SSL_CTX *ctx;
        SSL *ctl, *data;
};

static void *server_main(void *arg)
{
        struct server *s = arg;

        xftp_conn_plain(&s->ctl, s->ctl_fd);
        xftp_conn_plain(&s->data, s->data_fd);
        s->rc = xftp_tls_start(&s->ctl, 1, s->tls, true, NULL, NULL, TIMEOUT_MS, NULL, &s->err);
        /* a byte the peer reads, and with it the control session's tickets */
        if (s->rc == 0)
                s->rc = xftp_conn_write_all(&s->ctl, "+", 1, TIMEOUT_MS, NULL);
        if (s->rc == 0)
                s->rc = xftp_tls_start(&s->data, 1, s->tls, true, NULL, &s->ctl, TIMEOUT_MS, NULL,
                                       &s->err);
        if (s->rc == 0) {
                assert_string_equal(xftp_tls_sealed_by(&s->data), "xftp");
                s->act(s);
        }
        xftp_conn_close(&s->data);
        xftp_conn_close(&s->ctl);
        return NULL;
}

static uint8_t pattern_byte(size_t i)
{
        return (uint8_t)(i * 31u + (i >> 12));
}

/* Starts the server with act, and shakes the peer's hands: control, then data resuming
 * the control's session. */
static void open_both(struct server *s, struct peer *p, pthread_t *thread, int max_version,
                      const char *suite, server_act *act, size_t len)
{
        int ctl[2], data[2];

        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, ctl), 0);
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, data), 0);
        memset(s, 0, sizeof(*s));
        struct ds_error err = {{0}};
        assert_int_equal(xftp_tls_server(&s->tls, cert_path, key_path, &err), 0);
        s->ctl_fd = ctl[0];
        s->data_fd = data[0];
        s->act = act;
        s->len = len;
        assert_int_equal(pthread_create(thread, NULL, server_main, s), 0);

        p->ctx = SSL_CTX_new(TLS_client_method());
        assert_non_null(p->ctx);
        SSL_CTX_set_max_proto_version(p->ctx, max_version);
        if (suite)
                assert_int_equal(SSL_CTX_set_ciphersuites(p->ctx, suite), 1);
        p->ctl = SSL_new(p->ctx);
        p->data = SSL_new(p->ctx);
        assert_true(p->ctl && p->data);
        assert_int_equal(SSL_set_fd(p->ctl, ctl[1]), 1);
        assert_int_equal(SSL_connect(p->ctl), 1);
        char plus = 0;
        assert_int_equal(SSL_read(p->ctl, &plus, 1), 1);
        assert_int_equal(plus, '+');
        SSL_SESSION *session = SSL_get1_session(p->ctl);
        assert_non_null(session);
        assert_int_equal(SSL_set_session(p->data, session), 1);
        SSL_SESSION_free(session);
        assert_int_equal(SSL_set_fd(p->data, data[1]), 1);
        assert_int_equal(SSL_connect(p->data), 1);
        assert_true(SSL_session_reused(p->data));
}

/* Closes the peer's ends (the server's closes wait for them) and waits for the server. */
static void close_both(struct server *s, struct peer *p, pthread_t thread)
{
        close(SSL_get_fd(p->data));
        close(SSL_get_fd(p->ctl));
        assert_int_equal(pthread_join(thread, NULL), 0);
        assert_int_equal(s->rc, 0);
        SSL_free(p->data);
        SSL_free(p->ctl);
        SSL_CTX_free(p->ctx);
        xftp_tls_free(s->tls);
}

/* The peer reads len bytes of the pattern, then the end: a close_notify, not a bare EOF. */
static void peer_reads_all_then_close_notify(struct peer *p, size_t len)
{
        uint8_t buf[16384];
        size_t got = 0;

        while (got < len) {
                int n = SSL_read(p->data, buf, sizeof(buf));
                if (n <= 0)
                        fail_msg("the data ended at %zu of %zu: %s", got, len,
                                 ERR_reason_error_string(ERR_get_error()));
                for (int i = 0; i < n; i++)
                        assert_int_equal(buf[i], pattern_byte(got + (size_t)i));
                got += (size_t)n;
        }
        int n = SSL_read(p->data, buf, sizeof(buf));
        unsigned long why = ERR_peek_error();
        if (n != 0 || SSL_get_error(p->data, n) != SSL_ERROR_ZERO_RETURN)
                fail_msg("after the data: %d, not a close_notify (%s)", n,
                         why ? ERR_reason_error_string(why) : "EOF");
}

static void send_pattern(struct server *s)
{
        uint8_t *bytes = malloc(s->len);
        assert_non_null(bytes);
        for (size_t i = 0; i < s->len; i++)
                bytes[i] = pattern_byte(i);
        s->rc = xftp_conn_write_all(&s->data, bytes, s->len, TIMEOUT_MS, NULL);
        free(bytes);
}

/* The data, then a socket that takes nothing for a while at the close: the close_notify
 * waits its turn and then goes whole. */
static void send_then_close_when_full(struct server *s)
{
        send_pattern(s);
        atomic_store(&short_sends_refused, 3);
}

static void test_close_notify_goes_whole_after_the_socket_was_full(void **state)
{
        (void)state;
        int versions[] = {TLS1_3_VERSION, TLS1_2_VERSION};
        for (unsigned i = 0; i < 2; i++) {
                struct server s;
                struct peer p;
                pthread_t thread;
                open_both(&s, &p, &thread, versions[i], NULL, send_then_close_when_full, 100000);
                peer_reads_all_then_close_notify(&p, 100000);
                close_both(&s, &p, thread);
                assert_int_equal(atomic_load(&short_sends_refused), 0);
        }
}

/* Reads what the peer sends (a KeyUpdate among it), then answers with the pattern. */
static void receive_then_send(struct server *s)
{
        uint8_t *bytes = malloc(s->len);
        size_t got = 0;
        assert_non_null(bytes);
        while (s->rc == 0 && got < s->len) {
                ssize_t n = xftp_conn_recv(&s->data, bytes + got, s->len - got, MSG_WAITALL);
                if (n > 0)
                        got += (size_t)n;
                else if (n != -EAGAIN)
                        s->rc = n == 0 ? -EPIPE : (int)n;
        }
        for (size_t i = 0; s->rc == 0 && i < s->len; i++)
                if (bytes[i] != pattern_byte(i))
                        s->rc = -EBADMSG;
        free(bytes);
        if (s->rc == 0)
                send_pattern(s);
}

/* The peer asks for a KeyUpdate while it sends: xftp answers with its own and seals what
 * follows, the close_notify too, under its next keys, as the peer then expects. */
static void test_key_update_asked_by_the_peer_moves_the_sealer_to_the_next_keys(void **state)
{
        (void)state;
        size_t len = 100000;
        uint8_t *bytes = malloc(len);
        assert_non_null(bytes);
        for (size_t i = 0; i < len; i++)
                bytes[i] = pattern_byte(i);
        const char *suites[] = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                                "TLS_CHACHA20_POLY1305_SHA256"};
        for (unsigned round = 0; round < 6; round++) {
                struct server s;
                struct peer p;
                pthread_t thread;
                open_both(&s, &p, &thread, TLS1_3_VERSION, suites[round % 3], receive_then_send,
                          len);
                assert_string_equal(SSL_get_cipher_name(p.data), suites[round % 3]);
                /* once, then twice: the next keys are derived from the last */
                size_t part = len / (round / 3 + 2), sent = 0;
                for (unsigned update = 0; update <= round / 3; update++, sent += part) {
                        assert_int_equal(SSL_write(p.data, bytes + sent, (int)part), (int)part);
                        assert_int_equal(SSL_key_update(p.data, SSL_KEY_UPDATE_REQUESTED), 1);
                }
                assert_int_equal(SSL_write(p.data, bytes + sent, (int)(len - sent)),
                                 (int)(len - sent));
                peer_reads_all_then_close_notify(&p, len);
                close_both(&s, &p, thread);
        }
        free(bytes);
}

#define SMALL_PIECE 1000

/* The pattern offered in pieces of SMALL_PIECE bytes, a record each: a send's worth of
 * them takes more room for headers and tags than a send of few large pieces. */
static void send_pattern_in_small_pieces(struct server *s)
{
        size_t pieces = s->len / SMALL_PIECE, done = 0;
        uint8_t *bytes = malloc(s->len);
        struct iovec *iov = calloc(pieces, sizeof(*iov));
        assert_true(bytes && iov && s->len % SMALL_PIECE == 0);
        for (size_t i = 0; i < s->len; i++)
                bytes[i] = pattern_byte(i);
        for (size_t i = 0; i < pieces; i++)
                iov[i] = (struct iovec){bytes + i * SMALL_PIECE, SMALL_PIECE};
        while (s->rc == 0 && done < s->len) {
                size_t first = done / SMALL_PIECE, into = done % SMALL_PIECE;
                iov[first].iov_base = bytes + done;
                iov[first].iov_len = SMALL_PIECE - into;
                ssize_t n = s->data.ops->sendv(&s->data, iov + first, (int)(pieces - first), 0);
                if (n > 0)
                        done += (size_t)n;
                else if (n != -EAGAIN)
                        s->rc = n == 0 ? -EIO : (int)n;
        }
        free(iov);
        free(bytes);
}

/* Many small pieces in one sendv: the records made of them fit the records buffer. */
static void test_many_small_pieces_in_one_send(void **state)
{
        (void)state;
        int versions[] = {TLS1_3_VERSION, TLS1_2_VERSION};
        for (unsigned i = 0; i < 2; i++) {
                struct server s;
                struct peer p;
                pthread_t thread;
                open_both(&s, &p, &thread, versions[i], NULL, send_pattern_in_small_pieces,
                          600 * SMALL_PIECE);
                peer_reads_all_then_close_notify(&p, 600 * SMALL_PIECE);
                close_both(&s, &p, thread);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_close_notify_goes_whole_after_the_socket_was_full),
            cmocka_unit_test(test_key_update_asked_by_the_peer_moves_the_sealer_to_the_next_keys),
            cmocka_unit_test(test_many_small_pieces_in_one_send),
        };
        signal(SIGPIPE, SIG_IGN); /* a failing peer's alert to a closed socket */
        return cmocka_run_group_tests(tests, make_cert_files, remove_cert_files);
}
