/* TLS records sealed in user space (tls_seal.h). */
#include "tls_seal.h"

#include <errno.h>
#include <linux/tls.h>
#include <string.h>

#include <openssl/crypto.h>

#define EXPLICIT_LEN 8u

/* OpenSSL's offer (its ktls.h, on Linux): the kernel's structure for the suite, and its
 * length, which says which member is meant. */
struct ktls_offer {
        union {
                struct tls_crypto_info info;
                struct tls12_crypto_info_aes_gcm_128 gcm128;
                struct tls12_crypto_info_aes_gcm_256 gcm256;
                struct tls12_crypto_info_aes_ccm_128 ccm128;
                struct tls12_crypto_info_chacha20_poly1305 chacha;
        };
        size_t len;
};

/* The keys of one offer, wherever the suite's structure keeps them. */
struct offer_keys {
        const EVP_CIPHER *cipher;
        const unsigned char *key, *salt, *iv, *rec_seq;
        size_t salt_len, iv_len;
};

static int offer_keys(const struct ktls_offer *o, struct offer_keys *k)
{
        switch (o->info.cipher_type) {
        case TLS_CIPHER_AES_GCM_128:
                if (o->len != sizeof(o->gcm128))
                        return -ENOTSUP;
                *k = (struct offer_keys){EVP_aes_128_gcm(),
                                         o->gcm128.key,
                                         o->gcm128.salt,
                                         o->gcm128.iv,
                                         o->gcm128.rec_seq,
                                         4,
                                         8};
                return 0;
        case TLS_CIPHER_AES_GCM_256:
                if (o->len != sizeof(o->gcm256))
                        return -ENOTSUP;
                *k = (struct offer_keys){EVP_aes_256_gcm(),
                                         o->gcm256.key,
                                         o->gcm256.salt,
                                         o->gcm256.iv,
                                         o->gcm256.rec_seq,
                                         4,
                                         8};
                return 0;
        case TLS_CIPHER_CHACHA20_POLY1305:
                if (o->len != sizeof(o->chacha))
                        return -ENOTSUP;
                *k = (struct offer_keys){EVP_chacha20_poly1305(),
                                         o->chacha.key,
                                         NULL,
                                         o->chacha.iv,
                                         o->chacha.rec_seq,
                                         0,
                                         12};
                return 0;
        default:
                return -ENOTSUP;
        }
}

int xftp_tls_seal_init(struct xftp_tls_seal *s, const void *crypto_info)
{
        const struct ktls_offer *o = crypto_info;
        struct offer_keys k;

        *s = (struct xftp_tls_seal){0};
        if (!o || (o->info.version != TLS_1_2_VERSION && o->info.version != TLS_1_3_VERSION) ||
            offer_keys(o, &k) < 0)
                return -ENOTSUP;
        s->tls13 = o->info.version == TLS_1_3_VERSION;
        /* TLS 1.2 GCM sends the nonce's last 8 bytes with each record: a counter from the
         * offered value, as the kernel keeps it. Every other case derives the nonce from
         * the sequence (RFC 7905, 8446 5.3). */
        s->explicit_nonce = !s->tls13 && k.salt_len == 4;
        if (k.salt_len)
                memcpy(s->iv, k.salt, k.salt_len);
        memcpy(s->iv + k.salt_len, k.iv, k.iv_len);
        for (unsigned i = 0; i < 8; i++)
                s->seq = s->seq << 8 | k.rec_seq[i];
        if (!(s->ctx = EVP_CIPHER_CTX_new()))
                return -ENOMEM;
        if (EVP_EncryptInit_ex(s->ctx, k.cipher, NULL, k.key, NULL) != 1) {
                xftp_tls_seal_free(s);
                return -ENOTSUP;
        }
        return 0;
}

int xftp_tls_seal_next_keys(struct xftp_tls_seal *s, const EVP_MD *md, const uint8_t *secret,
                            size_t secret_len)
{
        uint8_t key[EVP_MAX_KEY_LENGTH];

        if (!s->ctx || !s->tls13)
                return -ENOTSUP;
        int key_len = EVP_CIPHER_CTX_get_key_length(s->ctx);
        int rc = key_len > 0 && (size_t)key_len <= sizeof(key) ? 0 : -EPROTO;
        if (rc == 0)
                rc = xftp_tls13_traffic_keys(md, secret, secret_len, key, (size_t)key_len, s->iv);
        if (rc == 0 && EVP_EncryptInit_ex(s->ctx, NULL, NULL, key, NULL) != 1)
                rc = -EPROTO;
        OPENSSL_cleanse(key, sizeof(key));
        if (rc < 0) {
                xftp_tls_seal_free(s);
                return rc;
        }
        s->seq = 0;
        return 0;
}

