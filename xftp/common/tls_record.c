/* The TLS record layers' shared steps (tls_record.h). */
#include "tls_record.h"

#include <errno.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/hmac.h>

/* HKDF-Expand-Label(secret, label, "", len), len no longer than the hash: one HMAC block
 * (HKDF-Expand's T(1)). */
static int expand_label(const EVP_MD *md, const uint8_t *secret, size_t secret_len,
                        const char *label, uint8_t *out, size_t len)
{
        uint8_t info[2 + 1 + 6 + 16 + 1 + 1], block[EVP_MAX_MD_SIZE];
        size_t label_len = strlen(label), at = 0;
        unsigned block_len = 0;

        if (label_len > 16 || len > (size_t)EVP_MD_get_size(md))
                return -EINVAL;
        info[at++] = (uint8_t)(len >> 8);
        info[at++] = (uint8_t)len;
        info[at++] = (uint8_t)(6 + label_len);
        memcpy(info + at, "tls13 ", 6);
        memcpy(info + at + 6, label, label_len);
        at += 6 + label_len;
        info[at++] = 0; /* no context */
        info[at++] = 1; /* T(1) */
        int ok = HMAC(md, secret, (int)secret_len, info, at, block, &block_len) && block_len >= len;
        if (ok)
                memcpy(out, block, len);
        OPENSSL_cleanse(block, sizeof(block));
        return ok ? 0 : -EPROTO;
}

int xftp_tls13_traffic_keys(const EVP_MD *md, const uint8_t *secret, size_t secret_len,
                            uint8_t *key, size_t key_len, uint8_t iv[XFTP_TLS_IV_LEN])
{
        int rc = expand_label(md, secret, secret_len, "key", key, key_len);
        return rc < 0 ? rc : expand_label(md, secret, secret_len, "iv", iv, XFTP_TLS_IV_LEN);
}

int xftp_tls13_next_secret(const EVP_MD *md, const uint8_t *secret, size_t secret_len,
                           uint8_t *next)
{
        return expand_label(md, secret, secret_len, "traffic upd", next, secret_len);
}

void xftp_tls_nonce(const uint8_t iv[XFTP_TLS_IV_LEN], uint64_t seq, uint8_t nonce[XFTP_TLS_IV_LEN])
{
        memcpy(nonce, iv, XFTP_TLS_IV_LEN);
        for (unsigned i = 0; i < 8; i++)
                nonce[XFTP_TLS_IV_LEN - 8 + i] ^= (uint8_t)(seq >> (56 - 8 * i));
}
