/* TLS records made and read in user space, each side checked against OpenSSL.
 *
 * Sealed (xftp/common/tls_seal.h): a server with SSL_OP_ENABLE_KTLS hands its sending
 * keys to a BIO that seals with them, as a socket's under kernel TLS would take them, and
 * a plain OpenSSL client must read every record, its own messages (close_notify) and the
 * data sealed straight, for each suite and version the sealer takes; a record changed in
 * flight must be refused, and offers it does not know refused at once.
 *
 * Opened (xftp/common/tls_open.h): what a plain OpenSSL server sends under TLS 1.3, with
 * tickets, padding, key updates and close_notify, must read back whole with the client's
 * traffic secret from the key log; records changed, lost or malformed must be refused. */
#include <errno.h>
#include <linux/tls.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <openssl/err.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "tls_open.h"
#include "tls_seal.h"
#include "tls_test_sealer.h"

struct pair {
        SSL_CTX *server_ctx, *client_ctx;
        SSL *server, *client;
        BIO *server_end;
        struct test_sealer sealer; /* the server's write side */
        BIO_METHOD *method;
};

/* A self-signed P-256 certificate and its key. */
static void make_cert(X509 **cert, EVP_PKEY **key)
{
        *key = EVP_EC_gen("P-256");
        assert_non_null(*key);
        *cert = X509_new();
        assert_non_null(*cert);
        ASN1_INTEGER_set(X509_get_serialNumber(*cert), 1);
        X509_gmtime_adj(X509_getm_notBefore(*cert), 0);
        X509_gmtime_adj(X509_getm_notAfter(*cert), 3600);
        X509_set_pubkey(*cert, *key);
        X509_NAME *name = X509_get_subject_name(*cert);
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"seal", -1, -1,
                                   0);
        X509_set_issuer_name(*cert, name);
        assert_true(X509_sign(*cert, *key, EVP_sha256()) > 0);
}

/* The client's key log: the server's traffic secret, which reads what it sends. */
static uint8_t server_secret[EVP_MAX_MD_SIZE];
static size_t server_secret_len;

static void keylog(const SSL *ssl, const char *line)
{
        const char *label = "SERVER_TRAFFIC_SECRET_0 ";
        long len = 0;

        (void)ssl;
        if (strncmp(line, label, strlen(label)) != 0)
                return;
        const char *hex = strchr(line + strlen(label), ' ');
        assert_non_null(hex);
        unsigned char *bytes = OPENSSL_hexstr2buf(hex + 1, &len);
        assert_non_null(bytes);
        assert_true(len > 0 && (size_t)len <= sizeof(server_secret));
        memcpy(server_secret, bytes, (size_t)len);
        server_secret_len = (size_t)len;
        OPENSSL_free(bytes);
}

/* A handshake of the given version and suite over a BIO pair; with seal, the server's
 * sending keys go to the sealer, else OpenSSL seals. */
