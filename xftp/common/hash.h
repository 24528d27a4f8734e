/* File hashes for HASH (draft-ietf-ftpext2-hash) and xftp --verify: SHA-256 through
 * libcrypto, and CRC-32C through stripe's implementation (the checksum striped members
 * carry), of a whole file or of a byte range. */
#ifndef XFTP_HASH_H
#define XFTP_HASH_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct ds_error;
struct xftp_xfile;

enum xftp_hash_algo { XFTP_HASH_SHA256, XFTP_HASH_CRC32C, XFTP_HASH_COUNT };

/* Room for the longest hex digest and its NUL. SHA-256 gives 64 lowercase hex digits;
 * CRC-32C gives 8, the CRC's value most significant digit first (as "%08x"). */
#define XFTP_HASH_HEX_MAX 65

/* "SHA-256", "CRC32C": the names of the draft and of FEAT's HASH line. */
const char *xftp_hash_name(enum xftp_hash_algo algo);
/* A name from a peer or a command line, case-insensitive; "SHA256" is taken for
 * "SHA-256" and "CRC-32C" for "CRC32C". Returns 0 or -EINVAL. */
int xftp_hash_parse(const char *name, enum xftp_hash_algo *out);

/* A running hash. Fields are private to hash.c. */
struct xftp_hash {
        enum xftp_hash_algo algo;
        uint32_t crc;
        void *md; /* EVP_MD_CTX for SHA-256 */
};

/* Starts a hash. Returns 0 or -ENOMEM. Every begun hash is ended with xftp_hash_end or
 * xftp_hash_abort, which free it. */
int xftp_hash_begin(struct xftp_hash *hash, enum xftp_hash_algo algo);
void xftp_hash_update(struct xftp_hash *hash, const void *data, size_t len);
/* Writes the digest as lowercase hex into hex and frees the hash. */
void xftp_hash_end(struct xftp_hash *hash, char hex[XFTP_HASH_HEX_MAX]);
void xftp_hash_abort(struct xftp_hash *hash);

/* Hashes the file's bytes [start, end) (end UINT64_MAX or past the end of the file: to the
 * end of the file) reading block bytes at a time through a page-aligned buffer (block 0:
 * 4 MiB). *hashed_end (may be NULL) gets where the hashed range really ended: the draft's
 * reply names it. stop (may be NULL) ends a long hash with -EINTR. Returns 0 or a negative
 * errno with err filled. */
int xftp_hash_file(struct xftp_xfile *file, enum xftp_hash_algo algo, uint64_t start, uint64_t end,
                   size_t block, atomic_bool *stop, char hex[XFTP_HASH_HEX_MAX],
                   uint64_t *hashed_end, struct ds_error *err);

#endif
