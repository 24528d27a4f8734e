/* A session's control connection: reading lines with deadlines, login, and the commands
 * that move no data. channel.c, transfer.c, list.c and hash.c have the ones that use a
 * data connection or read a file. */
#include "session.h"
#include "watch.h"

#include "ftps.h"
#include "throttle.h"
#include "users.h"
#include "verbs.h"

#include <dragstrip/clock.h>
#include <dragstrip/error.h>
#include <dragstrip/live.h>
#include <dragstrip/serve.h>
#include <dragstrip/stop.h>

#include "modee.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define REPLY_MAX 2400 /* a reply line: its code, a path of XFTPD_LINE_MAX and words */

/* How long one reply may wait for a client that does not read: within the login
 * deadline until the login, then the idle time. */
static int reply_ms(const struct session *s)
{
        return s->logged_in || s->config->login_ms > s->config->idle_ms ? s->config->idle_ms
                                                                        : s->config->login_ms;
}

uint64_t session_reply_deadline(const struct session *s)
{
        return ds_deadline_in(reply_ms(s));
}

int session_send(struct session *s, const void *data, size_t len, uint64_t deadline_ns)
{
        const char *bytes = data;

        /* A client that cannot be written to is gone: no later reply waits on it again. */
        if (atomic_load(&s->ctl_gone))
                return -EPIPE;
        /* Non-blocking sends and a poll that a stop ends: a client that never reads
         * holds a write until its deadline at most, and none waits once stopping. */
        for (size_t done = 0; done < len;) {
                ssize_t sent = xftp_conn_send(&s->ctl, bytes + done, len - done, MSG_DONTWAIT);
                if (sent > 0) {
                        done += (size_t)sent;
                        continue;
                }
                int left = ds_deadline_left_ms(deadline_ns);
                bool may_wait = (sent == -EAGAIN || sent == -EINTR) && left > 0 && !ds_stopping();
                if (!may_wait || xftp_conn_wait(&s->ctl, POLLOUT, left, NULL) < 0) {
                        atomic_store(&s->ctl_gone, true);
                        return -EPIPE;
                }
        }
        return 0;
}

int session_reply(struct session *s, const char *fmt, ...)
{
        char line[REPLY_MAX + 2];
        va_list ap;

        va_start(ap, fmt);
        int n = vsnprintf(line, REPLY_MAX, fmt, ap);
        va_end(ap);
        if (n < 0)
                return -EINVAL;
        if (n >= REPLY_MAX)
                n = REPLY_MAX - 1;
        /* Every refusal of a file or a name (permission, a path outside the root, no such
         * file, a read-only session) is logged here, the one place all of them pass. */
        if (s->logged_in && (strncmp(line, "550", 3) == 0 || strncmp(line, "553", 3) == 0))
                xftpd_log(LOG_NOTICE, "%s %s %s denied: %.*s", s->user, s->peer_text,
                          s->verb ? s->verb : "-", n, line);
        line[n++] = '\r';
        line[n++] = '\n';
        return session_send(s, line, (size_t)n, session_reply_deadline(s));
}

void session_reply_errno(struct session *s, int neg_errno, const char *what)
{
        switch (neg_errno) {
        case -ENOSPC:
        case -EDQUOT:
                session_reply(s, "452 %s: insufficient storage space.", what);
                break;
        case -EXDEV: /* openat2 RESOLVE_BENEATH: the path tried to leave the root */
        case -ELOOP:
        case -EACCES:
        case -EPERM:
                session_reply(s, "550 %s: permission denied.", what);
                break;
        case -ENOENT:
                session_reply(s, "550 %s: no such file or directory.", what);
                break;
        case -EINVAL:
                session_reply(s, "553 %s: not a file name this server takes.", what);
                break;
        case -ENAMETOOLONG:
                session_reply(s, "553 %s: name too long.", what);
                break;
        default:
                session_reply(s, "550 %s: %s.", what, strerror(-neg_errno));
        }
}

