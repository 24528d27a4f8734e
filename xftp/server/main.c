/* xftpd: an FTP server for bulk copies. Reads its settings (options.c), binds, drops root,
 * then accepts and forks one process per session (session.c); SIGHUP reloads the settings.
 * See xftpd(8) and docs/xftp.md. */
#include "conf.h"
#include "guard.h"
#include "log.h"
#include "options.h"
#include "session.h"
#include "throttle.h"
#include "users.h"
#include "verbs.h"
#include "xtls.h"

#include <dragstrip/cli.h>
#include <dragstrip/clock.h>
#include <dragstrip/error.h>
#include <dragstrip/live.h>
#include <dragstrip/net.h>
#include <dragstrip/serve.h>
#include <dragstrip/stop.h>

#include <err.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* Starts a session for the client on fd unless a limit refuses it (421 and closed). */
static void start_session(int listen_fd, int fd, struct guard_sessions *table,
                          const struct throttle *throttle, const struct xftpd_config *config)
{
        char refusal[96];
        struct xftp_addr peer;
        unsigned ban_s = 0;
        const char *why =
            xftp_addr_peer(fd, &peer) < 0 ? "421 Gone.\r\n" : guard_sessions_refuse(table, &peer);

        if (!why && (ban_s = throttle_banned(throttle, &peer, ds_now_ns())) > 0) {
                snprintf(refusal, sizeof(refusal),
                         "421 Too many failed logins from your address; try again in %u s.\r\n",
                         ban_s);
                why = refusal;
        }
        if (why) {
                struct xftp_conn ctl;
                xftp_conn_plain(&ctl, fd);
                (void)!xftp_conn_send(&ctl, why, strlen(why), MSG_DONTWAIT);
                xftp_conn_close(&ctl);
                return;
        }
        unsigned slot = guard_sessions_free_slot(table);
        pid_t pid = fork();
        if (pid == 0) {
                struct xftpd_config own = *config;
                own.budget_slot = slot;
                /* The listener's reload (or a hang-up) is nothing to a session: its
                 * transfer goes on. SIGTERM still ends it. */
                signal(SIGHUP, SIG_IGN);
                close(listen_fd);
                close(throttle->report_fd[0]); /* sessions only write to the listener */
                _exit(xftpd_session_run(&own, fd));
        }
        if (pid < 0)
                xftpd_log(LOG_ERR, "fork: %s", strerror(errno));
        else
                guard_sessions_add(table, pid, &peer, slot);
        close(fd);
}

/* Tells every session from an address now banned (session.h): a guesser's sessions opened
 * before the ban get no more guesses. The table holds only unreaped children, so no pid
 * here can belong to another process. */
static void tell_banned(const struct guard_sessions *table, const struct throttle *throttle)
{
        uint64_t now = ds_now_ns();

        for (unsigned i = 0; i < table->count; i++)
                if (throttle_banned(throttle, &table->hosts[i], now) > 0)
                        kill(table->pids[i], SIGUSR1);
}

/* The listener's state: the settings now in force and what they opened. */
struct server {
        int argc;
        char **argv;
        struct options o; /* its strings point into argv and o.config_text */
        struct xftpd_users *users;
        int xferlog_fd;
        struct xftpd_config config; /* each session's copy is taken at its fork */
};

static atomic_bool reload_asked; /* lock-free: set in a handler */

static void on_hup(int sig)
{
        (void)sig;
        atomic_store(&reload_asked, true);
}

/* SIGHUP, which lib makes a stop, is the listener's reload (after ds_cli_catch_stop). */
static void catch_reload(void)
{
        struct sigaction sa = {.sa_handler = on_hup, .sa_flags = SA_RESTART};

        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGHUP, &sa, NULL) != 0)
                err(1, "sigaction");
}

static bool differ(const char *a, const char *b)
{
        return (a == NULL) != (b == NULL) || (a && strcmp(a, b) != 0);
}

/* The settings a running listener cannot take: they hold its socket, its store, its
 * user, its shared tables. A change is logged and the old value kept. */
/* The settings only a restart changes outlive the config text they were cut from: a
 * reload frees that text and keeps them (keep_restart_only). Called once, at start. */
static void own_restart_only(struct options *o)
{
        const char **held[] = {&o->listen_addr, &o->roots, &o->run_as, &o->tls_cert, &o->tls_key};

        for (size_t i = 0; i < sizeof(held) / sizeof(held[0]); i++)
                if (*held[i] && !(*held[i] = strdup(*held[i])))
                        errx(1, "out of memory");
}

