/* Listings and other server text: parsed without trusting a length, shown without
 * passing a control byte on. */
#include "listing.h"

#include "text.h"

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

void listing_show(FILE *out, const char *text, size_t len, bool lines)
{
        const unsigned char *bytes = (const unsigned char *)text;

        for (size_t i = 0; i < len; i++) {
                unsigned char c = bytes[i];
                if (lines && c == '\r' && i + 1 < len && text[i + 1] == '\n')
                        continue;
                bool kept = lines && (c == '\n' || c == '\t');
                int shown;
                size_t n = xftp_text_char(bytes, i, len, &shown);
                if (n > 0 && (shown || kept))
                        fwrite(text + i, 1, n, out);
                else
                        putc('?', out); /* one for a whole character not shown */
                i += n > 0 ? n - 1 : 0;
        }
}