void xftp_tls_seal_free(struct xftp_tls_seal *s)
{
        EVP_CIPHER_CTX_free(s->ctx); /* wipes the key schedule */
        OPENSSL_cleanse(s, sizeof(*s));
}

size_t xftp_tls_sealed_max(size_t len)
{
        size_t records = len == 0 ? 1 : (len + XFTP_TLS_RECORD_PLAIN - 1) / XFTP_TLS_RECORD_PLAIN;
        return len + records * XFTP_TLS_RECORD_EXTRA;
}

static void put_be64(uint8_t *at, uint64_t v)
{
        for (int i = 7; i >= 0; i--, v >>= 8)
                at[i] = (uint8_t)v;
}

/* One record of n <= XFTP_TLS_RECORD_PLAIN bytes at out; returns its length or 0. */
static size_t seal_record(struct xftp_tls_seal *s, uint8_t type, const uint8_t *plain, size_t n,
                          uint8_t *out)
{
        uint8_t nonce[XFTP_TLS_IV_LEN], aad[13], seq[8];
        size_t lead = s->explicit_nonce ? EXPLICIT_LEN : 0;
        size_t body = lead + n + (s->tls13 ? 1 : 0) + XFTP_TLS_TAG;
        uint8_t *sealed = out + XFTP_TLS_HEADER + lead;
        int outl = 0, more = 0;

        put_be64(seq, s->seq);
        if (s->explicit_nonce) {
                memcpy(nonce, s->iv, sizeof(nonce));
                memcpy(out + XFTP_TLS_HEADER, nonce + 4, EXPLICIT_LEN);
        } else {
                xftp_tls_nonce(s->iv, s->seq, nonce);
        }
        out[0] = s->tls13 ? XFTP_TLS_APPLICATION : type;
        out[1] = 3;
        out[2] = 3;
        out[3] = (uint8_t)(body >> 8);
        out[4] = (uint8_t)body;
        /* Additional data: TLS 1.3 the header as sent; TLS 1.2 the sequence, type, version
         * and plaintext length. */
        size_t aad_len = XFTP_TLS_HEADER;
        if (s->tls13) {
                memcpy(aad, out, XFTP_TLS_HEADER);
        } else {
                memcpy(aad, seq, 8);
                memcpy(aad + 8, out, 3);
                aad[11] = (uint8_t)(n >> 8);
                aad[12] = (uint8_t)n;
                aad_len = sizeof(aad);
        }
        if (EVP_EncryptInit_ex(s->ctx, NULL, NULL, NULL, nonce) != 1 ||
            EVP_EncryptUpdate(s->ctx, NULL, &outl, aad, (int)aad_len) != 1 ||
            EVP_EncryptUpdate(s->ctx, sealed, &outl, plain, (int)n) != 1 || (size_t)outl != n ||
            (s->tls13 &&
             (EVP_EncryptUpdate(s->ctx, sealed + n, &more, &type, 1) != 1 || more != 1)) ||
            EVP_EncryptFinal_ex(s->ctx, sealed + n + more, &outl) != 1 || outl != 0 ||
            EVP_CIPHER_CTX_ctrl(s->ctx, EVP_CTRL_AEAD_GET_TAG, XFTP_TLS_TAG, sealed + n + more) !=
                1)
                return 0;
        OPENSSL_cleanse(nonce, sizeof(nonce));
        s->seq++;
        if (s->explicit_nonce) /* the next explicit nonce: the last 8 bytes, plus one */
                for (int i = 11; i >= 4 && ++s->iv[i] == 0; i--)
                        ;
        return XFTP_TLS_HEADER + body;
}

ssize_t xftp_tls_seal(struct xftp_tls_seal *s, uint8_t type, const void *plain, size_t len,
                      void *out)
{
        const uint8_t *from = plain;
        uint8_t *to = out;
        size_t done = 0;

        if (!s->ctx)
                return -EPROTO;
        do {
                size_t n = len - done < XFTP_TLS_RECORD_PLAIN ? len - done : XFTP_TLS_RECORD_PLAIN;
                if (s->seq == UINT64_MAX)
                        return -EOVERFLOW;
                size_t made = seal_record(s, type, from + done, n, to);
                if (made == 0)
                        return -EPROTO;
                to += made;
                done += n;
        } while (done < len);
        return to - (uint8_t *)out;
}
