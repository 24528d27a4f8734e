/* ftp:// URLs and the credentials that go with them: from the URL, ~/.netrc, or a prompt. */
#ifndef XFTP_URL_H
#define XFTP_URL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ds_error;

#define URL_PART_MAX 1024

struct url {
        char user[256];
        char pass[256];
        bool has_user, has_pass;
        char host[256];
        uint16_t port;
        char path[URL_PART_MAX]; /* percent-decoded, without the leading '/' ("" is the
                                  * login directory) */
};

/* Whether text starts with "ftp://". */
bool url_is_ftp(const char *text);

/* Parses ftp://[user[:pass]@]host[:port][/path] (host may be [v6]); %XX escapes decoded,
 * a decoded NUL, CR or LF refused. Returns 0 or -EINVAL. */
int url_parse(const char *text, struct url *out);

/* Fills missing credentials: ~/.netrc (the machine entry, else the default one; its
 * password never for another login), then for a named user a password prompt on the
 * terminal (with may_prompt), else anonymous. netrc may be NULL for $HOME/.netrc. Returns
 * 0, -EPERM when the netrc file holds the password but group or others can reach it (as
 * ftp(1)), or -ENOTTY when a user's password was nowhere; err says which. */
int url_credentials(struct url *url, const char *netrc, bool may_prompt, struct ds_error *err);

/* Every copy of secret in text (a buffer of size bytes) as "***": a server may quote a
 * password back, and no error line repeats one. */
void url_hide_secret(char *text, size_t size, const char *secret);

/* text (a URL as typed) into out, its password, if any, shown as "***". */
void url_show(const char *text, char *out, size_t room);

#endif
