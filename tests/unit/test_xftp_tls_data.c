/* A data connection of xftp's TLS (xftp/common/xtls.h) whose records are made in user
 * space, against a plain OpenSSL peer over a socket pair: xftp is the server or the
 * client, its control connection first (whose session the data connection resumes), then
 * the data connection. The peer reads as any FTPS peer would, so every record xftp sends,
 * its close_notify included, must open under the keys the peer holds at that moment.
 * Where xftp reads, the peer's records may be made by the test (any type, any number),
 * sealed under the peer's keys in one sequence with OpenSSL's.
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

#include <dragstrip/clock.h>
#include <dragstrip/error.h>

#include "tls_seal.h"
#include "tls_test_sealer.h"
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

struct side;
typedef void side_act(struct side *s);

/* How the two meet: which is the client, the highest version, the suites the peer takes
 * (NULL: OpenSSL's defaults), and who seals xftp's records then. */
struct setup {
        bool xftp_client;
        int max_version;
        const char *suites;  /* TLS 1.3 */
        const char *ciphers; /* TLS 1.2, MAC then encrypt when CBC */
        const char *sealed_by;
        unsigned rounds; /* receive_then_send's exchanges (0: one) */
        bool peer_seals; /* the peer's data records are sealed by the test (test_sealer) */
};

/* xftp's side, in a thread of its own. */
struct side {
        struct xftp_tls *tls;
        bool client;
        int ctl_fd, data_fd;
        struct xftp_conn ctl, data;
        const char *sealed_by;
        side_act *act; /* what it does on its data connection, then closes it */
        size_t len;    /* how many bytes act moves */
        unsigned rounds;
        int rc;
        struct ds_error err;
};

/* KeyUpdates of xftp's the peer took: OpenSSL logs the next secret of the direction it
 * reads when it takes one. */
static atomic_int updates_seen;

static void peer_notes_secret(const SSL *ssl, const char *line)
{
        const char *xftp_sends =
            SSL_is_server(ssl) ? "CLIENT_TRAFFIC_SECRET_N " : "SERVER_TRAFFIC_SECRET_N ";
        if (strncmp(line, xftp_sends, strlen(xftp_sends)) == 0)
                atomic_fetch_add(&updates_seen, 1);
}

/* The peer: plain OpenSSL. */
struct peer {
        SSL_CTX *ctx;
        SSL *ctl, *data;
        BIO_METHOD *sealer_method;
        struct test_sealer sealer; /* with setup->peer_seals */
};

