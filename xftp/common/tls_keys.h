/* TLS 1.3's key schedule, the steps xftp's own record layers take (tls_seal.h, tls_open.h):
 * a traffic secret's key and IV (RFC 8446 7.3), and the secret that follows it after a
 * KeyUpdate (7.2), each an HKDF-Expand-Label (7.1) with the suite's hash. */
#ifndef XFTP_TLS_KEYS_H
#define XFTP_TLS_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

#define XFTP_TLS_IV_LEN 12u

/* The key (key_len bytes, at most the hash's length) and IV of the traffic secret
 * (secret_len bytes, the hash md's length). Returns 0 or a negative errno. */
int xftp_tls13_traffic_keys(const EVP_MD *md, const uint8_t *secret, size_t secret_len,
                            uint8_t *key, size_t key_len, uint8_t iv[XFTP_TLS_IV_LEN]);

/* The next traffic secret after secret, into next (secret_len bytes). Returns 0 or a
 * negative errno. */
int xftp_tls13_next_secret(const EVP_MD *md, const uint8_t *secret, size_t secret_len,
                           uint8_t *next);

#endif
