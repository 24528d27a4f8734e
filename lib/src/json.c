/* A small streaming JSON writer: one object per line, keys in the order written.
 *
 * Output goes straight to the FILE; stdio errors are left for the caller's final
 * fflush/ferror, as with any printf. */
#include <dragstrip/json.h>

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>

/* Length of the well-formed UTF-8 sequence at p (1 to 4 bytes), or 0 when p starts none:
 * a stray continuation byte, an overlong form, a surrogate, past U+10FFFF, or cut short
 * (the && chain stops at the terminating NUL). */
static int utf8_length(const unsigned char *p)
{
        if (p[0] < 0x80)
                return 1;
        if (p[0] >= 0xc2 && p[0] <= 0xdf)
                return (p[1] & 0xc0) == 0x80 ? 2 : 0;
        if (p[0] >= 0xe0 && p[0] <= 0xef) {
                unsigned lo = p[0] == 0xe0 ? 0xa0 : 0x80, hi = p[0] == 0xed ? 0x9f : 0xbf;
                return p[1] >= lo && p[1] <= hi && (p[2] & 0xc0) == 0x80 ? 3 : 0;
        }
        if (p[0] >= 0xf0 && p[0] <= 0xf4) {
                unsigned lo = p[0] == 0xf0 ? 0x90 : 0x80, hi = p[0] == 0xf4 ? 0x8f : 0xbf;
                return p[1] >= lo && p[1] <= hi && (p[2] & 0xc0) == 0x80 && (p[3] & 0xc0) == 0x80
                           ? 4
                           : 0;
        }
        return 0;
}

/* JSON text is UTF-8: a byte that is not part of a well-formed sequence (a file name
 * in another encoding, say) is written as U+FFFD, so the output always parses. */
static void write_string(FILE *out, const char *text)
{
        fputc('"', out);
        for (const unsigned char *p = (const unsigned char *)(text ? text : ""); *p; p++) {
                switch (*p) {
                case '"':
                        fputs("\\\"", out);
                        break;
                case '\\':
                        fputs("\\\\", out);
                        break;
                case '\n':
                        fputs("\\n", out);
                        break;
                case '\r':
                        fputs("\\r", out);
                        break;
                case '\t':
                        fputs("\\t", out);
                        break;
                default:
                        if (*p < 0x20 || *p == 0x7f) {
                                fprintf(out, "\\u%04x", *p);
                        } else if (*p < 0x80) {
                                fputc(*p, out);
                        } else {
                                int n = utf8_length(p);
                                if (n == 0) {
                                        fputs("\\ufffd", out);
                                } else {
                                        fwrite(p, 1, (size_t)n, out);
                                        p += n - 1;
                                }
                        }
                }
        }
        fputc('"', out);
}

/* The separator and key before a member of the innermost open object (an array's
 * elements have no key). */
static void begin_member(struct ds_json *json, const char *key)
{
        int level = json->depth - 1;
        if (level < 0)
                return;
        if (json->has_member[level])
                fputc(',', json->out);
        json->has_member[level] = true;
        if (json->is_array[level])
                return;
        write_string(json->out, key);
        fputc(':', json->out);
}

void ds_json_begin(struct ds_json *json, FILE *out)
{
        json->out = out;
        json->depth = 1;
        json->has_member[0] = false;
        json->is_array[0] = false;
        fputc('{', out);
}

void ds_json_end(struct ds_json *json)
{
        while (json->depth > 0)
                ds_json_close(json);
        fputc('\n', json->out);
        fflush(json->out);
}

void ds_json_str(struct ds_json *json, const char *key, const char *value)
{
        begin_member(json, key);
        write_string(json->out, value);
}

void ds_json_u64(struct ds_json *json, const char *key, uint64_t value)
{
        begin_member(json, key);
        fprintf(json->out, "%" PRIu64, value);
}

void ds_json_i64(struct ds_json *json, const char *key, int64_t value)
{
        begin_member(json, key);
        fprintf(json->out, "%" PRId64, value);
}

void ds_json_double(struct ds_json *json, const char *key, double value)
{
        begin_member(json, key);
        /* JSON has no NaN or infinity. Nine significant digits keep byte counts and
         * rates exact to well below what any run can measure. */
        if (isfinite(value))
                fprintf(json->out, "%.9g", value);
        else
                fputs("null", json->out);
}

void ds_json_bool(struct ds_json *json, const char *key, bool value)
{
        begin_member(json, key);
        fputs(value ? "true" : "false", json->out);
}

static void open_nested(struct ds_json *json, const char *key, bool array)
{
        /* Deeper than the writer tracks is a bug in the caller; in a release build the
         * member is dropped and the line stays valid JSON. */
        assert(json->depth < DS_JSON_MAX_DEPTH);
        if (json->depth >= DS_JSON_MAX_DEPTH)
                return;
        begin_member(json, key);
        fputc(array ? '[' : '{', json->out);
        json->is_array[json->depth] = array;
        json->has_member[json->depth++] = false;
}

void ds_json_open(struct ds_json *json, const char *key)
{
        open_nested(json, key, false);
}

void ds_json_open_array(struct ds_json *json, const char *key)
{
        open_nested(json, key, true);
}

void ds_json_close(struct ds_json *json)
{
        if (json->depth <= 0)
                return;
        json->depth--;
        fputc(json->is_array[json->depth] ? ']' : '}', json->out);
}
