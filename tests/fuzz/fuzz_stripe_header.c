/* libFuzzer target for the stripe member header parser: any bytes, any length, must be
 * either rejected with a reason or decoded into fields that pass the layout's checks and
 * re-encode to the same block. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <dragstrip/stripe_header.h>
#include <dragstrip/stripe_layout.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct ds_stripe_header header;
        const char *why = NULL;
        uint8_t block[DS_STRIPE_HEADER_SIZE];

        if (ds_stripe_header_decode(data, size, &header, &why) != 0) {
                if (!why || !*why)
                        abort(); /* every rejection names its reason */
                return 0;
        }
        struct ds_stripe_layout layout = {.width = header.width, .unit = header.unit};
        if (!ds_stripe_layout_valid(&layout) || header.member >= header.width ||
            header.file_size > DS_STRIPE_MAX_SIZE)
                abort();
        ds_stripe_header_encode(&header, block);
        if (size < DS_STRIPE_HEADER_SIZE || memcmp(block, data, DS_STRIPE_HEADER_SIZE) != 0)
                abort(); /* an accepted header is exactly its own encoding */
        return 0;
}