void session_consume(struct session *s, size_t len)
{
        memmove(s->in, s->in + len, s->in_used - len);
        s->in_used -= len;
}

/* A whole line in s->in, or an over-long one cut: its length, else 0. */
static size_t line_ready(struct session *s)
{
        for (;;) {
                char *lf = memchr(s->in, '\n', s->in_used);
                if (s->discarding) {
                        session_consume(s, lf ? (size_t)(lf - s->in) + 1 : s->in_used);
                        s->discarding = !lf;
                        if (!lf)
                                return 0;
                        continue;
                }
                if (lf)
                        return (size_t)(lf - s->in) + 1;
                if (s->in_used > XFTPD_LINE_MAX) {
                        s->discarding = true;
                        return XFTPD_LINE_MAX + 1;
                }
                return 0;
        }
}

long session_read_line(struct session *s, uint64_t deadline_ns)
{
        for (;;) {
                /* Before any line already buffered: a client that pipelines commands
                 * faster than it reads replies must not outlast a stop or its deadline. */
                if (ds_stopping())
                        return -EINTR;
                int left = ds_deadline_left_ms(deadline_ns);
                if (left == 0)
                        return -ETIMEDOUT;
                size_t len = line_ready(s);
                if (len > 0)
                        return (long)len;
                int n = xftp_conn_wait(&s->ctl, POLLIN, left, NULL);
                if (n < 0 && n != -EINTR)
                        return n;
                if (n <= 0)
                        continue;
                ssize_t got = xftp_conn_recv(&s->ctl, s->in + s->in_used,
                                             sizeof(s->in) - s->in_used, MSG_DONTWAIT);
                if (got == -EINTR || got == -EAGAIN)
                        continue;
                if (got <= 0)
                        return -EPIPE;
                s->in_used += (size_t)got;
        }
}

static bool anonymous_name(const char *name)
{
        return strcasecmp(name, "anonymous") == 0 || strcasecmp(name, "ftp") == 0;
}

static void cmd_user(struct session *s, const char *name)
{
        if (s->logged_in) {
                session_reply(s, "530 Already logged in; one user per session.");
                return;
        }
        s->user_given = true;
        s->anonymous = anonymous_name(name);
        /* A name no users file can hold matches nothing (and is not cut to one that does). */
        bool valid = s->anonymous || xftpd_user_name_ok(name);
        snprintf(s->user, sizeof(s->user), "%.*s", XFTPD_USER_NAME_MAX, valid ? name : "");
        /* Whether anonymous is allowed shows only at PASS. */
        if (s->anonymous && s->config->anonymous)
                session_reply(s, "331 Anonymous login: any password%s.",
                              s->config->anon_write ? "" : " (read-only)");
        else
                session_reply(s, "331 Password required.");
}

static atomic_bool address_banned; /* lock-free: set in a handler, on any thread */

static void on_ban(int sig)
{
        (void)sig;
        atomic_store(&address_banned, true);
}

static void ban_mask(int how)
{
        sigset_t usr1;

        sigemptyset(&usr1);
        sigaddset(&usr1, SIGUSR1);
        sigprocmask(how, &usr1, NULL);
}

/* The listener keeps SIGUSR1 blocked, so a stray one sent to it sets nothing that its
 * sessions would inherit; each session unblocks it (xftpd_session_run), and a ban sent
 * between its fork and that moment waits, pending, until then. */
void xftpd_session_catch_ban(void)
{
        struct sigaction sa = {.sa_handler = on_ban, .sa_flags = SA_RESTART};

        sigemptyset(&sa.sa_mask);
        sigaction(SIGUSR1, &sa, NULL);
        ban_mask(SIG_BLOCK);
}

/* The store of the user just logged in: its own root (users file, --anon-root) is opened
 * here, as the unprivileged user sessions run as, confined as the server's root is.
 * Returns false when it cannot be, which ends the session. */
