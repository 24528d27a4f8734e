/* libFuzzer target for the command-line parsers of sizes, rates and durations.
 * Besides memory errors it checks what each parser promises on success: a size within
 * its bounds that formats back to itself, a finite positive rate, a duration within
 * (0, one year]. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <dragstrip/size.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_size(const char *text)
{
        uint64_t value;
        if (ds_size_parse(text, 0, UINT64_MAX, &value) != 0)
                return;

        char formatted[32];
        ds_size_format(formatted, sizeof(formatted), value);
        /* Exact forms (no decimal point) must read back to the same count. */
        uint64_t again;
        if (!strchr(formatted, '.') &&
            (ds_size_parse(formatted, 0, UINT64_MAX, &again) != 0 || again != value))
                __builtin_trap();
        /* Bounds are inclusive and enforced. */
        if (ds_size_parse(text, value, value, &again) != 0 || again != value)
                __builtin_trap();
        if (value > 0 && ds_size_parse(text, 0, value - 1, &again) == 0)
                __builtin_trap();
}

static void check_rate(const char *text)
{
        double bits_per_s;
        if (ds_rate_parse(text, &bits_per_s) == 0 && !(bits_per_s > 0 && isfinite(bits_per_s)))
                __builtin_trap();
}

static void check_duration(const char *text)
{
        double seconds;
        if (ds_duration_parse(text, &seconds) == 0 &&
            !(seconds > 0 && seconds <= 365.0 * 24 * 3600))
                __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        /* The parsers take C strings, as from argv: cut at the first NUL. */
        char *text = malloc(size + 1);
        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = '\0';
        check_size(text);
        check_rate(text);
        check_duration(text);
        free(text);
        return 0;
}
