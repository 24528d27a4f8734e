/* URL parsing, ~/.netrc and the password prompt. */
#include "url.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <dragstrip/error.h>
#include <dragstrip/net.h>

bool url_is_ftp(const char *text)
{
        return strncasecmp(text, "ftp://", 6) == 0;
}

static int hex_value(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

/* Decodes [from, to) into out (room bytes). */
static int decode(const char *from, const char *to, char *out, size_t room)
{
        size_t used = 0;

        for (const char *p = from; p < to; p++) {
                int c = (unsigned char)*p;
                if (c == '%') {
                        if (to - p < 3 || hex_value(p[1]) < 0 || hex_value(p[2]) < 0)
                                return -EINVAL;
                        c = hex_value(p[1]) * 16 + hex_value(p[2]);
                        p += 2;
                }
                if (c == 0 || c == '\r' || c == '\n' || used + 1 >= room)
                        return -EINVAL;
                out[used++] = (char)c;
        }
        out[used] = '\0';
        return 0;
}

int url_parse(const char *text, struct url *out)
{
        struct url url = {.port = 21};

        if (!url_is_ftp(text))
                return -EINVAL;
        const char *p = text + 6;
        const char *slash = strchr(p, '/');
        const char *host_end = slash ? slash : p + strlen(p);
        const char *at = NULL;
        for (const char *q = p; q < host_end; q++)
                if (*q == '@')
                        at = q; /* the last '@' ends the user part */
        if (at) {
                const char *colon = memchr(p, ':', (size_t)(at - p));
                if (decode(p, colon ? colon : at, url.user, sizeof(url.user)) < 0)
                        return -EINVAL;
                url.has_user = true;
                if (colon) {
                        if (decode(colon + 1, at, url.pass, sizeof(url.pass)) < 0)
                                return -EINVAL;
                        url.has_pass = true;
                }
                p = at + 1;
        }
        const char *port = NULL, *h_end = host_end;
        if (*p == '[') {
                const char *close = memchr(p, ']', (size_t)(host_end - p));
                if (!close)
                        return -EINVAL;
                if (decode(p + 1, close, url.host, sizeof(url.host)) < 0)
                        return -EINVAL;
                if (close + 1 < host_end) {
                        if (close[1] != ':')
                                return -EINVAL;
                        port = close + 2;
                }
        } else {
                const char *colon = memchr(p, ':', (size_t)(host_end - p));
                if (colon) {
                        port = colon + 1;
                        h_end = colon;
                }
                if (decode(p, h_end, url.host, sizeof(url.host)) < 0)
                        return -EINVAL;
        }
        if (url.host[0] == '\0')
                return -EINVAL;
        if (port) {
                char digits[8];
                if (host_end - port <= 0 || host_end - port >= (long)sizeof(digits))
                        return -EINVAL;
                memcpy(digits, port, (size_t)(host_end - port));
                digits[host_end - port] = '\0';
                if (ds_port_parse(digits, &url.port) < 0)
                        return -EINVAL;
        }
        if (slash && decode(slash + 1, slash + strlen(slash), url.path, sizeof(url.path)) < 0)
                return -EINVAL;
        *out = url;
        return 0;
}

/* The next whitespace-separated token of a netrc file, or NULL at its end. */
static char *netrc_token(char **save)
{
        return strtok_r(NULL, " \t\r\n", save);
}

/* Reads login and password for host from the netrc text: the first machine entry naming
 * host, else the default entry. A password is taken only with its entry's login, so that
 * another user's password is never sent. */
static void netrc_lookup(char *text, const char *host, struct url *url)
{
        char *save = NULL, *tok = strtok_r(text, " \t\r\n", &save);
        const char *login = NULL, *password = NULL;
        bool in_entry = false, done = false;

        while (tok && !done) {
                if (strcmp(tok, "machine") == 0 || strcmp(tok, "default") == 0) {
                        if (in_entry)
                                break; /* the entry we wanted has ended */
                        char *name = tok[0] == 'm' ? netrc_token(&save) : NULL;
                        in_entry = tok[0] == 'd' || (name && strcasecmp(name, host) == 0);
                } else if (strcmp(tok, "macdef") == 0) {
                        done = true; /* macros run to a blank line; nothing we read follows */
                } else if (in_entry && strcmp(tok, "login") == 0) {
                        login = netrc_token(&save);
                } else if (in_entry && strcmp(tok, "password") == 0) {
                        password = netrc_token(&save);
                }
                tok = netrc_token(&save);
        }
        if (!login || (url->has_user && strcmp(url->user, login) != 0))
                return;
        if (!url->has_user) {
                snprintf(url->user, sizeof(url->user), "%s", login);
                url->has_user = true;
        }
        if (password && !url->has_pass) {
                snprintf(url->pass, sizeof(url->pass), "%s", password);
                url->has_pass = true;
        }
}

/* Fills what the netrc file at path (NULL: $HOME/.netrc) holds for url. A password in a
 * file that group or others may reach is refused, as ftp(1) refuses it, not skipped in
 * silence: the user would wonder why the file is ignored. A missing ~/.netrc is no error;
 * a file named by --netrc that cannot be read is (a typo must not mean anonymous). */
static int read_netrc(struct url *url, const char *path, struct ds_error *err)
{
        char fallback[512];
        bool named = path != NULL;
        if (!path) {
                const char *home = getenv("HOME");
                if (!home)
                        return 0;
                snprintf(fallback, sizeof(fallback), "%s/.netrc", home);
                path = fallback;
        }
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return named ? ds_fail(err, -errno, "--netrc %s", path) : 0;
        struct stat st;
        char *text = NULL;
        int rc = 0;
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size < (1 << 20) &&
            (text = malloc((size_t)st.st_size + 1))) {
                ssize_t n = read(fd, text, (size_t)st.st_size);
                struct url found = *url;
                if (n >= 0) {
                        text[n] = '\0';
                        netrc_lookup(text, url->host, &found);
                }
                if (found.has_pass && !url->has_pass && (st.st_mode & 077)) {
                        ds_fail(err, 0,
                                "%s holds a password and group or others can reach it: "
                                "chmod go= %s",
                                path, path);
                        rc = -EPERM;
                } else {
                        *url = found;
                }
                explicit_bzero(&found, sizeof(found));
                explicit_bzero(text, (size_t)st.st_size + 1);
                free(text);
        }
        close(fd);
        return rc;
}

