/* xftpd's config file (-c FILE): lines `key = value` whose keys are the long option names,
 * handed one by one to the handler the command line's getopt_long loop calls, so that a
 * setting is checked in one place whichever way it came. */
#ifndef XFTPD_CONF_H
#define XFTPD_CONF_H

#include <getopt.h>
#include <stddef.h>

struct ds_error;

#define XFTPD_CONF_BYTES (1u << 20) /* size of a config file */
#define XFTPD_CONF_LINE  4096u      /* longest line */

/* One setting: the option's getopt value, its argument (a flag's "yes"/"no" is given as
 * NULL for yes; "no" is not passed on), and how to name it in an error message
 * ("FILE line N: key"). */
typedef void xftpd_conf_take(int val, const char *arg, const char *name, void *ctx);

/* Reads the whole text file at path, at most max bytes and no NUL byte; what names it in
 * errors ("users file"). Returns the text (malloc'd) or NULL with err filled and *rc (may
 * be NULL) its negative errno. */
char *xftpd_read_text(const char *path, size_t max, const char *what, int *rc,
                      struct ds_error *err);

/* Reads the file at path, at most XFTPD_CONF_BYTES. Returns its text (malloc'd, the
 * caller frees it) or NULL with err filled. */
char *xftpd_conf_read(const char *path, struct ds_error *err);

/* Hands every setting of text (the file at path, as xftpd_conf_read gave it) to take, in
 * order. text is cut in place: the values handed over point into it. Keys are the names in longs
 * but those in refused (NULL-terminated: --help,
 * --add-user, -c itself). A line that is not `key = value`, an unknown or refused key, a
 * key given twice, a flag whose value is not yes or no, or an option's missing value
 * exits 2 naming the file and line; take exits likewise on a bad value. */
void xftpd_conf_each(char *text, const char *path, const struct option *longs,
                     const char *const *refused, xftpd_conf_take *take, void *ctx);

#endif
