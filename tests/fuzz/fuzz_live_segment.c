/* libFuzzer target for what tach does with a file found as /dev/shm/dragstrip.<pid>:
 * ds_live_parse over whatever bytes it holds. The input is copied to an 8-byte aligned
 * buffer of exactly its length, as a mapping would be, so a read past it is caught. */
#include <dragstrip/live.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static struct ds_live_view view;
        char note[128];
        void *copy = aligned_alloc(8, size ? (size + 7) / 8 * 8 : 8);
        if (!copy)
                return 0;
        memcpy(copy, data, size);
        /* Only size bytes are the segment's; the padding is never handed over. */
        int rc = ds_live_parse(copy, size, &view, note, sizeof(note));
        if (rc == 0 && view.slot_count > DS_LIVE_SLOTS)
                abort();
        free(copy);
        return 0;
}
