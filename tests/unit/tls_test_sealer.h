/* For the TLS tests: a BIO that takes OpenSSL's sending keys as a socket under kernel TLS
 * would (SSL_OP_ENABLE_KTLS) and from then on seals what OpenSSL writes with xftp's sealer
 * (xftp/common/tls_seal.h), so that a test's peer sends records the test can also make
 * itself. Before the keys, OpenSSL's records pass as they are. Where the bytes go is the
 * test's: an fd (fd >= 0) or a BIO. Include after cmocka.h. */
#ifndef TLS_TEST_SEALER_H
#define TLS_TEST_SEALER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include <openssl/bio.h>

#include "tls_seal.h"

/* OpenSSL 3's controls for a BIO under kernel TLS (its internal bio.h). */
#define CTRL_SET_KTLS        72
#define CTRL_SET_KTLS_TYPE   74
#define CTRL_CLEAR_KTLS_TYPE 75

struct test_sealer {
        int fd;  /* where the bytes go, or -1 */
        BIO *to; /* else here */
        struct xftp_tls_seal seal;
        bool sealing; /* the keys were taken */
        uint8_t type; /* the next message's record type */
};

static inline void test_sealer_put(struct test_sealer *s, const void *bytes, size_t len)
{
        for (size_t done = 0; done < len;) {
                int n = s->fd >= 0
                            ? (int)write(s->fd, (const char *)bytes + done, len - done)
                            : BIO_write(s->to, (const char *)bytes + done, (int)(len - done));
                assert_true(n > 0);
                done += (size_t)n;
        }
}

/* Seals len bytes of record type type at plain and sends the records. */
static inline void test_sealer_send(struct test_sealer *s, uint8_t type, const void *plain,
                                    size_t len)
{
        uint8_t *out = malloc(xftp_tls_sealed_max(len));
        assert_non_null(out);
        ssize_t made = xftp_tls_seal(&s->seal, type, plain, len, out);
        assert_true(made > 0);
        test_sealer_put(s, out, (size_t)made);
        free(out);
}

static inline int test_sealer_write(BIO *bio, const char *in, int len)
{
        struct test_sealer *s = BIO_get_data(bio);

        if (s->sealing)
                test_sealer_send(s, s->type, in, (size_t)len);
        else
                test_sealer_put(s, in, (size_t)len);
        s->type = 23;
        return len;
}

static inline long test_sealer_ctrl(BIO *bio, int cmd, long num, void *ptr)
{
        struct test_sealer *s = BIO_get_data(bio);

        switch (cmd) {
        case CTRL_SET_KTLS: /* num: the sending keys */
                if (num == 0 || xftp_tls_seal_init(&s->seal, ptr) < 0)
                        return 0;
                s->sealing = true;
                s->type = 23;
                return 1;
        case BIO_CTRL_GET_KTLS_SEND:
                return s->sealing;
        case CTRL_SET_KTLS_TYPE:
                s->type = (uint8_t)num;
                return 0;
        case CTRL_CLEAR_KTLS_TYPE:
                s->type = 23;
                return 0;
        case BIO_CTRL_FLUSH:
                return 1;
        default:
                return 0;
        }
}

/* The BIO's method (freed by the caller with BIO_meth_free) and a BIO of it over s. */
static inline BIO *test_sealer_bio(struct test_sealer *s, BIO_METHOD **method)
{
        *method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_FILTER, "test sealer");
        assert_non_null(*method);
        BIO_meth_set_write(*method, test_sealer_write);
        BIO_meth_set_ctrl(*method, test_sealer_ctrl);
        BIO *bio = BIO_new(*method);
        assert_non_null(bio);
        BIO_set_data(bio, s);
        BIO_set_init(bio, 1);
        return bio;
}

#endif
