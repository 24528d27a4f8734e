/* The config file: read it, cut it into settings (conf.h). */
#include "conf.h"

#include <dragstrip/error.h>

#include <err.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *xftpd_read_text(const char *path, size_t max, const char *what, int *rc, struct ds_error *err)
{
        int fail = 0;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        char *text = fd >= 0 ? malloc(max + 1) : NULL;
        size_t used = 0;
        ssize_t n = 1;

        while (text && n > 0 && used <= max) {
                n = read(fd, text + used, max + 1 - used);
                if (n < 0 && errno == EINTR)
                        n = 1;
                else if (n > 0)
                        used += (size_t)n;
        }
        if (fd < 0 || n < 0)
                fail = ds_fail(err, -errno, "%s %s", what, path);
        else if (!text)
                fail = ds_fail(err, -ENOMEM, "%s %s", what, path);
        else if (used > max)
                fail = ds_fail(err, -EFBIG, "%s %s: larger than %zu bytes", what, path, max);
        else if ((text[used] = '\0', strlen(text) != used))
                fail = ds_fail(err, -EINVAL, "%s %s: a NUL byte (not a text file?)", what, path);
        if (fd >= 0)
                close(fd);
        if (rc)
                *rc = fail;
        if (fail) {
                free(text);
                return NULL;
        }
        return text;
}

char *xftpd_conf_read(const char *path, struct ds_error *err)
{
        return xftpd_read_text(path, XFTPD_CONF_BYTES, "config file", NULL, err);
}

/* Cuts spaces and tabs (and a CR) from both ends of [*start, end), in place. */
static char *trim(char *start, char *end)
{
        while (start < end && (*start == ' ' || *start == '\t'))
                start++;
        while (end > start && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
                end--;
        *end = '\0';
        return start;
}

static int find_key(const char *key, const struct option *longs, const char *const *refused)
{
        for (const char *const *r = refused; *r; r++)
                if (strcmp(key, *r) == 0)
                        return -1;
        for (int i = 0; longs[i].name; i++)
                if (strcmp(key, longs[i].name) == 0)
                        return i;
        return -1;
}

/* One line, cut in place. Its comment is gone and it is not blank. */
static void take_line(char *line, const char *path, unsigned lineno, const struct option *longs,
                      const char *const *refused, bool *seen, xftpd_conf_take *take, void *ctx)
{
        char name[XFTPD_CONF_LINE + 64];
        char *eq = strchr(line, '=');

        if (!eq)
                errx(2, "%s line %u: expected `key = value`", path, lineno);
        char *key = trim(line, eq);
        char *value = trim(eq + 1, eq + 1 + strlen(eq + 1));
        snprintf(name, sizeof(name), "%s line %u: %s", path, lineno, key);
        int i = find_key(key, longs, refused);
        if (i < 0)
                errx(2, "%s line %u: unknown key '%s' (the keys are xftpd's long options)", path,
                     lineno, key);
        if (seen[i])
                errx(2, "%s line %u: %s given twice", path, lineno, key);
        seen[i] = true;
        if (longs[i].has_arg == no_argument) {
                if (strcmp(value, "yes") != 0 && strcmp(value, "no") != 0)
                        errx(2, "%s: '%s' is not yes or no", name, value);
                if (strcmp(value, "yes") == 0)
                        take(longs[i].val, NULL, name, ctx);
                return;
        }
        if (!value[0])
                errx(2, "%s needs a value", name);
        take(longs[i].val, value, name, ctx);
}

void xftpd_conf_each(char *text, const char *path, const struct option *longs,
                     const char *const *refused, xftpd_conf_take *take, void *ctx)
{
        unsigned count = 0, lineno = 0;

        while (longs[count].name)
                count++;
        bool *seen = calloc(count ? count : 1, sizeof(*seen));
        if (!seen)
                errx(1, "out of memory");
        for (char *line = text, *next; *line; line = next) {
                size_t len = strcspn(line, "\n");
                lineno++;
                if (len > XFTPD_CONF_LINE)
                        errx(2, "%s line %u: longer than %u bytes", path, lineno, XFTPD_CONF_LINE);
                next = line + len + (line[len] == '\n');
                line[len] = '\0';
                line[strcspn(line, "#")] = '\0';
                if (line[strspn(line, " \t\r")] != '\0')
                        take_line(line, path, lineno, longs, refused, seen, take, ctx);
        }
        free(seen);
}