static void *side_main(void *arg)
{
        struct side *s = arg;
        const char *host = s->client ? "xftpd" : NULL;
        char plus = 0;

        xftp_conn_plain(&s->ctl, s->ctl_fd);
        xftp_conn_plain(&s->data, s->data_fd);
        s->rc =
            xftp_tls_start(&s->ctl, 1, s->tls, !s->client, host, NULL, TIMEOUT_MS, NULL, &s->err);
        /* a byte from the server, and with it the control session's tickets */
        if (s->rc == 0 && s->client)
                s->rc = xftp_conn_recv(&s->ctl, &plus, 1, MSG_WAITALL) == 1 && plus == '+'
                            ? 0
                            : -EPROTO;
        else if (s->rc == 0)
                s->rc = xftp_conn_write_all(&s->ctl, "+", 1, TIMEOUT_MS, NULL);
        if (s->rc == 0)
                s->rc = xftp_tls_start(&s->data, 1, s->tls, !s->client, host, &s->ctl, TIMEOUT_MS,
                                       NULL, &s->err);
        if (s->rc == 0) {
                assert_string_equal(xftp_tls_sealed_by(&s->data), s->sealed_by);
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

/* len bytes of the pattern, malloc'ed. */
static uint8_t *pattern(size_t len)
{
        uint8_t *bytes = malloc(len);
        assert_non_null(bytes);
        for (size_t i = 0; i < len; i++)
                bytes[i] = pattern_byte(i);
        return bytes;
}

static void peer_handshake(SSL *ssl, bool server)
{
        assert_int_equal(server ? SSL_accept(ssl) : SSL_connect(ssl), 1);
}

/* Starts xftp's side with act, and shakes the peer's hands: control, then data resuming
 * the control's session. */
static void open_both(struct side *s, struct peer *p, pthread_t *thread, const struct setup *setup,
                      side_act *act, size_t len)
{
        int ctl[2], data[2];
        bool peer_server = setup->xftp_client;

        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, ctl), 0);
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, data), 0);
        memset(s, 0, sizeof(*s));
        struct ds_error err = {{0}};
        s->client = setup->xftp_client;
        if (s->client)
                assert_int_equal(xftp_tls_client(&s->tls, NULL, true, &err), 0);
        else
                assert_int_equal(xftp_tls_server(&s->tls, cert_path, key_path, &err), 0);
        s->ctl_fd = ctl[0];
        s->data_fd = data[0];
        s->sealed_by = setup->sealed_by ? setup->sealed_by : "xftp";
        s->act = act;
        s->len = len;
        s->rounds = setup->rounds ? setup->rounds : 1;
        assert_int_equal(pthread_create(thread, NULL, side_main, s), 0);

        p->ctx = SSL_CTX_new(peer_server ? TLS_server_method() : TLS_client_method());
        assert_non_null(p->ctx);
        SSL_CTX_set_keylog_callback(p->ctx, peer_notes_secret);
        atomic_store(&updates_seen, 0);
        SSL_CTX_set_max_proto_version(p->ctx, setup->max_version);
        if (setup->suites)
                assert_int_equal(SSL_CTX_set_ciphersuites(p->ctx, setup->suites), 1);
        if (setup->ciphers) {
                assert_int_equal(SSL_CTX_set_cipher_list(p->ctx, setup->ciphers), 1);
                SSL_CTX_set_options(p->ctx, SSL_OP_NO_ENCRYPT_THEN_MAC);
        }
        if (peer_server) {
                assert_int_equal(SSL_CTX_use_certificate_file(p->ctx, cert_path, SSL_FILETYPE_PEM),
                                 1);
                assert_int_equal(SSL_CTX_use_PrivateKey_file(p->ctx, key_path, SSL_FILETYPE_PEM),
                                 1);
                assert_int_equal(SSL_CTX_set_session_id_context(p->ctx, (const void *)"peer", 4),
                                 1);
        }
        p->ctl = SSL_new(p->ctx);
        p->data = SSL_new(p->ctx);
        assert_true(p->ctl && p->data);
        assert_int_equal(SSL_set_fd(p->ctl, ctl[1]), 1);
        peer_handshake(p->ctl, peer_server);
        if (peer_server) {
                assert_int_equal(SSL_write(p->ctl, "+", 1), 1);
        } else {
                char plus = 0;
                assert_int_equal(SSL_read(p->ctl, &plus, 1), 1);
                assert_int_equal(plus, '+');
                SSL_SESSION *session = SSL_get1_session(p->ctl);
                assert_non_null(session);
                assert_int_equal(SSL_set_session(p->data, session), 1);
                SSL_SESSION_free(session);
        }
        p->sealer_method = NULL;
        p->sealer = (struct test_sealer){.fd = data[1]};
        if (setup->peer_seals) {
                BIO *sealer = test_sealer_bio(&p->sealer, &p->sealer_method);
                BIO *sock = BIO_new_socket(data[1], 0);
                assert_non_null(sock);
                SSL_set_options(p->data, SSL_OP_ENABLE_KTLS);
                SSL_set_bio(p->data, sock, sealer);
        } else {
                assert_int_equal(SSL_set_fd(p->data, data[1]), 1);
        }
        peer_handshake(p->data, peer_server);
        assert_true(SSL_session_reused(p->data));
        assert_int_equal(p->sealer.sealing, setup->peer_seals);
}

/* Closes the peer's ends (xftp's closes wait for them) and waits for xftp's side. */
static void close_both(struct side *s, struct peer *p, pthread_t thread)
{
        close(SSL_get_fd(p->data));
        close(SSL_get_fd(p->ctl));
        assert_int_equal(pthread_join(thread, NULL), 0);
        atomic_store(&short_sends_refused, 0); /* what OpenSSL's own socket writes left */
        assert_int_equal(s->rc, 0);
        SSL_free(p->data);
        SSL_free(p->ctl);
        SSL_CTX_free(p->ctx);
        BIO_meth_free(p->sealer_method);
        xftp_tls_seal_free(&p->sealer.seal);
        xftp_tls_free(s->tls);
}

