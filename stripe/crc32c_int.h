/* The CRC-32C implementations behind ds_crc32c, for the tests and for reports of which one
 * runs. Not installed. */
#ifndef DS_CRC32C_INT_H
#define DS_CRC32C_INT_H

#include <stddef.h>
#include <stdint.h>

struct crc32c_impl {
        const char *name; /* "table", "slice8", "sse42": the values DS_CRC32C takes */
        /* Continues a CRC kept inverted, as the register is: ds_crc32c inverts around it. */
        uint32_t (*update)(uint32_t crc, const uint8_t *p, size_t len);
};

/* The implementations this CPU can run, byte table first; *count gets how many. */
const struct crc32c_impl *crc32c_impls(unsigned *count);

/* The implementation of that name this CPU can run, or NULL. */
const struct crc32c_impl *crc32c_find(const char *name);

/* The one ds_crc32c uses, chosen at first use: the one DS_CRC32C names when this CPU can
 * run it, else the fastest measured on this machine. */
const struct crc32c_impl *crc32c_chosen(void);

#endif
