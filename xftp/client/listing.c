/* Listings and other server text: parsed without trusting a length, shown without
 * passing a control byte on. */
#include "listing.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

bool listing_entry(char *line, bool mlsd, char **name, bool *is_dir)
{
        line[strcspn(line, "\r")] = '\0';
        if (mlsd) {
                /* "fact=value;fact=value; name" (RFC 3659 7.2) */
                char *space = strchr(line, ' ');
                if (!space)
                        return false;
                *space = '\0';
                *name = space + 1;
                *is_dir = strcasestr(line, "type=dir;") != NULL;
                if (!*is_dir && !strcasestr(line, "type=file;"))
                        return false;
        } else {
                /* "drwxr-xr-x 2 user group 4096 Nov 23 19:00 name": the name after 8 fields */
                if (line[0] != 'd' && line[0] != '-')
                        return false;
                *is_dir = line[0] == 'd';
                char *p = line;
                for (int field = 0; field < 8; field++) {
                        p += strcspn(p, " ");
                        p += strspn(p, " ");
                        if (!*p)
                                return false;
                }
                *name = p;
        }
        return **name && strcmp(*name, ".") != 0 && strcmp(*name, "..") != 0 && !strchr(*name, '/');
}

int listing_size_fact(const char *line, uint64_t *size)
{
        /* The facts end at the first space; each is "name=value;". */
        const char *end = line + strcspn(line, " ");
        const char *fact = line;

        while (fact < end) {
                const char *semi = memchr(fact, ';', (size_t)(end - fact));
                if (!semi)
                        return -ENOENT;
                if (semi - fact > 5 && strncasecmp(fact, "size=", 5) == 0) {
                        uint64_t value = 0;
                        const char *p = fact + 5;
                        for (; p < semi; p++) {
                                if (*p < '0' || *p > '9' || value > (UINT64_MAX - 9) / 10)
                                        return -ENOENT;
                                value = value * 10 + (uint64_t)(*p - '0');
                        }
                        *size = value;
                        return 0;
                }
                fact = semi + 1;
        }
        return -ENOENT;
}

/* The length of the UTF-8 character at text[i] (of len bytes) when it is whole and
 * shortest, with its code point in *code; 0 for a byte that starts no such character. */
static size_t utf8_char(const unsigned char *text, size_t i, size_t len, uint32_t *code)
{
        static const uint32_t shortest[5] = {0, 0, 0x80, 0x800, 0x10000};
        unsigned char lead = text[i];
        size_t need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc2 ? 2 : 0;

        if (need == 0 || lead > 0xf4 || need > len - i)
                return 0;
        *code = lead & (0x7fu >> need);
        for (size_t k = 1; k < need; k++) {
                if ((text[i + k] & 0xc0) != 0x80)
                        return 0;
                *code = *code << 6 | (text[i + k] & 0x3fu);
        }
        if (*code < shortest[need] || *code > 0x10ffff || (*code >= 0xd800 && *code <= 0xdfff))
                return 0;
        return need;
}

void listing_show(FILE *out, const char *text, size_t len, bool lines)
{
        const unsigned char *bytes = (const unsigned char *)text;

        for (size_t i = 0; i < len; i++) {
                unsigned char c = bytes[i];
                if (lines && c == '\r' && i + 1 < len && text[i + 1] == '\n')
                        continue;
                if (c >= 0x80) {
                        /* Whole characters pass; a C1 control (U+0080..U+009F, which
                         * terminals obey as they do ESC) is one '?', a byte that starts no
                         * whole character another. */
                        uint32_t code;
                        size_t n = utf8_char(bytes, i, len, &code);
                        if (n > 0 && code > 0x9f)
                                fwrite(text + i, 1, n, out);
                        else
                                putc('?', out);
                        i += n > 0 ? n - 1 : 0;
                        continue;
                }
                bool kept = lines && (c == '\n' || c == '\t');
                putc((c < 0x20 && !kept) || c == 0x7f ? '?' : c, out);
        }
}