static bool open_user_store(struct session *s)
{
        struct ds_error err;
        bool ro = false;
        const char *root =
            s->anonymous ? s->config->anon_root : xftpd_users_root(s->config->users, s->user, &ro);

        s->read_only = s->anonymous ? !s->config->anon_write : ro;
        if (root && xftp_store_open(&s->own_store, root,
                                    s->config->direct_reads ? XFTP_STORE_DIRECT_READS : 0,
                                    s->anonymous ? "--anon-root" : "users file root", &err) < 0) {
                xftpd_log(LOG_ERR, "%s %s: %s", s->user, s->peer_text, err.text);
                session_reply(s, "421 Your store cannot be opened; closing.");
                return false;
        }
        if (root) {
                /* This process has no more use for the server's store: closed, nothing
                 * the user does can reach it. */
                xftp_store_close(s->config->store);
                s->store = s->own_store;
        }
        s->logged_in = true;
        xftpd_log(LOG_INFO, "%s %s logged in%s%s%s%s", s->user, s->peer_text,
                  s->anonymous ? " (anonymous)" : "", s->read_only ? " (read-only)" : "",
                  root ? ", root " : "", root ? root : "");
        session_reply(s, "230 Logged in%s.", s->read_only ? ", read-only" : "");
        return true;
}

/* Returns false when the session must end (too many failures, or a ban on its address). */
static bool cmd_pass(struct session *s, const char *password)
{
        if (s->logged_in) {
                session_reply(s, "230 Already logged in.");
                return true;
        }
        if (atomic_load(&address_banned)) {
                session_reply(s, "421 Too many failed logins from your address.");
                return false;
        }
        if (!s->user_given) {
                session_reply(s, "503 Send USER first.");
                return true;
        }
        bool ok = s->anonymous ? s->config->anonymous
                               : xftpd_users_check(s->config->users, s->user, password);
        s->user_given = false;
        if (ok)
                return open_user_store(s);
        s->fails++;
        xftpd_log(LOG_WARNING, "%s %s failed login %u of %u", s->user, s->peer_text, s->fails,
                  s->config->max_fails);
        throttle_report(s->config->fail_report_fd, &s->peer);
        /* A second's pause makes guessing slow; it ends early on SIGTERM. */
        ds_sleep_until(ds_deadline_in(1000));
        if (s->fails >= s->config->max_fails) {
                session_reply(s, "421 Too many failed logins.");
                return false;
        }
        session_reply(s, "530 Login incorrect.");
        return true;
}

/* Resolves a client's path against the cwd; replies and returns false when it is not one
 * the store takes. */
static bool resolve(struct session *s, const char *arg, char *out)
{
        int rc = xftp_store_path(s->cwd, arg, out, XFTP_STORE_PATH_MAX);
        if (rc < 0)
                session_reply_errno(s, rc, arg);
        return rc == 0;
}

/* "/a/b" for the store's "a/b", with '"' doubled as RFC 959 wants in 257 replies. */
static void quoted_path(const char *path, char *out, size_t len)
{
        size_t used = 0;

        out[used++] = '/';
        for (const char *p = path; *p && used + 3 < len; p++) {
                if (*p == '"')
                        out[used++] = '"';
                out[used++] = *p;
        }
        out[used] = '\0';
}

static void cmd_cwd(struct session *s, const char *arg)
{
        char path[XFTP_STORE_PATH_MAX];
        struct xftp_store_stat st;

        if (!resolve(s, arg, path))
                return;
        int rc = xftp_store_stat(s->store, path, &st);
        if (rc == 0 && !st.dir)
                rc = -ENOTDIR;
        if (rc < 0) {
                session_reply_errno(s, rc, arg);
                return;
        }
        memcpy(s->cwd, path, sizeof(s->cwd));
        session_reply(s, "250 Directory changed.");
}

