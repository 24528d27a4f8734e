/* LIST, NLST and MLSD, a listing over a data connection; STAT and MLST of a path, one
 * inside a reply. */
#include "channel.h"
#include "ftps.h"
#include "watch.h"

#include <dragstrip/error.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LIST_CHUNK (64u << 10) /* a listing goes out in pieces of this size */

/* A listing being written: to the data connection in chunks, or into a reply. */
struct lister {
        struct session *s;
        enum xftpd_verb verb;
        struct xftp_conn *conn; /* the data connection; NULL: the control one (STAT, MLST) */
        uint64_t ctl_deadline;  /* fd -1: the whole reply's, so a client that reads a byte
                                 * now and then cannot stretch it chunk by chunk */
        time_t now;
        int rc;
        size_t used;
        char buf[LIST_CHUNK + 4096];
};

static int lister_flush(struct lister *l)
{
        struct xftp_data_opts opts = xfer_data_opts(l->s, &l->s->xfer_stop);
        struct ds_error err;

        if (l->rc == 0 && l->used > 0 && l->conn)
                l->rc = xftp_data_write_all(l->conn, l->buf, l->used, &opts, &err);
        else if (l->rc == 0 && l->used > 0)
                l->rc = session_send(l->s, l->buf, l->used, l->ctl_deadline);
        l->used = 0;
        return l->rc;
}

/* "type=file;size=10;modify=20240101120000;perm=rw; " as RFC 3659 spells the facts. */
static int mlsx_facts(char *out, size_t len, const struct xftp_store_stat *st, bool read_only)
{
        struct tm tm;
        time_t t = (time_t)st->mtime;
        const char *perm = st->dir ? (read_only ? "el" : "cdeflmp") : (read_only ? "r" : "adfrw");

        gmtime_r(&t, &tm);
        return snprintf(out, len, "type=%s;size=%llu;modify=%04d%02d%02d%02d%02d%02d;perm=%s; ",
                        st->dir ? "dir" : "file", (unsigned long long)st->size, tm.tm_year + 1900,
                        tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, perm);
}

/* "drwxr-xr-x 1 ftp ftp 4096 Jan  1 12:00 " as ls -l prints it, the form clients parse. */
static int ls_fields(char *out, size_t len, const struct xftp_store_stat *st, time_t now)
{
        static const char rwx[] = "rwxrwxrwx";
        char mode[11], when[16];
        struct tm tm;
        time_t t = (time_t)st->mtime;

        mode[0] = st->dir ? 'd' : '-';
        for (int i = 0; i < 9; i++)
                mode[i + 1] = st->mode & (0400u >> i) ? rwx[i] : '-';
        mode[10] = '\0';
        gmtime_r(&t, &tm);
        bool recent = t <= now + 3600 && now - t < 180 * 86400;
        strftime(when, sizeof(when), recent ? "%b %e %H:%M" : "%b %e  %Y", &tm);
        return snprintf(out, len, "%s 1 ftp ftp %13llu %s ", mode, (unsigned long long)st->size,
                        when);
}

static int list_entry(const char *name, const struct xftp_store_stat *st, void *ctx)
{
        struct lister *l = ctx;
        size_t room = sizeof(l->buf) - l->used;
        char *at = l->buf + l->used;
        int n = 0;

        /* A name no command could name (control bytes) would break the listing's lines. */
        for (const unsigned char *p = (const unsigned char *)name; *p; p++)
                if (*p < 0x20 || *p == 0x7f)
                        return 0;
        if (!l->conn) /* inside a multi-line reply: a space first, as MLST wants */
                at[n++] = ' ';
        if (l->verb == V_MLSD || l->verb == V_MLST)
                n += mlsx_facts(at + n, room - (size_t)n, st, l->s->read_only);
        else if (l->verb != V_NLST)
                n += ls_fields(at + n, room - (size_t)n, st, l->now);
        n += snprintf(at + n, room - (size_t)n, "%s\r\n", name);
        if ((size_t)n >= room)
                return -ENAMETOOLONG;
        l->used += (size_t)n;
        return l->used >= LIST_CHUNK ? lister_flush(l) : 0;
}

/* Lists path into l: a directory's entries, or a file's own line. */
static int list_path(struct lister *l, const char *path, const char *shown)
{
        struct xftp_store_stat st;
        int rc = xftp_store_stat(l->s->store, path, &st);

        if (rc < 0)
                return rc;
        if (!st.dir || l->verb == V_MLST)
                rc = list_entry(shown, &st, l);
        else
                rc = xftp_store_list(l->s->store, path, list_entry, l);
        return rc < 0 ? rc : lister_flush(l);
}

/* LIST's argument without ls options ("-la", "-a dir"), which clients send and which
 * cannot name a file here. */
static const char *skip_ls_options(const char *arg)
{
        while (arg[0] == '-') {
                arg += strcspn(arg, " ");
                arg += strspn(arg, " ");
        }
        return arg;
}

void xfer_cmd_list(struct session *s, enum xftpd_verb verb, const char *arg)
{
        char path[XFTP_STORE_PATH_MAX];
        struct lister *l = calloc(1, sizeof(*l));
        struct xftp_conn conn;

        const char *name = verb == V_LIST || verb == V_NLST ? skip_ls_options(arg) : arg;
        int rc = l ? xftp_store_path(s->cwd, name, path, sizeof(path)) : -ENOMEM;
        if (rc == 0)
                rc = xftp_store_stat(s->store, path, &(struct xftp_store_stat){0});
        if (rc < 0) {
                session_reply_errno(s, rc, name);
        } else if (watch_begin(s) < 0) { /* no thread to watch it: no listing, but a reply */
                session_reply(s, "451 Cannot start the listing.");
        } else {
                /* A listing is one plain stream on one connection, whatever MODE says. */
                bool reused;
                bool opened = xfer_open_data(s, &conn, 1, false, &reused) == 0;
                if (opened) {
                        struct ds_error err;
                        session_reply(s, "150 Here comes the listing.");
                        *l =
                            (struct lister){.s = s, .verb = verb, .conn = &conn, .now = time(NULL)};
                        rc = ftps_secure_data(s, &conn, 1, &err);
                        if (rc == 0)
                                rc = list_path(l, path, name);
                        xftp_conn_close(&conn);
                        if (rc == 0)
                                xfer_reply_done(s, "Listing sent.");
                        else
                                xfer_reply_cut(s, rc, false, strerror(-rc));
                }
                watch_end(s);
                if (!opened)
                        xfer_reply_unopened(s);
        }
        free(l);
        xfer_reset(s);
}

void xfer_cmd_stat_path(struct session *s, enum xftpd_verb verb, const char *arg)
{
        char path[XFTP_STORE_PATH_MAX];
        struct lister *l = calloc(1, sizeof(*l));
        int code = verb == V_MLST ? 250 : 213;

        int rc = l ? xftp_store_path(s->cwd, arg, path, sizeof(path)) : -ENOMEM;
        if (rc == 0)
                rc = xftp_store_stat(s->store, path, &(struct xftp_store_stat){0});
        if (rc == 0) {
                *l = (struct lister){.s = s,
                                     .verb = verb,
                                     .ctl_deadline = session_reply_deadline(s),
                                     .now = time(NULL)};
                session_reply(s, "%d-Status of /%s:", code, path);
                rc = list_path(l, path, arg[0] ? arg : "/");
                session_reply(s, "%d End", code);
        } else {
                session_reply_errno(s, rc, arg);
        }
        free(l);
}