/* Reads a password from the terminal without echo. */
static int prompt_password(struct url *url)
{
        int tty = open("/dev/tty", O_RDWR | O_CLOEXEC);
        if (tty < 0)
                return -ENOTTY;
        struct termios saved, quiet;
        int rc = tcgetattr(tty, &saved);
        if (rc == 0) {
                quiet = saved;
                quiet.c_lflag &= ~(tcflag_t)ECHO;
                rc = tcsetattr(tty, TCSAFLUSH, &quiet);
        }
        if (rc == 0) {
                char prompt[400];
                int n =
                    snprintf(prompt, sizeof(prompt), "Password for %s@%s: ", url->user, url->host);
                if (write(tty, prompt, (size_t)n) < 0)
                        rc = -errno;
                ssize_t got = rc == 0 ? read(tty, url->pass, sizeof(url->pass) - 1) : -1;
                tcsetattr(tty, TCSAFLUSH, &saved);
                if (write(tty, "\n", 1) < 0 || got < 0)
                        rc = -EIO;
                else {
                        url->pass[got] = '\0';
                        url->pass[strcspn(url->pass, "\r\n")] = '\0';
                        url->has_pass = true;
                }
        } else {
                rc = -ENOTTY;
        }
        close(tty);
        return rc;
}

int url_credentials(struct url *url, const char *netrc, bool may_prompt, struct ds_error *err)
{
        if (!url->has_user || !url->has_pass) {
                int rc = read_netrc(url, netrc, err);
                if (rc < 0)
                        return rc;
        }
        if (!url->has_user) {
                snprintf(url->user, sizeof(url->user), "anonymous");
                url->has_user = true;
        }
        if (url->has_pass)
                return 0;
        if (strcmp(url->user, "anonymous") == 0 || strcmp(url->user, "ftp") == 0) {
                snprintf(url->pass, sizeof(url->pass), "xftp@");
                url->has_pass = true;
                return 0;
        }
        int rc = may_prompt ? prompt_password(url) : -ENOTTY;
        if (rc < 0)
                ds_fail(err, 0,
                        "no password for %s@%s: give it in the URL or the netrc file, or run on "
                        "a terminal",
                        url->user, url->host);
        return rc;
}

void url_show(const char *text, char *out, size_t room)
{
        /* ftp://user:password@host...: the password, if any, is what follows the first ':'
         * after "//" and ends at the last '@'. The text may be no URL at all (one '/', a
         * '/' inside the password): the last '@' anywhere is taken, and without "//" the
         * first ':' even if it ends a scheme, so that too much is hidden rather than a
         * password shown. */
        const char *auth = strstr(text, "//");
        auth = auth ? auth + 2 : text;
        const char *at = strrchr(auth, '@');
        const char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
        if (colon)
                snprintf(out, room, "%.*s:***%s", (int)(colon - text), text, at);
        else
                snprintf(out, room, "%s", text);
}

/* Every copy of secret in text (a buffer of size bytes) as "***": a server may quote a
 * password back, and no error line repeats one. A password of under four bytes is hidden
 * where it stands as a word only, or "p" would take every p out of the message. "***" may
 * be longer than what it hides: a tail that would no longer fit is dropped. */
void url_hide_secret(char *text, size_t size, const char *secret)
{
        size_t len = strlen(secret);
        char *at = text;

        while (len > 0 && (at = strstr(at, secret))) {
                bool word = (at == text || !isalnum((unsigned char)at[-1])) &&
                            !isalnum((unsigned char)at[len]);
                if (len < 4 && !word) {
                        at++;
                        continue;
                }
                size_t before = (size_t)(at - text);
                if (before + 4 > size) { /* not even "***" fits: end the text here */
                        *at = '\0';
                        break;
                }
                size_t tail = strlen(at + len), room = size - before - 4;
                if (tail > room)
                        tail = 0; /* a cut tail could end in part of the secret */
                memmove(at + 3, at + len, tail);
                at[3 + tail] = '\0';
                memcpy(at, "***", 3);
                at += 3;
        }
}
