/* TLS 1.3 records opened in user space (tls_open.h). */
#include "tls_open.h"

#include <errno.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/obj_mac.h>

#define TYPE_NEW_SESSION_TICKET 4u
#define TYPE_KEY_UPDATE         24u

/* The key and IV of the current secret, from sequence 0. */
static int derive(struct xftp_tls_open *o)
{
        uint8_t key[32];
        int key_len = EVP_CIPHER_get_key_length(o->cipher);
        int rc = key_len <= (int)sizeof(key) ? 0 : -EINVAL;

        if (rc == 0)
                rc = xftp_tls13_traffic_keys(o->md, o->secret, o->secret_len, key, (size_t)key_len,
                                             o->iv);
        if (rc == 0 && EVP_DecryptInit_ex(o->ctx, o->cipher, NULL, key, NULL) != 1)
                rc = -EPROTO;
        OPENSSL_cleanse(key, sizeof(key));
        o->seq = 0;
        return rc;
}

int xftp_tls_open_init(struct xftp_tls_open *o, int cipher_nid, const EVP_MD *md,
                       const uint8_t *secret, size_t secret_len)
{
        *o = (struct xftp_tls_open){0};
        switch (cipher_nid) {
        case NID_aes_128_gcm:
                o->cipher = EVP_aes_128_gcm();
                break;
        case NID_aes_256_gcm:
                o->cipher = EVP_aes_256_gcm();
                break;
        case NID_chacha20_poly1305:
                o->cipher = EVP_chacha20_poly1305();
                break;
        default:
                return -ENOTSUP;
        }
        if (!md || secret_len != (size_t)EVP_MD_get_size(md) || secret_len > sizeof(o->secret))
                return -ENOTSUP;
        o->md = md;
        memcpy(o->secret, secret, secret_len);
        o->secret_len = secret_len;
        if (!(o->ctx = EVP_CIPHER_CTX_new()))
                return -ENOMEM;
        int rc = derive(o);
        if (rc < 0)
                xftp_tls_open_free(o);
        return rc < 0 ? -ENOTSUP : 0;
}

void xftp_tls_open_free(struct xftp_tls_open *o)
{
        EVP_CIPHER_CTX_free(o->ctx);
        OPENSSL_cleanse(o, sizeof(*o));
}

ssize_t xftp_tls_record_len(const uint8_t *header)
{
        size_t body = (size_t)header[3] << 8 | header[4];

        if (header[0] != XFTP_TLS_APPLICATION || header[1] != 3 || header[2] != 3 ||
            body < XFTP_TLS_TAG + 1 || XFTP_TLS_HEADER + body > XFTP_TLS_RECORD_MAX)
                return -EPROTO;
        return (ssize_t)(XFTP_TLS_HEADER + body);
}

ssize_t xftp_tls_open(struct xftp_tls_open *o, const uint8_t *rec, size_t rec_len, uint8_t *out,
                      uint8_t *type)
{
        size_t sealed = rec_len - XFTP_TLS_HEADER - XFTP_TLS_TAG;
        uint8_t nonce[XFTP_TLS_IV_LEN];
        int outl = 0, last = 0;

        if (o->seq == UINT64_MAX)
                return -EBADMSG;
        xftp_tls_nonce(o->iv, o->seq, nonce);
        if (EVP_DecryptInit_ex(o->ctx, NULL, NULL, NULL, nonce) != 1 ||
            EVP_DecryptUpdate(o->ctx, NULL, &outl, rec, XFTP_TLS_HEADER) != 1 ||
            EVP_DecryptUpdate(o->ctx, out, &outl, rec + XFTP_TLS_HEADER, (int)sealed) != 1 ||
            (size_t)outl != sealed ||
            EVP_CIPHER_CTX_ctrl(o->ctx, EVP_CTRL_AEAD_SET_TAG, XFTP_TLS_TAG,
                                (void *)(rec + rec_len - XFTP_TLS_TAG)) != 1 ||
            EVP_DecryptFinal_ex(o->ctx, out + outl, &last) != 1 || last != 0)
                return -EBADMSG;
        o->seq++;
        /* The content, its type, then zeros of padding (RFC 8446 5.4). */
        size_t n = sealed;
        while (n > 0 && out[n - 1] == 0)
                n--;
        if (n == 0 || n - 1 > XFTP_TLS_RECORD_PLAIN)
                return -EPROTO;
        *type = out[n - 1];
        /* A handshake message, once begun, ends before any other record (5.1). */
        if (*type != XFTP_TLS_HANDSHAKE && (o->head_len > 0 || o->skip > 0))
                return -EPROTO;
        return (ssize_t)(n - 1);
}

/* The next keys (RFC 8446 7.2). */
static int key_update(struct xftp_tls_open *o)
{
        uint8_t next[EVP_MAX_MD_SIZE];
        int rc = xftp_tls13_next_secret(o->md, o->secret, o->secret_len, next);

        if (rc == 0) {
                memcpy(o->secret, next, o->secret_len);
                rc = derive(o);
        }
        OPENSSL_cleanse(next, sizeof(next));
        return rc < 0 ? -EPROTO : 0;
}

int xftp_tls_open_handshake(struct xftp_tls_open *o, const uint8_t *content, size_t len)
{
        size_t at = 0;

        if (len == 0)
                return -EPROTO; /* no empty handshake records (5.1) */
        while (at < len) {
                if (o->skip > 0) { /* a ticket's rest */
                        size_t take = len - at < o->skip ? len - at : o->skip;
                        o->skip -= (uint32_t)take;
                        at += take;
                        continue;
                }
                o->head[o->head_len++] = content[at++];
                if (o->head_len < 4)
                        continue;
                uint32_t body = (uint32_t)o->head[1] << 16 | (uint32_t)o->head[2] << 8 | o->head[3];
                if (o->head[0] == TYPE_NEW_SESSION_TICKET) {
                        o->head_len = 0;
                        o->skip = body;
                        continue;
                }
                if (o->head[0] != TYPE_KEY_UPDATE || body != 1)
                        return -EPROTO;
                if (o->head_len < 5)
                        continue; /* its one byte, here or in the next record */
                o->head_len = 0;
                /* It ends its record: what follows is under the next keys (5.1). */
                if (at != len || o->head[4] > 1)
                        return -EPROTO;
                int rc = key_update(o);
                return rc < 0 ? rc : o->head[4] ? XFTP_TLS_UPDATE_ASKED : 0;
        }
        return 0;
}
