/* SHA-256 through libcrypto's EVP interface; CRC-32C through stripe's ds_crc32c, which
 * picks the fastest implementation for this CPU. */
#include "hash.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/evp.h>

#include <dragstrip/error.h>
#include <dragstrip/stripe_header.h>

#include "xfer.h"

static const char *const names[XFTP_HASH_COUNT] = {
    [XFTP_HASH_SHA256] = "SHA-256",
    [XFTP_HASH_CRC32C] = "CRC32C",
};

const char *xftp_hash_name(enum xftp_hash_algo algo)
{
        return algo < XFTP_HASH_COUNT ? names[algo] : "?";
}

int xftp_hash_parse(const char *name, enum xftp_hash_algo *out)
{
        if (strcasecmp(name, "SHA-256") == 0 || strcasecmp(name, "SHA256") == 0)
                *out = XFTP_HASH_SHA256;
        else if (strcasecmp(name, "CRC32C") == 0 || strcasecmp(name, "CRC-32C") == 0)
                *out = XFTP_HASH_CRC32C;
        else
                return -EINVAL;
        return 0;
}

int xftp_hash_begin(struct xftp_hash *hash, enum xftp_hash_algo algo)
{
        *hash = (struct xftp_hash){.algo = algo};
        if (algo != XFTP_HASH_SHA256)
                return algo == XFTP_HASH_CRC32C ? 0 : -EINVAL;
        EVP_MD_CTX *md = EVP_MD_CTX_new();
        if (!md)
                return -ENOMEM;
        if (EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
                EVP_MD_CTX_free(md);
                return -ENOMEM;
        }
        hash->md = md;
        return 0;
}

void xftp_hash_update(struct xftp_hash *hash, const void *data, size_t len)
{
        if (hash->algo == XFTP_HASH_CRC32C)
                hash->crc = ds_crc32c(hash->crc, data, len);
        else
                EVP_DigestUpdate(hash->md, data, len); /* cannot fail for SHA-256 in memory */
}

void xftp_hash_end(struct xftp_hash *hash, char hex[XFTP_HASH_HEX_MAX])
{
        if (hash->algo == XFTP_HASH_CRC32C) {
                snprintf(hex, XFTP_HASH_HEX_MAX, "%08x", hash->crc);
                return;
        }
        unsigned char digest[EVP_MAX_MD_SIZE];
        unsigned len = 0;
        EVP_DigestFinal_ex(hash->md, digest, &len);
        for (unsigned i = 0; i < len && 2 * i + 2 < XFTP_HASH_HEX_MAX; i++)
                snprintf(hex + 2 * i, 3, "%02x", digest[i]);
        xftp_hash_abort(hash);
}

void xftp_hash_abort(struct xftp_hash *hash)
{
        EVP_MD_CTX_free(hash->md);
        hash->md = NULL;
}

int xftp_hash_file(struct xftp_xfile *file, enum xftp_hash_algo algo, uint64_t start, uint64_t end,
                   size_t block, atomic_bool *stop, char hex[XFTP_HASH_HEX_MAX],
                   uint64_t *hashed_end, struct ds_error *err)
{
        struct xftp_hash hash;
        uint64_t at = start;
        void *buf = NULL;
        int rc;

        if (block == 0)
                block = XFTP_XFER_BLOCK;
        if (end < start)
                return ds_fail(err, -EINVAL, "hash range %llu-%llu", (unsigned long long)start,
                               (unsigned long long)end);
        rc = posix_memalign(&buf, 4096, block);
        if (rc != 0)
                return ds_fail(err, -rc, "hash buffer of %zu bytes", block);
        rc = xftp_hash_begin(&hash, algo);
        if (rc < 0) {
                free(buf);
                return ds_fail(err, rc, "%s", xftp_hash_name(algo));
        }
        while (at < end) {
                if (stop && atomic_load_explicit(stop, memory_order_relaxed)) {
                        rc = ds_fail(err, -EINTR, "hash stopped");
                        break;
                }
                size_t want = end - at < block ? (size_t)(end - at) : block;
                ssize_t got = file->ops->read_at(file, buf, want, at);
                if (got < 0) {
                        rc = ds_fail(err, (int)got, "read at %llu", (unsigned long long)at);
                        break;
                }
                xftp_hash_update(&hash, buf, (size_t)got);
                at += (uint64_t)got;
                if ((size_t)got < want)
                        break; /* the end of the file */
        }
        free(buf);
        if (rc < 0) {
                xftp_hash_abort(&hash);
                return rc;
        }
        xftp_hash_end(&hash, hex);
        if (hashed_end)
                *hashed_end = at;
        return 0;
}