/* The peer reads the pattern's bytes from..from+len. */
static void peer_reads(struct peer *p, size_t from, size_t len)
{
        uint8_t buf[16384];
        size_t got = 0;

        while (got < len) {
                size_t want = len - got < sizeof(buf) ? len - got : sizeof(buf);
                int n = SSL_read(p->data, buf, (int)want);
                if (n <= 0)
                        fail_msg("the data ended at %zu of %zu: %s", from + got, from + len,
                                 ERR_reason_error_string(ERR_get_error()));
                for (int i = 0; i < n; i++)
                        assert_int_equal(buf[i], pattern_byte(from + got + (size_t)i));
                got += (size_t)n;
        }
}

/* The peer reads len bytes of the pattern, then the end: a close_notify, not a bare EOF. */
static void peer_reads_all_then_close_notify(struct peer *p, size_t len)
{
        uint8_t buf[16384];

        peer_reads(p, 0, len);
        int n = SSL_read(p->data, buf, sizeof(buf));
        unsigned long why = ERR_peek_error();
        if (n != 0 || SSL_get_error(p->data, n) != SSL_ERROR_ZERO_RETURN)
                fail_msg("after the data: %d, not a close_notify (%s)", n,
                         why ? ERR_reason_error_string(why) : "EOF");
}

static void send_pattern(struct side *s)
{
        uint8_t *bytes = pattern(s->len);
        s->rc = xftp_conn_write_all(&s->data, bytes, s->len, TIMEOUT_MS, NULL);
        free(bytes);
}

/* The data, then a socket that takes nothing for a while at the close: the close_notify
 * waits its turn and then goes whole. */
static void send_then_close_when_full(struct side *s)
{
        send_pattern(s);
        atomic_store(&short_sends_refused, 3);
}

/* xftp, the server, sends len bytes by act under TLS 1.3 and 1.2; the peer reads them and
 * the close_notify (after every short send that was to be refused was). */
static void xftp_sends_under_both_versions(side_act *act, size_t len)
{
        int versions[] = {TLS1_3_VERSION, TLS1_2_VERSION};
        for (unsigned i = 0; i < 2; i++) {
                struct side s;
                struct peer p;
                pthread_t thread;
                struct setup setup = {.max_version = versions[i]};
                open_both(&s, &p, &thread, &setup, act, len);
                peer_reads_all_then_close_notify(&p, len);
                assert_int_equal(atomic_load(&short_sends_refused), 0);
                close_both(&s, &p, thread);
        }
}

static void test_close_notify_goes_whole_after_the_socket_was_full(void **state)
{
        (void)state;
        xftp_sends_under_both_versions(send_then_close_when_full, 100000);
}

/* In each of s->rounds, reads the next part of what the peer sends (a KeyUpdate among
 * it), then answers with the same part of the pattern. */
static void receive_then_send(struct side *s)
{
        uint8_t *bytes = malloc(s->len), *mine = pattern(s->len);
        size_t part = s->len / s->rounds, got = 0;
        assert_non_null(bytes);
        for (unsigned round = 0; s->rc == 0 && round < s->rounds; round++) {
                size_t from = got, end = round + 1 == s->rounds ? s->len : from + part;
                while (s->rc == 0 && got < end) {
                        ssize_t n = xftp_conn_recv(&s->data, bytes + got, end - got, MSG_WAITALL);
                        if (n > 0)
                                got += (size_t)n;
                        else if (n != -EAGAIN)
                                s->rc = n == 0 ? -EPIPE : (int)n;
                }
                for (size_t i = from; s->rc == 0 && i < end; i++)
                        if (bytes[i] != pattern_byte(i))
                                s->rc = -EBADMSG;
                if (s->rc == 0)
                        s->rc = xftp_conn_write_all(&s->data, mine + from, end - from, TIMEOUT_MS,
                                                    NULL);
        }
        free(mine);
        free(bytes);
}

