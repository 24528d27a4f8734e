/* TLS 1.3 records opened in user space, straight into the reader's buffer.
 *
 * OpenSSL's record layer reads each record into a buffer of its own, decrypts it there
 * and copies the plaintext out: on a TLS get, that copy was a tenth of the client's CPU,
 * on top of a read() per record. A data connection of TLS 1.3 reads its records itself
 * once the handshake is done, many with one read(), and opens each straight into the
 * caller's buffer when it fits. The keys come from the traffic secret OpenSSL reports
 * (its key log callback), derived as RFC 8446 7.3 says; post-handshake messages are taken
 * here too: a NewSessionTicket is passed over, a KeyUpdate moves to the next keys.
 *
 * AES-128-GCM, AES-256-GCM and ChaCha20-Poly1305. Everything in a record is the peer's
 * and checked: the header, the length, the tag, the inner type, the handshake messages. */
#ifndef XFTP_TLS_OPEN_H
#define XFTP_TLS_OPEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <openssl/evp.h>

#include "tls_record.h"

struct xftp_tls_open {
        EVP_CIPHER_CTX *ctx;
        const EVP_CIPHER *cipher;
        const EVP_MD *md; /* the suite's hash: the key schedule's */
        uint8_t secret[EVP_MAX_MD_SIZE];
        size_t secret_len;
        uint8_t iv[XFTP_TLS_IV_LEN];
        uint64_t seq;
        /* Post-handshake messages may span records: the header being read (a KeyUpdate's
         * with its one byte), and the bytes of a message still to pass over. */
        uint8_t head[5];
        size_t head_len;
        uint32_t skip;
};

/* Keys for reading from the peer's traffic secret (secret_len bytes, the length of the
 * suite's hash md) for the suite cipher_nid (NID_aes_128_gcm, NID_aes_256_gcm,
 * NID_chacha20_poly1305). Returns 0, -ENOTSUP for another suite, or -ENOMEM. */
int xftp_tls_open_init(struct xftp_tls_open *o, int cipher_nid, const EVP_MD *md,
                       const uint8_t *secret, size_t secret_len);

/* Frees what init made and wipes the keys. Safe on a zeroed or freed struct. */
void xftp_tls_open_free(struct xftp_tls_open *o);

/* The length of the record whose header is at header (XFTP_TLS_HEADER bytes), header
 * included, or -EPROTO for a header TLS 1.3 forbids after the handshake (a type other
 * than application data, another version, a length out of bounds). */
ssize_t xftp_tls_record_len(const uint8_t *header);

/* Opens the whole record at rec (rec_len bytes, as xftp_tls_record_len said) into out,
 * which has room for rec_len - XFTP_TLS_HEADER - XFTP_TLS_TAG bytes (all of them may be
 * written, before the record is known to be the peer's). Returns the length of its
 * content and sets *type, or -EBADMSG (the record is not the peer's, or not the next one)
 * or -EPROTO (no type, too long, another type inside a handshake message). */
ssize_t xftp_tls_open(struct xftp_tls_open *o, const uint8_t *rec, size_t rec_len, uint8_t *out,
                      uint8_t *type);

/* Takes the content of a handshake record: tickets passed over; a KeyUpdate, which must
 * end its record, moves to the next keys. Returns 0, XFTP_TLS_UPDATE_ASKED when that
 * KeyUpdate asks for one of ours before our next data (RFC 8446 4.6.3), or -EPROTO for
 * any other message or one malformed. */
#define XFTP_TLS_UPDATE_ASKED 1
int xftp_tls_open_handshake(struct xftp_tls_open *o, const uint8_t *content, size_t len);

#endif
