/* Listings and other server text: parsed without trusting a length, shown without
 * passing a control byte on. */
#include "listing.h"

#include "ftptime.h"
#include "text.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* A decimal number of len bytes at text: 0 and *value, or -ENOENT (not digits, too big). */
static int decimal(const char *text, size_t len, uint64_t *value)
{
        uint64_t v = 0;
        if (len == 0)
                return -ENOENT;
        for (size_t i = 0; i < len; i++) {
                if (text[i] < '0' || text[i] > '9' || v > (UINT64_MAX - 9) / 10)
                        return -ENOENT;
                v = v * 10 + (uint64_t)(text[i] - '0');
        }
        *value = v;
        return 0;
}

/* The value of fact name (with its '=', as "size=") in an MLST/MLSD facts line: *value
 * and *len, or false. The facts end at the first space; each is "name=value;". */
static bool fact_value(const char *facts, const char *name, const char **value, size_t *len)
{
        const char *end = facts + strcspn(facts, " ");
        size_t name_len = strlen(name);
        for (const char *fact = facts; fact < end;) {
                const char *semi = memchr(fact, ';', (size_t)(end - fact));
                if (!semi)
                        return false;
                if ((size_t)(semi - fact) >= name_len && strncasecmp(fact, name, name_len) == 0) {
                        *value = fact + name_len;
                        *len = (size_t)(semi - *value);
                        return true;
                }
                fact = semi + 1;
        }
        return false;
}

bool listing_facts_parse(const char *facts_line, struct listing_facts *facts)
{
        const char *type;
        size_t len;
        *facts = (struct listing_facts){.size = UINT64_MAX};
        if (listing_size_fact(facts_line, &facts->size) < 0)
                facts->size = UINT64_MAX;
        listing_modify_fact(facts_line, facts->modified, sizeof(facts->modified));
        if (!fact_value(facts_line, "type=", &type, &len))
                return false;
        facts->is_dir = len == 3 && strncasecmp(type, "dir", 3) == 0;
        return facts->is_dir || (len == 4 && strncasecmp(type, "file", 4) == 0);
}

static const char LINK_LEFT_OUT[] = "a symbolic link: not copied";
static const char OTHER_LEFT_OUT[] = "neither a file nor a directory: not copied";

/* Why an MLSD entry that is neither a file nor a directory is left out; NULL for the
 * listed directory and its parent (RFC 3659 7.5.1: cdir, pdir), which name nothing. */
static const char *mlsd_left_out(const char *facts_line)
{
        const char *type;
        size_t len;
        if (!fact_value(facts_line, "type=", &type, &len))
                return "no type named: not copied";
        if (len == 4 && (strncasecmp(type, "cdir", 4) == 0 || strncasecmp(type, "pdir", 4) == 0))
                return NULL;
        if ((len >= 13 && strncasecmp(type, "OS.unix=slink", 13) == 0) ||
            (len >= 15 && strncasecmp(type, "OS.unix=symlink", 15) == 0))
                return LINK_LEFT_OUT;
        return OTHER_LEFT_OUT;
}

bool listing_entry(char *line, bool mlsd, char **name, struct listing_facts *facts,
                   const char **left_out)
{
        const char *why = NULL;
        bool usable;
        *facts = (struct listing_facts){.size = UINT64_MAX};
        if (left_out)
                *left_out = NULL;
        line[strcspn(line, "\r")] = '\0';
        if (mlsd) {
                /* "fact=value;fact=value; name" (RFC 3659 7.2) */
                char *space = strchr(line, ' ');
                if (!space)
                        return false;
                *space = '\0';
                *name = space + 1;
                usable = listing_facts_parse(line, facts);
                if (!usable)
                        why = mlsd_left_out(line);
        } else {
                /* "drwxr-xr-x 2 user group 4096 Nov 23 19:00 name": the size is the fifth
                 * field, the name what follows the eighth; a line of another kind ("total
                 * 8") names nothing */
                char kind = line[0];
                if (!kind || !strchr("d-lcbps", kind))
                        return false;
                facts->is_dir = kind == 'd';
                char *p = line;
                for (int field = 0; field < 8; field++) {
                        p += strcspn(p, " ");
                        p += strspn(p, " ");
                        if (!*p)
                                return false;
                        if (field == 3 && decimal(p, strcspn(p, " "), &facts->size) < 0)
                                facts->size = UINT64_MAX;
                }
                *name = p;
                usable = kind == 'd' || kind == '-';
                if (!usable)
                        why = kind == 'l' ? LINK_LEFT_OUT : OTHER_LEFT_OUT;
        }
        if (!**name || strcmp(*name, ".") == 0 || strcmp(*name, "..") == 0)
                return false;
        if (usable && strchr(*name, '/')) {
                usable = false;
                why = "a name with '/' in it: not copied";
        }
        if (left_out && !usable)
                *left_out = why;
        return usable;
}

int listing_size_fact(const char *line, uint64_t *size)
{
        const char *value;
        size_t len;
        if (!fact_value(line, "size=", &value, &len))
                return -ENOENT;
        return decimal(value, len, size);
}

int listing_time_copy(const char *text, size_t len, char *out, size_t room)
{
        struct timespec when;

        if (len >= room || xftp_time_parse(text, &when) != (int)len)
                return -ENOTSUP;
        memcpy(out, text, len);
        out[len] = '\0';
        return 0;
}

int listing_modify_fact(const char *facts, char *out, size_t room)
{
        const char *value;
        size_t len;
        if (!fact_value(facts, "modify=", &value, &len))
                return -ENOTSUP;
        return listing_time_copy(value, len, out, room);
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