static void keep_restart_only(const struct options *old, struct options *o)
{
        const struct {
                const char *key;
                bool changed;
        } held[] = {
            {"port", old->port != o->port},
            {"listen", differ(old->listen_addr, o->listen_addr)},
            {"root", differ(old->roots, o->roots)},
            {"direct-reads", old->direct_reads != o->direct_reads},
            {"run-as", differ(old->run_as, o->run_as)},
            {"allow-root", old->allow_root != o->allow_root},
            {"syslog", old->syslog != o->syslog},
            {"block", old->block != o->block},
            {"max-mem", old->max_mem != o->max_mem},
            {"max-sessions", old->max_sessions != o->max_sessions},
            {"max-per-host", old->max_per_host != o->max_per_host},
            {"max-host-fails", old->max_host_fails != o->max_host_fails},
            {"ban-time", old->ban_ms != o->ban_ms},
            {"tls-cert", differ(old->tls_cert, o->tls_cert)},
            {"tls-key", differ(old->tls_key, o->tls_key)},
            {"tls-required", old->tls_required != o->tls_required},
        };
        for (size_t i = 0; i < sizeof(held) / sizeof(held[0]); i++)
                if (held[i].changed)
                        xftpd_log(LOG_WARNING, "reload: %s changed: ignored until a restart",
                                  held[i].key);
        o->port = old->port;
        o->listen_addr = old->listen_addr;
        o->roots = old->roots;
        o->direct_reads = old->direct_reads;
        o->run_as = old->run_as;
        o->allow_root = old->allow_root;
        o->syslog = old->syslog;
        o->block = old->block;
        o->max_mem = old->max_mem;
        o->max_sessions = old->max_sessions;
        o->max_per_host = old->max_per_host;
        o->max_host_fails = old->max_host_fails;
        o->ban_ms = old->ban_ms;
        o->tls_cert = old->tls_cert;
        o->tls_key = old->tls_key;
        o->tls_required = old->tls_required;
}

/* Whether text (with the command line) gives good settings. The option handlers exit on
 * a bad value, as they should at start, so a child tries them first: its one line on
 * stderr, sent through the log, says what is wrong. It answers through a pipe, not its
 * exit status, which a reaper of sessions may collect first; it only parses, but is
 * waited for 5 s at most. */
static bool settings_ok(const struct server *sv, char *text)
{
        struct options tried;
        int answer[2];
        char byte;

        if (pipe2(answer, O_CLOEXEC) < 0) {
                xftpd_log(LOG_ERR, "reload: pipe: %s", strerror(errno));
                return false;
        }
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
                close(answer[0]);
                /* err(3) writes to stderr: so the complaint is stamped, or goes to syslog,
                 * as every other line of the listener's is. */
                FILE *log = xftpd_log_stream();
                if (log)
                        stderr = log;
                xftpd_options_parse(sv->argc, sv->argv, text, &tried);
                _exit(write(answer[1], "y", 1) == 1 ? 0 : 1);
        }
        close(answer[1]);
        if (pid < 0)
                xftpd_log(LOG_ERR, "reload: fork: %s", strerror(errno));
        int ready = pid > 0 ? ds_poll_one(answer[0], POLLIN, 5000) : -1;
        bool ok = ready > 0 && read(answer[0], &byte, 1) == 1; /* else EOF: it exited */
        close(answer[0]);
        if (pid > 0 && ready <= 0)
                kill(pid, SIGKILL); /* stuck, or the listener is stopping */
        if (pid > 0)
                waitpid(pid, NULL, 0);
        return ok;
}

/* The transfer log, reopened for logrotate: the new file takes the old descriptor's
 * number. Sessions already running keep writing to the file they had. */
static void reopen_xferlog(struct server *sv, const char *path)
{
        if (!path) {
                if (sv->xferlog_fd >= 0)
                        close(sv->xferlog_fd);
                sv->xferlog_fd = -1;
                return;
        }
        int fd = xftpd_xferlog_open(path);
        if (fd < 0) {
                xftpd_log(LOG_ERR, "reload: --xferlog %s: %s; still writing the old one", path,
                          strerror(-fd));
                return;
        }
        if (sv->xferlog_fd >= 0 && fd != sv->xferlog_fd) {
                dup3(fd, sv->xferlog_fd, O_CLOEXEC);
                close(fd);
        } else {
                sv->xferlog_fd = fd;
        }
}