static void pair_open(struct pair *p, int version, const char *suite, bool seal)
{
        X509 *cert;
        EVP_PKEY *key;
        BIO *client_end;

        memset(p, 0, sizeof(*p));
        make_cert(&cert, &key);
        p->server_ctx = SSL_CTX_new(TLS_server_method());
        p->client_ctx = SSL_CTX_new(TLS_client_method());
        assert_non_null(p->server_ctx);
        assert_non_null(p->client_ctx);
        assert_int_equal(SSL_CTX_use_certificate(p->server_ctx, cert), 1);
        assert_int_equal(SSL_CTX_use_PrivateKey(p->server_ctx, key), 1);
        X509_free(cert);
        EVP_PKEY_free(key);
        if (seal)
                SSL_CTX_set_options(p->server_ctx, SSL_OP_ENABLE_KTLS);
        SSL_CTX_set_num_tickets(p->server_ctx, seal ? 0 : 2);
        SSL_CTX_set_keylog_callback(p->client_ctx, keylog);
        server_secret_len = 0;
        SSL_CTX *both[] = {p->server_ctx, p->client_ctx};
        for (int i = 0; i < 2; i++) {
                SSL_CTX_set_min_proto_version(both[i], version);
                SSL_CTX_set_max_proto_version(both[i], version);
                if (version == TLS1_3_VERSION)
                        assert_int_equal(SSL_CTX_set_ciphersuites(both[i], suite), 1);
                else
                        assert_int_equal(SSL_CTX_set_cipher_list(both[i], suite), 1);
        }

        assert_int_equal(BIO_new_bio_pair(&client_end, 1 << 20, &p->server_end, 1 << 20), 1);
        p->sealer = (struct test_sealer){.fd = -1, .to = p->server_end};
        BIO *sealing = test_sealer_bio(&p->sealer, &p->method);
        BIO_up_ref(p->server_end); /* the server reads it; the sealer writes it */

        p->server = SSL_new(p->server_ctx);
        p->client = SSL_new(p->client_ctx);
        assert_non_null(p->server);
        assert_non_null(p->client);
        SSL_set_bio(p->server, p->server_end, sealing);
        SSL_set_bio(p->client, client_end, client_end);
        SSL_set_accept_state(p->server);
        SSL_set_connect_state(p->client);
        int done = 0;
        for (int i = 0; i < 50 && done != 3; i++) {
                if (!(done & 1) && SSL_do_handshake(p->client) == 1)
                        done |= 1;
                if (!(done & 2) && SSL_do_handshake(p->server) == 1)
                        done |= 2;
        }
        assert_int_equal(done, 3);
        assert_int_equal(p->sealer.sealing, seal); /* the sealer took the keys, if offered */
}

static void pair_close(struct pair *p)
{
        SSL_free(p->server);
        SSL_free(p->client);
        BIO_free(p->server_end);
        SSL_CTX_free(p->server_ctx);
        SSL_CTX_free(p->client_ctx);
        BIO_meth_free(p->method);
        xftp_tls_seal_free(&p->sealer.seal);
}

/* The client reads exactly len bytes, which must be want's. */
static void client_reads(struct pair *p, const uint8_t *want, size_t len)
{
        uint8_t *got = malloc(len + 1);
        size_t have = 0;

        assert_non_null(got);
        while (have < len) {
                size_t n = 0;
                assert_int_equal(SSL_read_ex(p->client, got + have, len - have, &n), 1);
                have += n;
        }
        assert_memory_equal(got, want, len);
        free(got);
}

static uint8_t *pattern(size_t len, unsigned seed)
{
        uint8_t *bytes = malloc(len);
        assert_non_null(bytes);
        for (size_t i = 0; i < len; i++)
                bytes[i] = (uint8_t)(i * 31 + seed);
        return bytes;
}

/* Sealed straight (as a file's bytes are), len bytes reach the client whole. */
static void seal_straight(struct pair *p, size_t len, unsigned seed)
{
        uint8_t *plain = pattern(len, seed);
        uint8_t *out = malloc(xftp_tls_sealed_max(len));
        assert_non_null(out);
        ssize_t made = xftp_tls_seal(&p->sealer.seal, 23, plain, len, out);
        assert_true(made > (ssize_t)len);
        assert_true((size_t)made <= xftp_tls_sealed_max(len));
        assert_int_equal(BIO_write(p->server_end, out, (int)made), (int)made);
        client_reads(p, plain, len);
        free(out);
        free(plain);
}

struct suite {
        int version;
        const char *name; /* OpenSSL's name, as set and as negotiated */
};

/* Each suite the sealer takes, in each version. */
static const struct suite suites[] = {
    {TLS1_3_VERSION, "TLS_AES_128_GCM_SHA256"},
    {TLS1_3_VERSION, "TLS_AES_256_GCM_SHA384"},
    {TLS1_3_VERSION, "TLS_CHACHA20_POLY1305_SHA256"},
    {TLS1_2_VERSION, "ECDHE-ECDSA-AES128-GCM-SHA256"},
    {TLS1_2_VERSION, "ECDHE-ECDSA-AES256-GCM-SHA384"},
    {TLS1_2_VERSION, "ECDHE-ECDSA-CHACHA20-POLY1305"},
};

