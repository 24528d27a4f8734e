/* What xftp's two TLS record layers (tls_seal.h, tls_open.h) share: the record's format
 * (RFC 8446 5, RFC 5246 6.2) and the TLS 1.3 key schedule's steps they take, a traffic
 * secret's key and IV (7.3), the secret after a KeyUpdate (7.2), each an
 * HKDF-Expand-Label (7.1) with the suite's hash, and the per-record nonce (5.3). */
#ifndef XFTP_TLS_RECORD_H
#define XFTP_TLS_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

#define XFTP_TLS_HEADER 5u
#define XFTP_TLS_TAG    16u
#define XFTP_TLS_IV_LEN 12u
/* The most plaintext one record carries (2^14). */
#define XFTP_TLS_RECORD_PLAIN 16384u
/* The longest record TLS 1.3 allows: 2^14 of plaintext and 256 of type, padding, tag. */
#define XFTP_TLS_RECORD_MAX (XFTP_TLS_HEADER + XFTP_TLS_RECORD_PLAIN + 256u)
/* Record types. */
#define XFTP_TLS_ALERT       21u
#define XFTP_TLS_HANDSHAKE   22u
#define XFTP_TLS_APPLICATION 23u

/* The key (key_len bytes, at most the hash's length) and IV of the traffic secret
 * (secret_len bytes, the hash md's length). Returns 0 or a negative errno. */
int xftp_tls13_traffic_keys(const EVP_MD *md, const uint8_t *secret, size_t secret_len,
                            uint8_t *key, size_t key_len, uint8_t iv[XFTP_TLS_IV_LEN]);

/* The next traffic secret after secret, into next (secret_len bytes). Returns 0 or a
 * negative errno. */
int xftp_tls13_next_secret(const EVP_MD *md, const uint8_t *secret, size_t secret_len,
                           uint8_t *next);

/* The nonce of record number seq: iv with seq, big-endian, XORed into its last 8 bytes
 * (TLS 1.3 and ChaCha20-Poly1305 under TLS 1.2). */
void xftp_tls_nonce(const uint8_t iv[XFTP_TLS_IV_LEN], uint64_t seq,
                    uint8_t nonce[XFTP_TLS_IV_LEN]);

#endif
