/* TLS records sealed in user space with the keys OpenSSL hands to the kernel.
 *
 * Where the kernel has no TLS, OpenSSL's own record layer copies every byte it sends into
 * a record buffer of its own before encrypting it there; read from a file's pages, that
 * copy was the sender's largest cost. Sealed here, a record is encrypted straight from
 * where its bytes lie (the page cache, a pool buffer) into the bytes that go to the
 * socket. OpenSSL still runs the handshake and every message of its own (alerts,
 * post-handshake messages): it offers the keys of the sending direction as it would offer
 * them to the kernel (SSL_OP_ENABLE_KTLS), and from then on sends its messages as
 * plaintext for this layer to seal, in order with the data, under one sequence.
 *
 * AEAD suites only, as the kernel: AES-128-GCM, AES-256-GCM and ChaCha20-Poly1305, under
 * TLS 1.2 and 1.3 (RFC 5288, 7905, 8446). */
#ifndef XFTP_TLS_SEAL_H
#define XFTP_TLS_SEAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <openssl/evp.h>

#include "tls_record.h"

/* The most a record adds to its plaintext: header 5, explicit nonce 8 (TLS 1.2 GCM) or
 * inner type 1 (TLS 1.3), tag 16. */
#define XFTP_TLS_RECORD_EXTRA 29u

struct xftp_tls_seal {
        EVP_CIPHER_CTX *ctx; /* keyed once; each record sets its nonce */
        uint8_t
            iv[XFTP_TLS_IV_LEN]; /* XORed with the sequence; TLS 1.2 GCM: salt, explicit nonce */
        uint64_t seq;            /* the next record's sequence number */
        bool tls13;              /* the type rides inside the record, outer type 23 */
        bool explicit_nonce;     /* TLS 1.2 GCM: the nonce's last 8 bytes precede the record */
};

/* Takes the keys from crypto_info, OpenSSL's offer to the kernel (a struct
 * tls_crypto_info_all of its ktls.h: one of linux/tls.h's tls12_crypto_info_* and its
 * length). Returns 0, -ENOTSUP for an offer not understood (a suite, a version or a
 * layout this layer does not know: OpenSSL then seals its records itself), or -ENOMEM. */
int xftp_tls_seal_init(struct xftp_tls_seal *s, const void *crypto_info);

/* TLS 1.3's KeyUpdate: moves s to the keys of its direction's next traffic secret (of
 * secret_len bytes, hashed with md, the suite's), from sequence 0 (RFC 8446 7.2). OpenSSL
 * gives no new offer then, only the secret (its key log). Returns 0, -ENOTSUP when s is
 * not TLS 1.3, or -EPROTO (s then refuses to seal: its keys are gone). */
int xftp_tls_seal_next_keys(struct xftp_tls_seal *s, const EVP_MD *md, const uint8_t *secret,
                            size_t secret_len);

/* Frees what init made and wipes the keys. Safe on a zeroed or freed struct. */
void xftp_tls_seal_free(struct xftp_tls_seal *s);

/* The bytes the records of len bytes of plaintext take, at most. */
size_t xftp_tls_sealed_max(size_t len);

/* Seals len bytes of plaintext of record type type (23 application data, 21 alert, 22
 * handshake) into out, which has room for xftp_tls_sealed_max(len), in records of up to
 * XFTP_TLS_RECORD_PLAIN. Returns the bytes written, or a negative errno: -EOVERFLOW when
 * the sequence would wrap, -EPROTO when the cipher fails or s has no keys (nothing usable
 * written). */
ssize_t xftp_tls_seal(struct xftp_tls_seal *s, uint8_t type, const void *plain, size_t len,
                      void *out);

#endif