static void one_suite(void **state)
{
        const struct suite *suite = *state;
        struct pair p;
        size_t sizes[] = {1, 16383, 16384, 16385, 256u << 10, 100000};

        pair_open(&p, suite->version, suite->name, true);
        assert_string_equal(SSL_get_cipher_name(p.client), suite->name);
        /* OpenSSL's own writes, sealed by the BIO. */
        uint8_t *plain = pattern(70000, 3);
        size_t written = 0;
        assert_int_equal(SSL_write_ex(p.server, plain, 70000, &written), 1);
        assert_int_equal(written, 70000);
        client_reads(&p, plain, 70000);
        free(plain);
        /* Sealed straight, in line with them: records of every size. */
        for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
                seal_straight(&p, sizes[i], i);
        /* close_notify, an alert OpenSSL sends through the sealer: an orderly end. */
        assert_true(SSL_shutdown(p.server) >= 0);
        uint8_t byte;
        size_t n = 0;
        assert_int_equal(SSL_read_ex(p.client, &byte, 1, &n), 0);
        assert_int_equal(SSL_get_error(p.client, 0), SSL_ERROR_ZERO_RETURN);
        pair_close(&p);
}

/* A sealed record changed in flight is refused, the client failing the connection
 * instead of returning bytes: one bit of its ciphertext, or its length one shorter (the
 * length is authenticated: the record then ends one byte early). */
static void changed_record_refused(void **state)
{
        const struct suite *aes256[] = {&suites[1], &suites[4]}; /* TLS 1.3, 1.2 */

        (void)state;
        for (int v = 0; v < 2; v++) {
                for (int shorter = 0; shorter < 2; shorter++) {
                        struct pair p;
                        uint8_t *plain = pattern(1000, 9), out[1100], got[1000];
                        size_t n = 0;

                        pair_open(&p, aes256[v]->version, aes256[v]->name, true);
                        ssize_t made = xftp_tls_seal(&p.sealer.seal, 23, plain, 1000, out);
                        assert_true(made > 0);
                        if (shorter) {
                                unsigned len = (unsigned)(out[3] << 8 | out[4]) - 1;
                                out[3] = (uint8_t)(len >> 8);
                                out[4] = (uint8_t)len;
                        } else {
                                out[100] ^= 0x40;
                        }
                        assert_int_equal(BIO_write(p.server_end, out, (int)made), (int)made);
                        assert_int_equal(SSL_read_ex(p.client, got, sizeof(got), &n), 0);
                        assert_int_equal(SSL_get_error(p.client, 0), SSL_ERROR_SSL);
                        ERR_clear_error();
                        free(plain);
                        pair_close(&p);
                }
        }
}

/* Offers the sealer does not know, and a sequence at its end. */
static void offers_refused(void **state)
{
        struct {
                struct tls12_crypto_info_aes_gcm_256 gcm256;
                size_t len;
        } offer;
        struct xftp_tls_seal s;
        uint8_t out[64];

        (void)state;
        memset(&offer, 0, sizeof(offer));
        offer.gcm256.info.version = TLS_1_3_VERSION;
        offer.gcm256.info.cipher_type = TLS_CIPHER_AES_GCM_256;
        offer.len = sizeof(offer.gcm256);
        assert_int_equal(xftp_tls_seal_init(&s, &offer), 0);
        s.seq = UINT64_MAX;
        assert_int_equal(xftp_tls_seal(&s, 23, "x", 1, out), -EOVERFLOW);
        xftp_tls_seal_free(&s);

        offer.len = sizeof(offer.gcm256) - 1; /* a layout not OpenSSL 3's */
        assert_int_equal(xftp_tls_seal_init(&s, &offer), -ENOTSUP);
        offer.len = sizeof(offer.gcm256);
        offer.gcm256.info.version = 0x0302; /* TLS 1.1 */
        assert_int_equal(xftp_tls_seal_init(&s, &offer), -ENOTSUP);
        offer.gcm256.info.version = TLS_1_2_VERSION;
        offer.gcm256.info.cipher_type = TLS_CIPHER_AES_CCM_128; /* not sealed here */
        assert_int_equal(xftp_tls_seal_init(&s, &offer), -ENOTSUP);
        assert_int_equal(xftp_tls_seal_init(&s, NULL), -ENOTSUP);
        xftp_tls_seal_free(&s); /* safe after a refusal */
}

