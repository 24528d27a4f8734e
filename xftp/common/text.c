/* Which bytes of a peer's text are safe to show (text.h). */
#include "text.h"

#include <string.h>

size_t xftp_text_char(const unsigned char *text, size_t i, size_t len, int *shown)
{
        static const uint32_t shortest[5] = {0, 0, 0x80, 0x800, 0x10000};
        unsigned char lead = text[i];
        size_t need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc2 ? 2 : 0;
        uint32_t code;

        *shown = 0;
        if (lead < 0x80) {
                *shown = lead >= 0x20 && lead != 0x7f;
                return 1;
        }
        if (need == 0 || lead > 0xf4 || need > len - i)
                return 0;
        code = lead & (0x7fu >> need);
        for (size_t k = 1; k < need; k++) {
                if ((text[i + k] & 0xc0) != 0x80)
                        return 0;
                code = code << 6 | (text[i + k] & 0x3fu);
        }
        if (code < shortest[need] || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff))
                return 0;
        *shown = code > 0x9f && code != 0x2028 && code != 0x2029;
        return need;
}

void xftp_text_clean(char *s, char bad)
{
        const unsigned char *in = (const unsigned char *)s;
        size_t len = strlen(s), out = 0;

        for (size_t i = 0; i < len;) {
                int shown;
                size_t n = xftp_text_char(in, i, len, &shown);
                if (n > 0 && shown) {
                        memmove(s + out, s + i, n);
                        out += n;
                } else {
                        s[out++] = bad;
                }
                i += n > 0 ? n : 1;
        }
        s[out] = '\0';
}