static void cmd_pwd(struct session *s)
{
        char quoted[2 * XFTP_STORE_PATH_MAX + 2];

        quoted_path(s->cwd, quoted, sizeof(quoted));
        session_reply(s, "257 \"%s\" is the current directory.", quoted);
}

/* MKD, RMD, DELE, RNFR, RNTO: the commands that change names. */
static void cmd_change(struct session *s, enum xftpd_verb verb, const char *arg)
{
        char path[XFTP_STORE_PATH_MAX], quoted[2 * XFTP_STORE_PATH_MAX + 2];
        struct xftp_store_stat st;
        struct xftp_store *store = s->store;

        if (s->read_only) {
                session_reply(s, "550 Permission denied: read-only.");
                return;
        }
        if (!resolve(s, arg, path))
                return;
        int rc = 0;
        switch (verb) {
        case V_MKD:
                rc = xftp_store_mkdir(store, path);
                quoted_path(path, quoted, sizeof(quoted));
                if (rc == 0)
                        session_reply(s, "257 \"%s\" created.", quoted);
                break;
        case V_RMD:
                rc = xftp_store_rmdir(store, path);
                break;
        case V_DELE:
                rc = xftp_store_unlink(store, path);
                break;
        case V_RNFR:
                rc = xftp_store_stat(store, path, &st);
                if (rc == 0) {
                        memcpy(s->rename_from, path, sizeof(s->rename_from));
                        s->rename_pending = true;
                        session_reply(s, "350 Ready for RNTO.");
                }
                break;
        default: /* RNTO */
                if (!s->rename_pending) {
                        session_reply(s, "503 Send RNFR first.");
                        return;
                }
                s->rename_pending = false;
                rc = xftp_store_rename(store, s->rename_from, path);
                break;
        }
        if (rc < 0)
                session_reply_errno(s, rc, arg);
        else if (verb != V_MKD && verb != V_RNFR)
                session_reply(s, "250 %s done.", verb == V_RNTO ? "Rename" : "Removal");
}