/* The client's end, read as it stands: the records the server sent, whole. */
struct reader {
        struct xftp_tls_open open;
        uint8_t raw[1 << 20];
        size_t raw_len, at;
        bool closed;    /* close_notify came */
        unsigned asked; /* KeyUpdates that asked for the reader's */
};

static void reader_start(struct reader *r, struct pair *p)
{
        const SSL_CIPHER *cipher = SSL_get_current_cipher(p->client);

        memset(r, 0, sizeof(*r));
        assert_true(server_secret_len > 0);
        assert_int_equal(xftp_tls_open_init(&r->open, SSL_CIPHER_get_cipher_nid(cipher),
                                            SSL_CIPHER_get_handshake_digest(cipher), server_secret,
                                            server_secret_len),
                         0);
}

/* Takes what the server sent since; opens every whole record, the data into out. Returns
 * the data's length, or the first error. */
static ssize_t reader_take(struct reader *r, struct pair *p, uint8_t *out)
{
        BIO *client_end = SSL_get_rbio(p->client);
        ssize_t got = 0;
        int n;

        while ((n = BIO_read(client_end, r->raw + r->raw_len, (int)(sizeof(r->raw) - r->raw_len))) >
               0)
                r->raw_len += (size_t)n;
        while (r->raw_len - r->at >= XFTP_TLS_HEADER) {
                ssize_t len = xftp_tls_record_len(r->raw + r->at);
                if (len < 0)
                        return len;
                assert_true(r->raw_len - r->at >= (size_t)len);
                uint8_t content[XFTP_TLS_RECORD_MAX], type = 0;
                ssize_t c = xftp_tls_open(&r->open, r->raw + r->at, (size_t)len, content, &type);
                r->at += (size_t)len;
                if (c < 0)
                        return c;
                if (type == XFTP_TLS_APPLICATION) {
                        memcpy(out + got, content, (size_t)c);
                        got += c;
                } else if (type == XFTP_TLS_HANDSHAKE) {
                        int rc = xftp_tls_open_handshake(&r->open, content, (size_t)c);
                        if (rc < 0)
                                return rc;
                        r->asked += rc == XFTP_TLS_UPDATE_ASKED;
                } else {
                        assert_int_equal(type, XFTP_TLS_ALERT);
                        assert_int_equal(c, 2);
                        assert_int_equal(content[1], 0); /* close_notify */
                        r->closed = true;
                }
        }
        return got;
}

/* The server writes len bytes; they must read back whole. */
static void server_sends(struct reader *r, struct pair *p, size_t len, unsigned seed)
{
        uint8_t *plain = pattern(len, seed), *got = malloc(len + 1);
        size_t written = 0;

        assert_non_null(got);
        assert_int_equal(SSL_write_ex(p->server, plain, len, &written), 1);
        assert_int_equal(written, len);
        assert_int_equal(reader_take(r, p, got), (ssize_t)len);
        assert_memory_equal(got, plain, len);
        free(got);
        free(plain);
}

/* Each TLS 1.3 suite: data of every size after the tickets, padded records, key updates
 * (asked for an answer or not), then close_notify. */