/* The peer asks for a KeyUpdate while it sends: xftp answers with its own and seals what
 * follows, the close_notify too, under its next keys, as the peer then expects. Asked
 * again after xftp's answer, it answers again, under the keys after those. */
static void test_key_update_asked_by_the_peer_moves_the_sealer_to_the_next_keys(void **state)
{
        (void)state;
        size_t len = 100000;
        uint8_t *bytes = pattern(len);
        const char *suites[] = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                                "TLS_CHACHA20_POLY1305_SHA256"};
        /* By threes: asked once; asked twice while xftp is silent (one answer, RFC 8446
         * 4.6.3); asked once in each of two exchanges (two answers, the next keys derived
         * from the last). */
        for (unsigned round = 0; round < 9; round++) {
                struct side s;
                struct peer p;
                pthread_t thread;
                unsigned asks = round / 3 == 1 ? 2 : 1, rounds = round / 3 == 2 ? 2 : 1;
                struct setup setup = {
                    .max_version = TLS1_3_VERSION, .suites = suites[round % 3], .rounds = rounds};
                open_both(&s, &p, &thread, &setup, receive_then_send, len);
                assert_string_equal(SSL_get_cipher_name(p.data), suites[round % 3]);
                size_t part = len / rounds;
                for (unsigned r = 0; r < rounds; r++) {
                        size_t from = r * part, n = r + 1 == rounds ? len - from : part;
                        size_t piece = n / (asks + 1), sent = 0;
                        for (unsigned ask = 0; ask < asks; ask++, sent += piece) {
                                assert_int_equal(SSL_write(p.data, bytes + from + sent, (int)piece),
                                                 (int)piece);
                                assert_int_equal(SSL_key_update(p.data, SSL_KEY_UPDATE_REQUESTED),
                                                 1);
                        }
                        assert_int_equal(SSL_write(p.data, bytes + from + sent, (int)(n - sent)),
                                         (int)(n - sent));
                        peer_reads(&p, from, n);
                }
                peer_reads_all_then_close_notify(&p, 0);
                assert_int_equal(atomic_load(&updates_seen), rounds);
                close_both(&s, &p, thread);
        }
        free(bytes);
}

#define SMALL_PIECE 1000

/* The pattern offered in pieces of SMALL_PIECE bytes, a record each: a send's worth of
 * them takes more room for headers and tags than a send of few large pieces. */
static void send_pattern_in_small_pieces(struct side *s)
{
        size_t pieces = s->len / SMALL_PIECE, done = 0;
        uint8_t *bytes = pattern(s->len);
        struct iovec *iov = calloc(pieces, sizeof(*iov));
        assert_true(iov && s->len % SMALL_PIECE == 0);
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
        xftp_sends_under_both_versions(send_pattern_in_small_pieces, 600 * SMALL_PIECE);
}

/* xftp as the client, whose records OpenSSL seals for suites tls_seal does not know (a
 * TLS 1.2 server's CBC, MAC then encrypt, the most a record adds, and OpenSSL's
 * multi-record writes where the CPU has them): kept from one SSL_write each, in order
 * with OpenSSL's own messages, and its close_notify after them. */
static void test_suites_openssl_seals_as_the_client(void **state)
{
        (void)state;
        const char *ciphers[] = {"ECDHE-ECDSA-AES128-SHA", "ECDHE-ECDSA-AES256-SHA384",
                                 "ECDHE-ECDSA-AES128-SHA256"};
        side_act *acts[] = {send_pattern_in_small_pieces, send_then_close_when_full};
        for (unsigned i = 0; i < 6; i++) {
                struct side s;
                struct peer p;
                pthread_t thread;
                struct setup setup = {.xftp_client = true,
                                      .max_version = TLS1_2_VERSION,
                                      .ciphers = ciphers[i % 3],
                                      .sealed_by = "openssl"};
                open_both(&s, &p, &thread, &setup, acts[i / 3], 600 * SMALL_PIECE);
                assert_string_equal(SSL_get_cipher_name(p.data), ciphers[i % 3]);
                peer_reads_all_then_close_notify(&p, 600 * SMALL_PIECE);
                close_both(&s, &p, thread);
        }
}