static void cmd_size_mdtm(struct session *s, enum xftpd_verb verb, const char *arg)
{
        char path[XFTP_STORE_PATH_MAX];
        struct xftp_store_stat st;

        if (!resolve(s, arg, path))
                return;
        int rc = xftp_store_stat(s->store, path, &st);
        if (rc == 0 && st.dir)
                rc = -EISDIR;
        if (rc < 0) {
                session_reply_errno(s, rc, arg);
                return;
        }
        if (verb == V_SIZE) {
                session_reply(s, "213 %llu", (unsigned long long)st.size);
                return;
        }
        struct tm tm;
        time_t t = (time_t)st.mtime;
        gmtime_r(&t, &tm);
        session_reply(s, "213 %04d%02d%02d%02d%02d%02d", tm.tm_year + 1900, tm.tm_mon + 1,
                      tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

/* MFMT (draft-somers-ftp-mfxx): a file's modification time, so that a client can keep
 * the times of what it uploads. */
static void cmd_mfmt(struct session *s, const char *arg)
{
        char path[XFTP_STORE_PATH_MAX];
        struct xftpd_mfmt mfmt;

        if (s->read_only) {
                session_reply(s, "550 Permission denied: read-only.");
                return;
        }
        if (xftpd_parse_mfmt(arg, &mfmt) < 0) {
                session_reply(s, "501 Expected MFMT YYYYMMDDHHMMSS[.sss] path, a UTC time.");
                return;
        }
        if (!resolve(s, mfmt.path, path))
                return;
        int rc = xftp_store_set_mtime(s->store, path, mfmt.sec, mfmt.nsec);
        if (rc == -EISDIR)
                session_reply(s, "550 %s is a directory; MFMT takes a file.", mfmt.path);
        else if (rc < 0)
                session_reply_errno(s, rc, mfmt.path);
        else
                session_reply(s, "213 Modify=%.*s; %s", (int)mfmt.time_len, arg, mfmt.path);
}

static void cmd_psiz(struct session *s, const char *arg)
{
        char path[XFTP_STORE_PATH_MAX];
        uint64_t size;

        if (!resolve(s, arg, path))
                return;
        int rc = xftp_store_partial_size(s->store, s->user, path, &size);
        if (rc == -EBUSY)
                session_reply(s, "450 An upload of %s is still ending; try again.", arg);
        else if (rc < 0)
                session_reply(s, "550 %s: no partial upload to continue.", arg);
        else
                session_reply(s, "213 %llu", (unsigned long long)size);
}

static void cmd_feat(struct session *s)
{
        char hashes[64];

        snprintf(hashes, sizeof(hashes), "%s%s;%s%s", xftp_hash_name(XFTP_HASH_SHA256),
                 s->hash_algo == XFTP_HASH_SHA256 ? "*" : "", xftp_hash_name(XFTP_HASH_CRC32C),
                 s->hash_algo == XFTP_HASH_CRC32C ? "*" : "");
        static const char *const lines[] = {
            "EPRT",        "EPSV",        "MDTM",        "MFMT", "MLST type*;size*;modify*;perm*;",
            "PASV",        "REST STREAM", "SIZE",        "TVFS", "UTF8",
            "MODE E",      "PARALLEL",    "RANG STREAM", "PSIZ", "ALLO",
            "MODE E KEEP",
        };
        session_reply(s, "211-Extensions supported:");
        for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
                session_reply(s, " %s", lines[i]);
        session_reply(s, " HASH %s", hashes);
        ftps_feat(s);
        xfer_feat_verbs(s);
        session_reply(s, "211 End");
}

static void cmd_opts(struct session *s, const char *arg)
{
        enum xftp_hash_algo algo;
        unsigned streams;

        if (strcasecmp(arg, "UTF8 ON") == 0 || strcasecmp(arg, "UTF8") == 0) {
                session_reply(s, "200 Always in UTF-8.");
        } else if (strcasecmp(arg, "MODE E KEEP") == 0) {
                s->keep = true;
                session_reply(s, "200 MODE E data connections are kept across transfers.");
        } else if (strncasecmp(arg, "RETR ", 5) == 0 || strncasecmp(arg, "STOR ", 5) == 0) {
                if (xftp_modee_parse_parallelism(arg + 5, &streams) < 0) {
                        session_reply(s, "501 Expected Parallelism=N; with N from 1 to %u.",
                                      XFTP_MODEE_MAX_STREAMS);
                        return;
                }
                s->streams = streams;
                session_reply(s, "200 Parallelism set to %u.", streams);
        } else if (strcasecmp(arg, "HASH") == 0) {
                session_reply(s, "200 %s", xftp_hash_name(s->hash_algo));
        } else if (strncasecmp(arg, "HASH ", 5) == 0) {
                if (xftp_hash_parse(arg + 5, &algo) < 0) {
                        session_reply(s, "501 Unknown hash algorithm.");
                        return;
                }
                s->hash_algo = algo;
                session_reply(s, "200 %s", xftp_hash_name(algo));
        } else if (strncasecmp(arg, "MLST", 4) == 0) {
                session_reply(s, "200 MLST OPTS type;size;modify;perm;");
        } else {
                session_reply(s, "501 Option not understood.");
        }
}

static void cmd_stat(struct session *s, const char *arg)
{
        if (arg[0]) {
                xfer_cmd_stat_path(s, V_STAT, arg);
                return;
        }
        session_reply(s, "211-xftpd status:");
        session_reply(s, " Connected from %s", s->peer_text);
        session_reply(s, " Logged in as %s%s", s->user, s->read_only ? " (read-only)" : "");
        session_reply(s, " TYPE I, MODE %c, %u stream%s, block %zu bytes", s->mode, s->streams,
                      s->streams == 1 ? "" : "s", s->config->block);
        session_reply(s, "211 End of status");
}

/* Commands allowed before login. Returns true when handled. */
static bool before_login(struct session *s, const struct xftpd_cmd *cmd, bool *end)
{
        if (ftps_command(s, cmd))
                return true;
        switch (cmd->verb) {
        case V_USER:
                cmd_user(s, cmd->arg);
                return true;
        case V_PASS:
                *end = !cmd_pass(s, cmd->arg);
                return true;
        case V_QUIT:
                session_reply(s, "221 Goodbye.");
                *end = true;
                return true;
        case V_FEAT:
                cmd_feat(s);
                return true;
        case V_SYST:
                session_reply(s, "215 UNIX Type: L8");
                return true;
        case V_NOOP:
                session_reply(s, "200 NOOP ok.");
                return true;
        case V_HELP:
                session_reply(s, "214 RFC 959, 2389, 2428, 3659 and docs/xftp.md.");
                return true;
        case V_OPTS:
                if (strncasecmp(cmd->arg, "UTF8", 4) != 0)
                        return false;
                cmd_opts(s, cmd->arg);
                return true;
        default:
                return false;
        }
}

/* Settings for the next transfer. Returns true when handled. */
static bool transfer_settings(struct session *s, const struct xftpd_cmd *cmd)
{
        switch (cmd->verb) {
        case V_TYPE:
                session_reply(s, "200 Type set to %c.", cmd->type);
                return true;
        case V_MODE:
                s->mode = cmd->type;
                session_reply(s, "200 Mode set to %c.", cmd->type);
                return true;
        case V_STRU:
                session_reply(s, "200 Structure set to F.");
                return true;
        case V_REST:
                s->rest = cmd->num[0];
                session_reply(s, "350 Restarting at %llu.", (unsigned long long)s->rest);
                return true;
        case V_RANG:
                s->range_start = cmd->num[0];
                s->range_end = cmd->num[1];
                if (cmd->num[0] == 1 && cmd->num[1] == 0) /* the draft's reset */
                        s->range_start = s->range_end = 0;
                session_reply(s, "350 Range %llu-%llu.", (unsigned long long)cmd->num[0],
                              (unsigned long long)cmd->num[1]);
                return true;
        case V_ALLO:
                if (s->read_only) {
                        session_reply(s, "550 Permission denied: read-only.");
                        return true;
                }
                s->allocate = cmd->num[0];
                session_reply(s, "200 %llu bytes announced.", (unsigned long long)cmd->num[0]);
                return true;
        default:
                return false;
        }
}

void session_check_paid(struct session *s, int rc)
{
        if (rc >= 0)
                return;
        xftpd_log(LOG_ERR, "%s %s: syncing the directory of the last uploads: %s", s->user,
                  s->peer_text, strerror(-rc));
        if (s->sync_failed == 0)
                s->sync_failed = rc;
}

void session_pay_owed(struct session *s)
{
        session_check_paid(s, xftp_store_pay(&s->owed));
}

/* How long a run of uploads may owe its directory's sync: the command read this long after
 * the first of them pays, whatever it is. */
#define OWED_MAX_NS 500000000ull
/* A client silent this long after a reply has its names made durable meanwhile. */
#define OWED_QUIET_MS 50

/* Whether cmd may leave the directory sync owed: a run of uploads is made of these (lftp:
 * PASV, STOR, MFMT; xftp: EPSV, ALLO, STOR), and none of them lists, reads, moves or
 * removes what is stored. STOR into another directory pays in its commit. */
static bool keeps_owed(const struct session *s, enum xftpd_verb verb)
{
        if (ds_now_ns() - s->owed.since_ns >= OWED_MAX_NS)
                return false;
        switch (verb) {
        case V_STOR:
        case V_APPE:
        case V_MFMT:
        case V_PASV:
        case V_EPSV:
        case V_PORT:
        case V_EPRT:
        case V_TYPE:
        case V_MODE:
        case V_REST:
        case V_ALLO:
        case V_NOOP:
                return true;
        default:
                return false;
        }
}

static void dispatch(struct session *s, const struct xftpd_cmd *cmd, bool *end)
{
        if (s->owed.dir_fd >= 0 && !keeps_owed(s, cmd->verb))
                session_pay_owed(s);
        /* Uploads answered 226 may not survive a crash: no later reply may say all is well
         * (QUIT's 221 is what xftp takes for their durability). */
        if (s->sync_failed < 0) {
                session_reply(s,
                              "421 Syncing the last uploads failed (%s): they may not survive a "
                              "crash; closing.",
                              strerror(-s->sync_failed));
                *end = true;
                return;
        }
        if (before_login(s, cmd, end))
                return;
        if (!s->logged_in) {
                session_reply(s, "530 Log in first.");
                return;
        }
        s->verb = cmd->name;
        if (cmd->verb != V_RNTO && cmd->verb != V_RNFR)
                s->rename_pending = false;
        if (transfer_settings(s, cmd))
                return;
        switch (cmd->verb) {
        case V_CWD:
                cmd_cwd(s, cmd->arg);
                break;
        case V_CDUP:
                cmd_cwd(s, "..");
                break;
        case V_PWD:
                cmd_pwd(s);
                break;
        case V_MKD:
        case V_RMD:
        case V_DELE:
        case V_RNFR:
        case V_RNTO:
                cmd_change(s, cmd->verb, cmd->arg);
                break;
        case V_SIZE:
        case V_MDTM:
                cmd_size_mdtm(s, cmd->verb, cmd->arg);
                break;
        case V_MFMT:
                cmd_mfmt(s, cmd->arg);
                break;
        case V_PSIZ:
                cmd_psiz(s, cmd->arg);
                break;
        case V_OPTS:
                cmd_opts(s, cmd->arg);
                break;
        case V_STAT:
                cmd_stat(s, cmd->arg);
                break;
        case V_ABOR:
                xfer_reset(s);
                session_reply(s, "226 No transfer to abort.");
                break;
        case V_PASV:
        case V_EPSV:
                xfer_cmd_pasv(s, cmd->verb == V_EPSV, cmd->arg);
                break;
        case V_PORT:
        case V_EPRT:
                xfer_cmd_port(s, cmd->verb == V_EPRT, cmd->arg);
                break;
        case V_RPSV:
                xfer_cmd_rpsv(s);
                break;
        case V_RPRT:
                xfer_cmd_rprt(s, cmd->arg);
                break;
        case V_RETR:
                xfer_cmd_retr(s, cmd->arg);
                break;
        case V_STOR:
        case V_APPE:
                xfer_cmd_stor(s, cmd->arg, cmd->verb == V_APPE);
                break;
        case V_LIST:
        case V_NLST:
        case V_MLSD:
                xfer_cmd_list(s, cmd->verb, cmd->arg);
                break;
        case V_MLST:
                xfer_cmd_stat_path(s, V_MLST, cmd->arg);
                break;
        case V_HASH:
                xfer_cmd_hash(s, cmd->arg);
                break;
        default:
                session_reply(s, "502 Command not implemented.");
        }
}

/* An IPv4 client reaching the dual-stack listener shows as ::ffff:a.b.c.d; its data
 * connections are plain IPv4, so the session speaks of it as IPv4. */
static void unmap_v4(struct xftp_addr *addr)
{
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&addr->ss;

        if (addr->ss.ss_family != AF_INET6 || !IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
                return;
        struct sockaddr_in in4 = {.sin_family = AF_INET, .sin_port = in6->sin6_port};
        memcpy(&in4.sin_addr, &in6->sin6_addr.s6_addr[12], 4);
        memset(&addr->ss, 0, sizeof(addr->ss));
        memcpy(&addr->ss, &in4, sizeof(in4));
        addr->len = sizeof(in4);
}

static int session_init(struct session *s, const struct xftpd_config *config, int ctl)
{
        struct ds_error err;

        memset(s, 0, sizeof(*s));
        s->config = config;
        s->store = config->store;
        xftp_conn_plain(&s->ctl, ctl);
        s->mode = 'S';
        s->streams = 1;
        s->pasv_fd = -1;
        s->owed = XFTP_STORE_OWED_NONE;
        s->hash_algo = XFTP_HASH_SHA256;
        if (xftp_addr_local(ctl, &s->local) < 0 || xftp_addr_peer(ctl, &s->peer) < 0)
                return -ENOTCONN;
        unmap_v4(&s->local);
        unmap_v4(&s->peer);
        xftp_addr_text(&s->peer, s->peer_text, sizeof(s->peer_text));
        /* Telnet's Synch (IAC DM, sent urgent before ABOR) stays in the stream, where the
         * parser drops it. */
        int on = 1;
        setsockopt(ctl, SOL_SOCKET, SO_OOBINLINE, &on, sizeof(on));
        /* Replies go out at once: with Nagle, the second line of a reply (FEAT's, or a 226
         * after a 150) waited for the client's delayed ACK, 40 ms a time. */
        setsockopt(ctl, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
        if (ftps_session_init(s) < 0)
                return -EIO;
        if (ds_live_open(&s->live, "xftpd", "serve", "tcp", NULL, &err) == 0) {
                ds_live_set_peer(s->live, s->peer_text);
                ds_live_set_msg_size(s->live, config->block);
        }
        return 0;
}

/* The next command line (session_read_line), by deadline_ns. While a directory sync is
 * owed the first wait is short: a client that pauses has it paid meanwhile. */
static long read_command(struct session *s, uint64_t deadline_ns)
{
        if (s->owed.dir_fd >= 0) {
                uint64_t soon = ds_deadline_in(OWED_QUIET_MS);
                long len = session_read_line(s, soon < deadline_ns ? soon : deadline_ns);
                if (len != -ETIMEDOUT || soon >= deadline_ns)
                        return len;
                session_pay_owed(s);
        }
        return session_read_line(s, deadline_ns);
}

int xftpd_session_run(const struct xftpd_config *config, int ctl)
{
        atomic_store(&address_banned, false);
        ban_mask(SIG_UNBLOCK);
        struct session *s = calloc(1, sizeof(*s));
        struct xftpd_cmd *cmd = malloc(sizeof(*cmd));

        if (!s || !cmd || session_init(s, config, ctl) < 0) {
                free(s);
                free(cmd);
                close(ctl);
                return 1;
        }
        uint64_t login_deadline = ds_deadline_in(config->login_ms);
        bool end = session_reply(s, "220 xftpd %s ready.", DS_VERSION) < 0;
        while (!end && !atomic_load(&s->ctl_gone)) {
                uint64_t deadline = ds_deadline_in(config->idle_ms);
                if (!s->logged_in && login_deadline < deadline)
                        deadline = login_deadline;
                long len = read_command(s, deadline);
                if (len < 0) {
                        if (len == -ETIMEDOUT)
                                session_reply(s, "421 %s, closing.",
                                              s->logged_in ? "Idle too long" : "No login in time");
                        else if (len == -EINTR)
                                session_reply(s, "421 Server shutting down.");
                        break;
                }
                const char *refusal;
                int code = xftpd_cmd_parse(s->in, (size_t)len, cmd, &refusal);
                session_consume(s, (size_t)len);
                if (code != 0)
                        session_reply(s, "%s", refusal);
                else
                        dispatch(s, cmd, &end);
        }
        session_pay_owed(s); /* however the session ends */
        xfer_reset(s);
        xfer_drop_kept(s);
        xfer_free_lent(s);
        xfer_free_verbs_buffers(s);
        watch_free(s);
        xftp_store_close(s->own_store);
        if (s->live)
                ds_live_close(s->live);
        xftp_conn_close(&s->ctl);
        free(cmd);
        free(s);
        return 0;
}
