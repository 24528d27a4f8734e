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

static const char *const names[DS_HASH_COUNT] = {
    [DS_HASH_SHA256] = "SHA-256",
    [DS_HASH_CRC32C] = "CRC32C",
};

const char *ds_hash_name(enum ds_hash_algo algo)
{
        return algo < DS_HASH_COUNT ? names[algo] : "?";
}

int ds_hash_parse(const char *name, enum ds_hash_algo *out)
{
        if (strcasecmp(name, "SHA-256") == 0 || strcasecmp(name, "SHA256") == 0)
                *out = DS_HASH_SHA256;
        else if (strcasecmp(name, "CRC32C") == 0 || strcasecmp(name, "CRC-32C") == 0)
                *out = DS_HASH_CRC32C;
        else
                return -EINVAL;
        return 0;
}

int ds_hash_begin(struct ds_hash *hash, enum ds_hash_algo algo)
{
        *hash = (struct ds_hash){.algo = algo};
        if (algo != DS_HASH_SHA256)
                return algo == DS_HASH_CRC32C ? 0 : -EINVAL;
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

void ds_hash_update(struct ds_hash *hash, const void *data, size_t len)
{
        if (hash->algo == DS_HASH_CRC32C)
                hash->crc = ds_crc32c(hash->crc, data, len);
        else
                EVP_DigestUpdate(hash->md, data, len); /* cannot fail for SHA-256 in memory */
}

void ds_hash_end(struct ds_hash *hash, char hex[DS_HASH_HEX_MAX])
{
        if (hash->algo == DS_HASH_CRC32C) {
                snprintf(hex, DS_HASH_HEX_MAX, "%08x", hash->crc);
                return;
        }
        unsigned char digest[EVP_MAX_MD_SIZE];
        unsigned len = 0;
        EVP_DigestFinal_ex(hash->md, digest, &len);
        for (unsigned i = 0; i < len && 2 * i + 2 < DS_HASH_HEX_MAX; i++)
                snprintf(hex + 2 * i, 3, "%02x", digest[i]);
        ds_hash_abort(hash);
}

void ds_hash_abort(struct ds_hash *hash)
{
        EVP_MD_CTX_free(hash->md);
        hash->md = NULL;
}

int ds_hash_file(struct ds_xfile *file, enum ds_hash_algo algo, uint64_t start, uint64_t end,
                 size_t block, atomic_bool *stop, char hex[DS_HASH_HEX_MAX], uint64_t *hashed_end,
                 struct ds_error *err)
{
        struct ds_hash hash;
        uint64_t at = start;
        void *buf = NULL;
        int rc;

        if (block == 0)
                block = DS_XFER_BLOCK;
        if (end < start)
                return ds_fail(err, -EINVAL, "hash range %llu-%llu", (unsigned long long)start,
                               (unsigned long long)end);
        rc = posix_memalign(&buf, 4096, block);
        if (rc != 0)
                return ds_fail(err, -rc, "hash buffer of %zu bytes", block);
        rc = ds_hash_begin(&hash, algo);
        if (rc < 0) {
                free(buf);
                return ds_fail(err, rc, "%s", ds_hash_name(algo));
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
                ds_hash_update(&hash, buf, (size_t)got);
                at += (uint64_t)got;
                if ((size_t)got < want)
                        break; /* the end of the file */
        }
        free(buf);
        if (rc < 0) {
                ds_hash_abort(&hash);
                return rc;
        }
        ds_hash_end(&hash, hex);
        if (hashed_end)
                *hashed_end = at;
        return 0;
}
