/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of member headers
 * and member data, in three implementations: a byte table (the reference), slicing-by-8
 * (eight tables, eight bytes a step, plain loads and xors) and the SSE4.2 crc32
 * instruction. The instruction is the fastest on real CPUs, but under emulation (qemu TCG)
 * it can be the slowest, so the choice is made by timing each at first use, not by CPUID. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <dragstrip/clock.h>
#include <dragstrip/stripe_header.h>

#include "crc32c_int.h"

#define PROBE_BYTES  (64u << 10)
#define PROBE_ROUNDS 3 /* best of: one preemption must not decide */
#define IMPLS_MAX    3

static uint32_t slice_table[8][256]; /* [0] is the byte table */

static void tables_init(void)
{
        for (uint32_t i = 0; i < 256; i++) {
                uint32_t crc = i;
                for (int bit = 0; bit < 8; bit++)
                        crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
                slice_table[0][i] = crc;
        }
        /* slice_table[k][b]: byte b followed by k zero bytes. */
        for (int k = 1; k < 8; k++)
                for (int i = 0; i < 256; i++)
                        slice_table[k][i] = (slice_table[k - 1][i] >> 8) ^
                                            slice_table[0][slice_table[k - 1][i] & 0xff];
}

static uint32_t crc_by_table(uint32_t crc, const uint8_t *p, size_t len)
{
        while (len--)
                crc = slice_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
        return crc;
}

/* Little-endian by construction, whatever the CPU; compilers make it one load. */
static uint32_t load_le32(const uint8_t *p)
{
        return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint32_t crc_by_slice8(uint32_t crc, const uint8_t *p, size_t len)
{
        const uint32_t(*t)[256] = slice_table;

        while (len >= 8) {
                uint32_t lo = crc ^ load_le32(p), hi = load_le32(p + 4);
                crc = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^
                      t[4][lo >> 24] ^ t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^
                      t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
                p += 8;
                len -= 8;
        }
        return crc_by_table(crc, p, len);
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

static struct crc32c_impl impls[IMPLS_MAX];
static unsigned impl_count;
static const struct crc32c_impl *chosen;
static pthread_once_t chosen_once = PTHREAD_ONCE_INIT;

__attribute__((constructor)) static void impls_init(void)
{
        tables_init();
        impls[impl_count++] = (struct crc32c_impl){"table", crc_by_table};
        impls[impl_count++] = (struct crc32c_impl){"slice8", crc_by_slice8};
#if defined(__x86_64__)
        __builtin_cpu_init();
        if (__builtin_cpu_supports("sse4.2"))
                impls[impl_count++] = (struct crc32c_impl){"sse42", crc_by_sse42};
#endif
}

const struct crc32c_impl *crc32c_impls(unsigned *count)
{
        *count = impl_count;
        return impls;
}

const struct crc32c_impl *crc32c_find(const char *name)
{
        for (unsigned i = 0; i < impl_count; i++)
                if (strcmp(impls[i].name, name) == 0)
                        return &impls[i];
        return NULL;
}

/* Times every implementation over the same 64 KiB, a few ms in all even under emulation. */
static const struct crc32c_impl *fastest(void)
{
        static uint8_t probe[PROBE_BYTES];
        uint64_t best_ns[IMPLS_MAX];
        volatile uint32_t sink;
        unsigned best = 0;

        for (size_t i = 0; i < sizeof(probe); i++)
                probe[i] = (uint8_t)(i * 131u + 7u);
        for (unsigned i = 0; i < impl_count; i++)
                best_ns[i] = UINT64_MAX;
        for (int round = 0; round < PROBE_ROUNDS; round++) {
                for (unsigned i = 0; i < impl_count; i++) {
                        uint64_t start = ds_now_ns();
                        sink = impls[i].update(~0u, probe, sizeof(probe));
                        uint64_t ns = ds_now_ns() - start;
                        if (ns < best_ns[i])
                                best_ns[i] = ns;
                }
        }
        (void)sink;
        for (unsigned i = 1; i < impl_count; i++)
                if (best_ns[i] < best_ns[best])
                        best = i;
        return &impls[best];
}

static void choose(void)
{
        const char *name = getenv("DS_CRC32C");

        chosen = name ? crc32c_find(name) : NULL;
        if (!chosen)
                chosen = fastest();
}

const struct crc32c_impl *crc32c_chosen(void)
{
        pthread_once(&chosen_once, choose);
        return chosen;
}

uint32_t ds_crc32c(uint32_t crc, const void *data, size_t len)
{
        return ~crc32c_chosen()->update(~crc, data, len);
}