static void opens_suite(void **state)
{
        const struct suite *suite = *state;
        struct pair p;
        struct reader *r = malloc(sizeof(*r));

        assert_non_null(r);
        pair_open(&p, suite->version, suite->name, false);
        reader_start(r, &p);
        server_sends(r, &p, 1, 1); /* the two tickets come first */
        server_sends(r, &p, 16384, 2);
        server_sends(r, &p, 100000, 3);
        SSL_set_block_padding(p.server, 512);
        server_sends(r, &p, 1000, 4);
        SSL_set_block_padding(p.server, 1);
        assert_int_equal(SSL_key_update(p.server, SSL_KEY_UPDATE_NOT_REQUESTED), 1);
        server_sends(r, &p, 5000, 5);
        assert_int_equal(r->asked, 0);
        assert_int_equal(SSL_key_update(p.server, SSL_KEY_UPDATE_REQUESTED), 1);
        server_sends(r, &p, 70000, 6);
        assert_int_equal(r->asked, 1);
        assert_true(SSL_shutdown(p.server) >= 0);
        uint8_t none[1];
        assert_int_equal(reader_take(r, &p, none), 0);
        assert_true(r->closed);
        xftp_tls_open_free(&r->open);
        free(r);
        pair_close(&p);
}

/* A record changed in flight, one lost, one out of TLS 1.3's bounds, or data amid a
 * handshake message is refused. */
static void opens_nothing_forged(void **state)
{
        struct pair p;
        struct reader *r = malloc(sizeof(*r));
        uint8_t *out = malloc(1 << 20);

        (void)state;
        assert_non_null(r);
        assert_non_null(out);
        for (int how = 0; how < 5; how++) {
                pair_open(&p, TLS1_3_VERSION, "TLS_AES_256_GCM_SHA384", false);
                reader_start(r, &p);
                server_sends(r, &p, 10, 1); /* past the tickets */
                uint8_t *plain = pattern(40000, 7);
                size_t written = 0;
                assert_int_equal(SSL_write_ex(p.server, plain, 40000, &written), 1);
                int n = BIO_read(SSL_get_rbio(p.client), r->raw + r->raw_len, 1 << 19);
                assert_true(n > 16384 + 22);
                uint8_t *first = r->raw + r->raw_len;
                size_t first_len = (size_t)xftp_tls_record_len(first);
                if (how == 0)
                        first[100] ^= 0x01; /* a bit of its ciphertext */
                else if (how == 1)
                        memmove(first, first + first_len, (size_t)n - first_len),
                            n -= (int)first_len;
                else if (how == 2)
                        first[0] = XFTP_TLS_HANDSHAKE; /* an outer type TLS 1.3 has not here */
                else if (how == 3)
                        first[3] = 0x48; /* longer than any record may be */
                else
                        r->open.head_len = 1; /* data inside a handshake message begun */
                r->raw_len += (size_t)n;
                assert_int_equal(reader_take(r, &p, out), how < 2 ? -EBADMSG : -EPROTO);
                free(plain);
                xftp_tls_open_free(&r->open);
                pair_close(&p);
        }
        free(out);
        free(r);
}

/* Handshake messages after the handshake: only tickets and a KeyUpdate ending its record;
 * nothing else in between a message's parts. */