/* xftp as the client, sealing: its records and KeyUpdate answers as the server's, though
 * OpenSSL answers a client's only at an SSL_write, which sealing does not call. */
static void test_sealing_as_the_client(void **state)
{
        (void)state;
        size_t len = 100000;
        uint8_t *bytes = pattern(len);
        int versions[] = {TLS1_3_VERSION, TLS1_2_VERSION};
        for (unsigned i = 0; i < 2; i++) {
                struct side s;
                struct peer p;
                pthread_t thread;
                struct setup setup = {.xftp_client = true, .max_version = versions[i]};
                open_both(&s, &p, &thread, &setup, receive_then_send, len);
                assert_int_equal(SSL_write(p.data, bytes, (int)(len / 2)), (int)(len / 2));
                if (versions[i] == TLS1_3_VERSION)
                        assert_int_equal(SSL_key_update(p.data, SSL_KEY_UPDATE_REQUESTED), 1);
                assert_int_equal(SSL_write(p.data, bytes + len / 2, (int)(len - len / 2)),
                                 (int)(len - len / 2));
                peer_reads_all_then_close_notify(&p, len);
                /* answered before xftp's first data, as RFC 8446 4.6.3 has it */
                assert_int_equal(atomic_load(&updates_seen), versions[i] == TLS1_3_VERSION);
                close_both(&s, &p, thread);
        }
        free(bytes);
}

/* A flood of records that carry no data (empty ones, as a hostile peer may send faster
 * than they are opened), then one byte. */
#define FLOOD_RECORDS (4u << 20)

static atomic_bool flood_started;
static uint64_t flood_recv_ns; /* how long xftp's first receive took */
static ssize_t flood_recv_rc;

/* One receive while the flood comes, timed; then the byte after it. */
static void receive_amid_a_flood(struct side *s)
{
        uint8_t byte = 0;

        while (!atomic_load(&flood_started))
                usleep(1000);
        uint64_t start_ns = ds_now_ns();
        ssize_t n = xftp_conn_recv(&s->data, &byte, 1, 0);
        flood_recv_ns = ds_now_ns() - start_ns;
        flood_recv_rc = n;
        while (n == -EAGAIN)
                n = xftp_conn_recv(&s->data, &byte, 1, 0);
        s->rc = n == 1 && byte == 'x' ? 0 : n < 0 ? (int)n : -EPROTO;
}

/* A receive returns within its slice (100 ms) however long the peer goes on sending
 * records with no data in them: the caller's stop and idle checks keep their rhythm. */
static void test_receive_returns_within_a_slice_amid_records_without_data(void **state)
{
        (void)state;
        struct side s;
        struct peer p;
        pthread_t thread;
        struct setup setup = {.max_version = TLS1_3_VERSION, .peer_seals = true};
        size_t record = xftp_tls_sealed_max(0);
        uint8_t *flood = malloc(FLOOD_RECORDS * record);
        size_t flood_len = 0;

        assert_non_null(flood);
        atomic_store(&flood_started, false);
        open_both(&s, &p, &thread, &setup, receive_amid_a_flood, 1);
        for (unsigned i = 0; i < FLOOD_RECORDS; i++) {
                ssize_t made = xftp_tls_seal(&p.sealer.seal, 23, "", 0, flood + flood_len);
                assert_true(made > 0);
                flood_len += (size_t)made;
        }
        /* Room for records enough that the peer's writes never fall behind xftp's reads. */
        int room = 4 << 20;
        assert_int_equal(setsockopt(p.sealer.fd, SOL_SOCKET, SO_SNDBUF, &room, sizeof(room)), 0);
        atomic_store(&flood_started, true);
        uint64_t start_ns = ds_now_ns();
        test_sealer_put(&p.sealer, flood, flood_len);
        test_sealer_send(&p.sealer, 23, "x", 1);
        uint64_t flood_ns = ds_now_ns() - start_ns;
        close_both(&s, &p, thread);
        free(flood);
        if (flood_recv_ns > 500000000u)
                fail_msg("a receive took %.2f s of a flood of %.2f s", (double)flood_recv_ns / 1e9,
                         (double)flood_ns / 1e9);
        assert_int_equal(flood_recv_rc, -EAGAIN);
}

