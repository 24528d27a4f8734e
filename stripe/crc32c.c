/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of member headers
 * and member data. The SSE4.2 crc32 instruction does 8 bytes a step (several GB/s, well
 * above a disk); the table is the portable path. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <dragstrip/stripe_header.h>

static uint32_t crc_table[256];

static void table_init(void)
{
        for (uint32_t i = 0; i < 256; i++) {
                uint32_t crc = i;
                for (int bit = 0; bit < 8; bit++)
                        crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
                crc_table[i] = crc;
        }
}

static uint32_t crc_by_table(uint32_t crc, const uint8_t *p, size_t len)
{
        while (len--)
                crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
        return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_by_sse42(uint32_t crc, const uint8_t *p,
                                                               size_t len)
{
        uint64_t wide = crc;
        while (len >= 8) {
                uint64_t word;
                memcpy(&word, p, 8);
                wide = __builtin_ia32_crc32di(wide, word);
                p += 8;
                len -= 8;
        }
        crc = (uint32_t)wide;
        while (len--)
                crc = __builtin_ia32_crc32qi(crc, *p++);
        return crc;
}
#endif

static uint32_t (*crc_impl)(uint32_t, const uint8_t *, size_t);

__attribute__((constructor)) static void crc_choose(void)
{
        table_init();
        crc_impl = crc_by_table;
#if defined(__x86_64__)
        __builtin_cpu_init();
        if (__builtin_cpu_supports("sse4.2"))
                crc_impl = crc_by_sse42;
#endif
}

uint32_t ds_crc32c(uint32_t crc, const void *data, size_t len)
{
        return ~crc_impl(~crc, data, len);
}