static void opens_only_known_messages(void **state)
{
        static const uint8_t secret[32] = {1};
        struct xftp_tls_open o;
        const uint8_t client_hello[] = {1, 0, 0, 1, 0};
        const uint8_t update_not_last[] = {24, 0, 0, 1, 0, 4};
        const uint8_t update_long[] = {24, 0, 0, 2, 0, 0};
        const uint8_t update_asks[] = {24, 0, 0, 1, 1}, update_not[] = {24, 0, 0, 1, 0};
        const uint8_t ticket_head[] = {4, 0, 1, 0}; /* 256 bytes to follow */

        (void)state;
        assert_int_equal(xftp_tls_open_init(&o, NID_aes_128_gcm, EVP_sha256(), secret, 32), 0);
        assert_int_equal(xftp_tls_open_handshake(&o, client_hello, sizeof(client_hello)), -EPROTO);
        assert_int_equal(xftp_tls_open_handshake(&o, update_not_last, sizeof(update_not_last)),
                         -EPROTO);
        xftp_tls_open_free(&o);
        assert_int_equal(xftp_tls_open_init(&o, NID_aes_128_gcm, EVP_sha256(), secret, 32), 0);
        assert_int_equal(xftp_tls_open_handshake(&o, update_long, sizeof(update_long)), -EPROTO);
        xftp_tls_open_free(&o);
        /* A KeyUpdate asking for ours says so; one that does not, does not. */
        assert_int_equal(xftp_tls_open_init(&o, NID_aes_128_gcm, EVP_sha256(), secret, 32), 0);
        assert_int_equal(xftp_tls_open_handshake(&o, update_asks, sizeof(update_asks)),
                         XFTP_TLS_UPDATE_ASKED);
        assert_int_equal(xftp_tls_open_handshake(&o, update_not, sizeof(update_not)), 0);
        /* Its header in one record and its byte in the next, which it ends: taken (RFC
         * 8446 5.1 lets any handshake message be split); a record between, or more after
         * the byte, are not. */
        assert_int_equal(xftp_tls_open_handshake(&o, update_asks, 4), 0);
        assert_int_equal(xftp_tls_open_handshake(&o, update_asks + 4, 1), XFTP_TLS_UPDATE_ASKED);
        assert_int_equal(xftp_tls_open_handshake(&o, update_not, 2), 0);
        assert_int_equal(xftp_tls_open_handshake(&o, update_not + 2, 2), 0);
        assert_int_equal(xftp_tls_open_handshake(&o, update_not + 4, 1), 0);
        assert_int_equal(xftp_tls_open_handshake(&o, update_asks, 4), 0);
        assert_int_equal(xftp_tls_open_handshake(&o, update_not_last + 4, 2), -EPROTO);
        xftp_tls_open_free(&o);
        assert_int_equal(xftp_tls_open_init(&o, NID_aes_128_gcm, EVP_sha256(), secret, 32), 0);
        assert_int_equal(xftp_tls_open_handshake(&o, ticket_head, 0), -EPROTO); /* empty */
        assert_int_equal(xftp_tls_open_handshake(&o, ticket_head, sizeof(ticket_head)), 0);
        assert_int_equal(o.skip, 256);
        xftp_tls_open_free(&o);
        /* Suites and secrets it does not take. */
        assert_int_equal(xftp_tls_open_init(&o, NID_aes_128_ccm, EVP_sha256(), secret, 32),
                         -ENOTSUP);
        assert_int_equal(xftp_tls_open_init(&o, NID_aes_128_gcm, EVP_sha384(), secret, 32),
                         -ENOTSUP);
        xftp_tls_open_free(&o);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_prestate(one_suite, (void *)&suites[0]),
            cmocka_unit_test_prestate(one_suite, (void *)&suites[1]),
            cmocka_unit_test_prestate(one_suite, (void *)&suites[2]),
            cmocka_unit_test_prestate(one_suite, (void *)&suites[3]),
            cmocka_unit_test_prestate(one_suite, (void *)&suites[4]),
            cmocka_unit_test_prestate(one_suite, (void *)&suites[5]),
            cmocka_unit_test(changed_record_refused),
            cmocka_unit_test(offers_refused),
            cmocka_unit_test_prestate(opens_suite, (void *)&suites[0]),
            cmocka_unit_test_prestate(opens_suite, (void *)&suites[1]),
            cmocka_unit_test_prestate(opens_suite, (void *)&suites[2]),
            cmocka_unit_test(opens_nothing_forged),
            cmocka_unit_test(opens_only_known_messages),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