static ssize_t end_seen, end_again; /* what receive_in_small_pieces saw after the data */

/* Reads s->len bytes of the pattern in receives of at most 1000 bytes (the records are
 * larger: opened aside, then handed out in parts), then what ends the stream, twice. */
static void receive_in_small_pieces(struct side *s)
{
        uint8_t buf[1000];
        size_t got = 0;

        while (s->rc == 0 && got < s->len) {
                size_t want = s->len - got < sizeof(buf) ? s->len - got : sizeof(buf);
                ssize_t n = xftp_conn_recv(&s->data, buf, want, 0);
                if (n > 0) {
                        for (ssize_t i = 0; i < n; i++)
                                if (buf[i] != pattern_byte(got + (size_t)i))
                                        s->rc = -EBADMSG;
                        got += (size_t)n;
                } else if (n != -EAGAIN) {
                        s->rc = n == 0 ? -EPIPE : (int)n;
                }
        }
        do
                end_seen = xftp_conn_recv(&s->data, buf, sizeof(buf), 0);
        while (end_seen == -EAGAIN);
        end_again = xftp_conn_recv(&s->data, buf, sizeof(buf), MSG_DONTWAIT);
}

/* What a TLS 1.3 peer may send among its data, all taken: a ticket split across records,
 * records larger than the reader's buffer, padding, an empty record; then close_notify
 * ends the stream (0), or a record cut short by the peer's close is an error (-EPIPE),
 * and stays one. */
static void test_opened_stream_takes_what_tls13_allows_and_ends_as_sent(void **state)
{
        (void)state;
        for (int cut = 0; cut < 2; cut++) {
                struct side s;
                struct peer p;
                pthread_t thread;
                struct setup setup = {.max_version = TLS1_3_VERSION, .peer_seals = true};
                size_t len = 40100;
                uint8_t *bytes = pattern(len);
                const uint8_t ticket[] = {4, 0, 0, 6, 1, 2, 3, 4, 5, 6};
                uint8_t padded[100 + 1 + 500] = {0};

                open_both(&s, &p, &thread, &setup, receive_in_small_pieces, len);
                test_sealer_send(&p.sealer, 22, ticket, 3);
                test_sealer_send(&p.sealer, 22, ticket + 3, sizeof(ticket) - 3);
                test_sealer_send(&p.sealer, 23, bytes, 20000);
                test_sealer_send(&p.sealer, 23, "", 0);
                /* padding: the type, then zeros, sealed with a last byte of 0 */
                memcpy(padded, bytes + 20000, 100);
                padded[100] = 23;
                test_sealer_send(&p.sealer, 0, padded, sizeof(padded));
                test_sealer_send(&p.sealer, 23, bytes + 20100, len - 20100);
                if (cut) {
                        uint8_t rec[64];
                        ssize_t made = xftp_tls_seal(&p.sealer.seal, 23, "more", 4, rec);
                        assert_true(made > 10);
                        test_sealer_put(&p.sealer, rec, (size_t)made - 10);
                        assert_int_equal(shutdown(p.sealer.fd, SHUT_WR), 0);
                } else {
                        assert_true(SSL_shutdown(p.data) >= 0); /* close_notify */
                }
                close_both(&s, &p, thread);
                free(bytes);
                assert_int_equal(end_seen, cut ? -EPIPE : 0);
                assert_int_equal(end_again, end_seen);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_close_notify_goes_whole_after_the_socket_was_full),
            cmocka_unit_test(test_key_update_asked_by_the_peer_moves_the_sealer_to_the_next_keys),
            cmocka_unit_test(test_many_small_pieces_in_one_send),
            cmocka_unit_test(test_suites_openssl_seals_as_the_client),
            cmocka_unit_test(test_sealing_as_the_client),
            cmocka_unit_test(test_receive_returns_within_a_slice_amid_records_without_data),
            cmocka_unit_test(test_opened_stream_takes_what_tls13_allows_and_ends_as_sent),
        };
        signal(SIGPIPE, SIG_IGN); /* a failing peer's alert to a closed socket */
        return cmocka_run_group_tests(tests, make_cert_files, remove_cert_files);
}