/* The settings a session takes, from o. */
static void set_session_config(struct server *sv)
{
        const struct options *o = &sv->o;
        struct xftpd_config *c = &sv->config;

        c->users = sv->users;
        c->anonymous = o->anonymous;
        c->anon_root = o->anon_root;
        c->anon_write = o->anon_write;
        c->direct_reads = o->direct_reads;
        c->fxp = o->fxp;
        c->no_rdma = o->no_rdma;
        c->block = o->block;
        c->idle_ms = o->idle_ms;
        c->login_ms = o->login_ms;
        c->data_ms = o->data_ms;
        c->max_fails = o->max_fails;
        c->xferlog_fd = sv->xferlog_fd;
        c->pasv_lo = o->pasv_lo;
        c->pasv_hi = o->pasv_hi;
        c->pasv_addr = o->pasv_addr;
}

/* Whether anonymous's store opens, as the user sessions run as (call after the drop): a
 * wrong --anon-root is found at start or reload, not at the first anonymous login.
 * Returns 0 or a negative errno with err filled. */
static int anon_root_check(const char *anon_root, struct ds_error *err)
{
        struct xftp_store *anon_store;
        int rc = xftp_store_open(&anon_store, anon_root, 0, "--anon-root", err);

        if (rc == 0)
                xftp_store_close(anon_store);
        return rc;
}

/* SIGHUP: the config file and the users file read again, the transfer log reopened. New
 * sessions get them; a file that is broken changes nothing. */
static void reload(struct server *sv)
{
        struct ds_error err;
        struct options o;
        struct xftpd_users *users = NULL;
        char *text = NULL;

        if (sv->o.config_file && !(text = xftpd_conf_read(sv->o.config_file, &err))) {
                xftpd_log(LOG_ERR, "reload: %s; the old settings are kept", err.text);
                return;
        }
        if (!settings_ok(sv, text)) {
                xftpd_log(LOG_ERR, "reload: bad settings (said above); the old ones are kept");
                free(text);
                return;
        }
        xftpd_options_parse(sv->argc, sv->argv, text, &o); /* cannot fail now */
        if ((o.users_file && xftpd_users_load(&users, o.users_file, &err) < 0) ||
            (o.anon_root && anon_root_check(o.anon_root, &err) < 0)) {
                xftpd_log(LOG_ERR, "reload: %s; the old settings are kept", err.text);
                xftpd_users_free(users);
                free(text);
                return;
        }
        keep_restart_only(&sv->o, &o);
        reopen_xferlog(sv, o.xferlog);
        xftpd_users_free(sv->users);
        free(sv->o.config_text);
        sv->users = users;
        sv->o = o;
        set_session_config(sv);
        /* Each file named as what it is: either may be missing (no -c, --anonymous only). */
        xftpd_log(LOG_INFO, "reloaded%s%s%s%s%s%s", o.config_file ? " config file " : "",
                  o.config_file ? o.config_file : "", o.config_file && o.users_file ? " and" : "",
                  o.users_file ? " users file " : "", o.users_file ? o.users_file : "",
                  o.config_file || o.users_file ? "" : ": no config or users file to read");
}

/* Accepts until SIGTERM, one child process per session. Returns the exit status. */
static int serve(int listen_fd, struct server *sv, struct throttle *throttle)
{
        struct guard_sessions table;
        struct ds_accept_guard shortage = {0};
        int status = 0;
        FILE *log = xftpd_log_stream();

        if (!log)
                log = stderr;
        if (guard_sessions_init(&table, sv->o.max_sessions, sv->o.max_per_host, sv->config.budget) <
            0)
                errx(1, "out of memory");
        while (!ds_stopping()) {
                if (atomic_exchange(&reload_asked, false))
                        reload(sv);
                /* Short waits: failed logins that sessions report are counted within one. */
                int ready = ds_poll_one(listen_fd, POLLIN, DS_STOP_SLICE_MS);
                /* Sessions that ended leave the table at every wakeup, so a killed one's
                 * share of the budget comes back and no zombie waits for the next client. */
                guard_sessions_reap(&table);
                if (throttle_collect(throttle, ds_now_ns()) > 0)
                        tell_banned(&table, throttle);
                if (ready == 0)
                        continue;
                int fd = ready < 0 ? ready : accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
                if (fd < 0 && ready > 0)
                        fd = -errno;
                if (fd == -EAGAIN || fd == -EWOULDBLOCK)
                        continue; /* the client left between poll and accept */
                if (fd < 0 && ds_accept_survive(&shortage, fd, "xftpd: accept", log))
                        continue;
                if (fd < 0) {
                        xftpd_log(LOG_ERR, "accept: %s", strerror(-fd));
                        status = 1;
                        break;
                }
                ds_accept_ok(&shortage);
                start_session(listen_fd, fd, &table, throttle, &sv->config);
        }
        guard_sessions_end(&table, 5000);
        xftpd_log(LOG_INFO, "stopped");
        if (log != stderr)
                fclose(log);
        return status;
}

