/* A strict little JSON reader for the tests: it checks that a line is one valid JSON
 * object and flattens it into (path, value) pairs in the order written, so a test can
 * assert on keys, values and order without trusting the writer under test. */
#ifndef DS_TEST_JSON_CHECK_H
#define DS_TEST_JSON_CHECK_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define JC_MAX_MEMBERS 64

struct jc_member {
        char path[128];  /* "errors.lost" */
        char value[256]; /* strings unescaped; numbers, true/false/null as written */
        char type;       /* 's' string, 'n' number, 'b' bool, 'z' null, 'o' object */
};

struct jc_doc {
        struct jc_member members[JC_MAX_MEMBERS];
        int count;
};

static inline const char *jc_ws(const char *p)
{
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
                p++;
        return p;
}

static inline int jc_hex(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

/* A string into out (ASCII escapes only, which is all the writer emits). */
static inline const char *jc_string(const char *p, char *out, size_t len)
{
        size_t n = 0;
        if (*p++ != '"')
                return NULL;
        while (*p != '"') {
                unsigned char c = (unsigned char)*p++;
                if (c < 0x20)
                        return NULL; /* raw control characters are not JSON */
                if (c == '\\') {
                        switch (*p++) {
                        case '"':
                                c = '"';
                                break;
                        case '\\':
                                c = '\\';
                                break;
                        case '/':
                                c = '/';
                                break;
                        case 'b':
                                c = '\b';
                                break;
                        case 'f':
                                c = '\f';
                                break;
                        case 'n':
                                c = '\n';
                                break;
                        case 'r':
                                c = '\r';
                                break;
                        case 't':
                                c = '\t';
                                break;
                        case 'u': {
                                int v = 0;
                                for (int i = 0; i < 4; i++) {
                                        int h = jc_hex(*p++);
                                        if (h < 0)
                                                return NULL;
                                        v = v * 16 + h;
                                }
                                if (v >= 0x80)
                                        return NULL;
                                c = (unsigned char)v;
                                break;
                        }
                        default:
                                return NULL;
                        }
                }
                if (n + 1 >= len)
                        return NULL;
                out[n++] = (char)c;
        }
        out[n] = '\0';
        return p + 1;
}

static inline const char *jc_digits(const char *p)
{
        if (*p < '0' || *p > '9')
                return NULL;
        while (*p >= '0' && *p <= '9')
                p++;
        return p;
}

static inline const char *jc_number(const char *p)
{
        if (*p == '-')
                p++;
        if (*p == '0')
                p++;
        else if (!(p = jc_digits(p)))
                return NULL;
        if (*p == '.' && !(p = jc_digits(p + 1)))
                return NULL;
        if (*p == 'e' || *p == 'E') {
                p++;
                if (*p == '+' || *p == '-')
                        p++;
                if (!(p = jc_digits(p)))
                        return NULL;
        }
        return p;
}

static inline const char *jc_object(const char *p, const char *prefix, struct jc_doc *doc);

static inline const char *jc_value(const char *p, struct jc_member *m, struct jc_doc *doc)
{
        const char *start = p;
        if (*p == '{') {
                m->type = 'o';
                return jc_object(p, m->path, doc);
        }
        if (*p == '"') {
                m->type = 's';
                return jc_string(p, m->value, sizeof(m->value));
        }
        if (strncmp(p, "true", 4) == 0 || strncmp(p, "false", 5) == 0) {
                m->type = 'b';
                p += *p == 't' ? 4 : 5;
        } else if (strncmp(p, "null", 4) == 0) {
                m->type = 'z';
                p += 4;
        } else {
                m->type = 'n';
                if (!(p = jc_number(p)))
                        return NULL;
        }
        snprintf(m->value, sizeof(m->value), "%.*s", (int)(p - start), start);
        return p;
}

static inline const char *jc_object(const char *p, const char *prefix, struct jc_doc *doc)
{
        if (*p++ != '{')
                return NULL;
        p = jc_ws(p);
        if (*p == '}')
                return p + 1;
        for (;;) {
                char key[96];
                if (doc->count >= JC_MAX_MEMBERS || !(p = jc_string(jc_ws(p), key, sizeof(key))))
                        return NULL;
                struct jc_member *m = &doc->members[doc->count++];
                snprintf(m->path, sizeof(m->path), "%s%s%s", prefix, *prefix ? "." : "", key);
                p = jc_ws(p);
                if (*p++ != ':')
                        return NULL;
                if (!(p = jc_value(jc_ws(p), m, doc)))
                        return NULL;
                p = jc_ws(p);
                if (*p == '}')
                        return p + 1;
                if (*p++ != ',')
                        return NULL;
        }
}

/* Parses exactly one object followed by one newline. */
static inline bool jc_parse_line(const char *text, struct jc_doc *doc)
{
        doc->count = 0;
        const char *p = jc_object(text, "", doc);
        return p && p[0] == '\n' && p[1] == '\0';
}

/* The member at path, or NULL. */
static inline const struct jc_member *jc_find(const struct jc_doc *doc, const char *path)
{
        for (int i = 0; i < doc->count; i++)
                if (strcmp(doc->members[i].path, path) == 0)
                        return &doc->members[i];
        return NULL;
}

#endif