int main(int argc, char **argv)
{
        static struct server sv;
        struct ds_error err;
        struct xftp_store *store;
        static struct throttle throttle; /* a few dozen KiB: not on the stack */

        sv.argc = xftpd_options_take_no_stats(argc, argv);
        sv.argv = argv;
        xftpd_options_parse(sv.argc, argv, xftpd_options_read_config(sv.argc, argv), &sv.o);
        own_restart_only(&sv.o);
        const struct options *o = &sv.o;
        xftpd_log_open(o->syslog);
        if (o->users_file && xftpd_users_load(&sv.users, o->users_file, &err) < 0)
                errx(1, "%s", err.text);
        struct xftp_tls *tls = NULL; /* before the drop: the key may be root's alone */
        if (o->tls_cert && xftp_tls_server(&tls, o->tls_cert, o->tls_key, &err) < 0)
                errx(1, "%s", err.text);
        if (xftp_store_open(&store, o->roots, o->direct_reads ? XFTP_STORE_DIRECT_READS : 0,
                            "--root", &err) < 0)
                errx(1, "%s", err.text);
        /* Before the port opens: a SIGUSR1 sent once it listens is a stray one to ignore,
         * not a default action that ends the server; a SIGTERM or SIGHUP that comes as it
         * opens is a stop or a reload, not the default action either. */
        xftpd_session_catch_ban();
        ds_cli_catch_stop(NULL); /* one stop flag: ds_stopping() */
        catch_reload();
        int listen_fd = ds_net_listen(o->listen_addr, o->port, SOCK_STREAM, &err);
        if (listen_fd < 0)
                errx(1, "%s", err.text);
        if (fcntl(listen_fd, F_SETFL, O_NONBLOCK) < 0)
                errx(1, "listening socket: %s", strerror(errno));
        int rc = throttle_init(&throttle, o->max_host_fails, o->ban_ms);
        if (rc < 0)
                errx(1, "failed-login table: %s", strerror(-rc));
        /* Opened as root: the log may live where only root writes. */
        sv.xferlog_fd = o->xferlog ? xftpd_xferlog_open(o->xferlog) : -1;
        if (o->xferlog && sv.xferlog_fd < 0)
                errx(1, "--xferlog %s: %s", o->xferlog, strerror(-sv.xferlog_fd));
        char first_root[PATH_MAX];
        snprintf(first_root, sizeof(first_root), "%.*s", (int)strcspn(o->roots, ","), o->roots);
        xfer_verbs_allow_locking(o->max_mem); /* while root may still raise the limit */
        if (guard_drop_privileges(o->run_as, first_root, o->allow_root, sv.xferlog_fd, &err) < 0)
                errx(1, "%s", err.text);
        if (o->anon_root && anon_root_check(o->anon_root, &err) < 0)
                errx(1, "%s", err.text);
        struct ds_shared_budget *budget;
        rc = ds_shared_budget_create(&budget, o->max_mem, o->max_sessions);
        if (rc < 0)
                errx(1, "memory budget: %s", strerror(-rc));

        sv.config = (struct xftpd_config){
            .store = store,
            .fail_report_fd = throttle.report_fd[1],
            .budget = budget,
            .tls = tls,
            .tls_required = o->tls_required,
        };
        set_session_config(&sv);
        unsigned width = xftp_store_width(store);
        xftpd_log(LOG_INFO, "serving %s%s on port %u", o->roots, width > 1 ? " (striped)" : "",
                  o->port);
        int status = serve(listen_fd, &sv, &throttle);
        close(listen_fd);
        throttle_close(&throttle);
        ds_shared_budget_destroy(budget);
        xftp_store_close(store);
        xftpd_users_free(sv.users);
        free(sv.o.config_text);
        if (sv.xferlog_fd >= 0)
                close(sv.xferlog_fd);
        xftp_tls_free(tls);
        return status;
}
