/* xftpd: an FTP server for bulk copies. Parses options, binds, drops root, then accepts
 * and forks one process per session (session.c). See xftpd(8) and docs/xftp.md. */
#include "conf.h"
#include "guard.h"
#include "log.h"
#include "session.h"
#include "throttle.h"
#include "users.h"

#include <dragstrip/cli.h>
#include <dragstrip/clock.h>
#include <dragstrip/error.h>
#include <dragstrip/live.h>
#include <dragstrip/net.h>
#include <dragstrip/serve.h>
#include <dragstrip/size.h>
#include <dragstrip/stop.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <err.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

static void usage(void)
{
        printf(
            "usage: xftpd -p PORT --root DIR[,DIR...] (--users FILE | --anonymous) [options]\n"
            "       xftpd -c FILE [options]\n"
            "       xftpd --add-user FILE NAME [--home DIR[,DIR...]] [--read-only]\n"
            "                                    (the password comes from stdin)\n"
            "  -c, --config FILE      settings from FILE: lines `key = value`, the keys\n"
            "                         the long options below (flags: yes or no); the\n"
            "                         command line overrides it; SIGHUP reads it again\n"
            "  -p, --port PORT        port to listen on (default 21)\n"
            "  --root DIR[,DIR...]    the store: a directory, or a striped set (one per disk)\n"
            "  --users FILE           users, lines name:hash[:root[:ro]]: a crypt(3) hash,\n"
            "                         the user's own store (default --root), ro: read-only\n"
            "  --anonymous            also serve USER anonymous, read-only\n"
            "  --anon-root DIR[,DIR...]  anonymous's store (default: --root)\n"
            "  --anon-write           anonymous may also write\n"
            "  --listen ADDR          listen on ADDR only (default: every IPv6 and IPv4 address)\n"
            "  -b, --block SIZE       buffer and MODE E block size (default 4M)\n"
            "  --direct-reads         read a one-directory store with O_DIRECT\n"
            "  --max-sessions N       sessions at once (default 64)\n"
            "  --max-per-host N       sessions from one address (default 16)\n"
            "  --idle SEC             end a session silent this long, or not taking a\n"
            "                         reply within it (default 300)\n"
            "  --login-timeout SEC    end a session not logged in by then (default 30)\n"
            "  --data-timeout SEC     deadline of each data connection's set-up (default 30)\n"
            "  --max-mem SIZE         transfer buffers of all sessions together; a transfer\n"
            "                         beyond it is refused with 451 (default: RAM/8)\n"
            "  --max-fails N          failed logins before a session ends (default 3)\n"
            "  --max-host-fails N     failed logins from one address, over all its\n"
            "                         sessions, before it is refused (default 10)\n"
            "  --ban-time SEC         how long such an address is refused (default 60)\n"
            "  --fxp                  let password users copy to and from other servers\n"
            "                         (data connections with a host not the client's)\n"
            "  --pasv-ports LO-HI     passive data ports only from this range\n"
            "  --pasv-address ADDR    the IPv4 address PASV replies name (behind NAT)\n"
            "  --syslog               log to syslog (facility ftp), not to stderr\n"
            "  --xferlog FILE         one line per transfer in the wu-ftpd xferlog format\n"
            "  --run-as USER          started as root, serve as USER (default: the owner\n"
            "                         of the first --root directory)\n"
            "  --allow-root           allow serving as root\n"
            "  --no-stats             publish no live counters for tach\n"
            "  -h, --help             this text;  --version  the version\n");
}

struct options {
        uint16_t port;
        const char *roots, *users_file, *listen_addr, *run_as, *xferlog, *anon_root;
        const char *config_file, *add_file, *home;
        char *config_text; /* the file's text, cut into the values above; freed with o */
        bool anonymous, anon_write, allow_root, direct_reads, fxp, syslog, read_only;
        uint16_t pasv_lo, pasv_hi;
        struct ds_ftp_addr pasv_addr;
        size_t block;
        uint64_t max_mem;
        unsigned max_sessions, max_per_host, max_fails, max_host_fails;
        int idle_ms, login_ms, data_ms, ban_ms;
};

enum {
        OPT_ROOT = 256,
        OPT_USERS,
        OPT_ANON,
        OPT_LISTEN,
        OPT_MAX_SESSIONS,
        OPT_MAX_PER_HOST,
        OPT_IDLE,
        OPT_LOGIN,
        OPT_DATA,
        OPT_MAX_FAILS,
        OPT_MAX_HOST_FAILS,
        OPT_BAN_TIME,
        OPT_RUN_AS,
        OPT_ALLOW_ROOT,
        OPT_ADD_USER,
        OPT_DIRECT_READS,
        OPT_FXP,
        OPT_MAX_MEM,
        OPT_PASV_PORTS,
        OPT_PASV_ADDRESS,
        OPT_SYSLOG,
        OPT_XFERLOG,
        OPT_ANON_ROOT,
        OPT_ANON_WRITE,
        OPT_HOME,
        OPT_READ_ONLY,
        OPT_VERSION
};

static unsigned count_arg(const char *opt, const char *arg, unsigned max)
{
        char *end;
        errno = 0;
        unsigned long value = strtoul(arg, &end, 10);
        if (errno || end == arg || *end || arg[0] == '-' || value < 1 || value > max)
                errx(2, "%s: '%s' is not a count from 1 to %u", opt, arg, max);
        return (unsigned)value;
}

/* --pasv-ports LO-HI: 1024 <= LO <= HI <= 65535 (a privileged port is never a data port:
 * the server no longer holds the right to bind one). */
static void pasv_ports_arg(const char *name, const char *arg, struct options *o)
{
        unsigned lo, hi;
        int used = 0;

        if (sscanf(arg, "%5u-%5u%n", &lo, &hi, &used) != 2 || arg[used] || !isdigit(arg[0]) ||
            lo < 1024 || hi > 65535 || lo > hi)
                errx(2, "%s: '%s' is not a range LO-HI of ports from 1024 to 65535", name, arg);
        o->pasv_lo = (uint16_t)lo;
        o->pasv_hi = (uint16_t)hi;
}

/* --pasv-address ADDR: the IPv4 address clients reach the server by. */
static void pasv_address_arg(const char *name, const char *arg, struct options *o)
{
        struct sockaddr_in *sin = (struct sockaddr_in *)&o->pasv_addr.ss;

        memset(&o->pasv_addr, 0, sizeof(o->pasv_addr));
        sin->sin_family = AF_INET;
        if (inet_pton(AF_INET, arg, &sin->sin_addr) != 1)
                errx(2, "%s: '%s' is not an IPv4 address (PASV names only those)", name, arg);
        o->pasv_addr.len = sizeof(*sin);
}

/* Reads the password for --add-user: twice without echo on a terminal, else one line. */
static void read_password(char *out, size_t len)
{
        char again[256];
        struct termios saved, quiet;
        bool tty = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved) == 0;

        for (int round = 0; round < (tty ? 2 : 1); round++) {
                char *into = round == 0 ? out : again;
                size_t room = round == 0 ? len : sizeof(again);
                if (tty) {
                        fprintf(stderr, round == 0 ? "Password: " : "Again: ");
                        quiet = saved;
                        quiet.c_lflag &= ~(tcflag_t)ECHO;
                        tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
                }
                bool got = fgets(into, (int)room, stdin) != NULL;
                if (tty) {
                        tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
                        fputc('\n', stderr);
                }
                if (!got)
                        errx(1, "--add-user: no password on stdin");
                if (!strchr(into, '\n') && !feof(stdin))
                        errx(2, "--add-user: password longer than %zu bytes", room - 2);
                into[strcspn(into, "\r\n")] = '\0';
        }
        if (tty && strcmp(out, again) != 0)
                errx(1, "--add-user: the passwords differ");
        explicit_bzero(again, sizeof(again));
        if (!out[0])
                errx(2, "--add-user: empty password");
}

static _Noreturn void add_user(const char *file, const char *name, const struct options *o)
{
        char password[256];
        struct ds_error err;

        if (!xftpd_user_name_ok(name))
                errx(2, "--add-user: '%s' is not a user name (1 to %u of A-Z a-z 0-9 . _ -)", name,
                     XFTPD_USER_NAME_MAX);
        if (o->home && !xftpd_users_root_ok(o->home))
                errx(2, "--home %s: expected absolute directories separated by commas", o->home);
        read_password(password, sizeof(password));
        int rc = xftpd_users_add(file, name, password, o->home, o->read_only, &err);
        explicit_bzero(password, sizeof(password));
        if (rc < 0)
                errx(1, "--add-user: %s", err.text);
        exit(0);
}

/* One option into o, from the command line (name "--port", "-p") or the config file
 * (name "FILE line N: port"): the one place each is checked. A flag comes here only when
 * set ("yes" in the file, conf.h). --help, --version and bad values exit here. */
static void take_option(int c, const char *arg, const char *name, void *ctx)
{
        struct options *o = ctx;

        switch (c) {
        case 'p':
                o->port = ds_cli_port(name, arg);
                break;
        case 'b':
                o->block = ds_cli_size(name, arg, 64u << 10, 256u << 20);
                break;
        case 'c':
                o->config_file = arg;
                break;
        case OPT_ROOT:
                o->roots = arg;
                break;
        case OPT_USERS:
                o->users_file = arg;
                break;
        case OPT_ANON:
                o->anonymous = true;
                break;
        case OPT_ANON_ROOT:
                o->anon_root = arg;
                break;
        case OPT_ANON_WRITE:
                o->anon_write = true;
                break;
        case OPT_LISTEN:
                o->listen_addr = arg;
                break;
        case OPT_MAX_SESSIONS:
                o->max_sessions = count_arg(name, arg, 10000);
                break;
        case OPT_MAX_PER_HOST:
                o->max_per_host = count_arg(name, arg, 10000);
                break;
        case OPT_IDLE:
                o->idle_ms = ds_cli_ms(name, arg);
                break;
        case OPT_LOGIN:
                o->login_ms = ds_cli_ms(name, arg);
                break;
        case OPT_DATA:
                o->data_ms = ds_cli_ms(name, arg);
                break;
        case OPT_MAX_MEM:
                o->max_mem = ds_cli_size(name, arg, 1u << 20, UINT64_MAX / 2);
                break;
        case OPT_MAX_FAILS:
                o->max_fails = count_arg(name, arg, 1000);
                break;
        case OPT_MAX_HOST_FAILS:
                o->max_host_fails = count_arg(name, arg, 100000);
                break;
        case OPT_BAN_TIME:
                o->ban_ms = ds_cli_ms(name, arg);
                break;
        case OPT_RUN_AS:
                o->run_as = arg;
                break;
        case OPT_ALLOW_ROOT:
                o->allow_root = true;
                break;
        case OPT_DIRECT_READS:
                o->direct_reads = true;
                break;
        case OPT_FXP:
                o->fxp = true;
                break;
        case OPT_PASV_PORTS:
                pasv_ports_arg(name, arg, o);
                break;
        case OPT_PASV_ADDRESS:
                pasv_address_arg(name, arg, o);
                break;
        case OPT_SYSLOG:
                o->syslog = true;
                break;
        case OPT_XFERLOG:
                o->xferlog = arg;
                break;
        case OPT_ADD_USER:
                o->add_file = arg;
                break;
        case OPT_HOME:
                o->home = arg;
                break;
        case OPT_READ_ONLY:
                o->read_only = true;
                break;
        case 'h':
                usage();
                exit(0);
        case OPT_VERSION:
                printf("xftpd %s\n", DS_VERSION);
                exit(0);
        }
}

static const struct option longs[] = {
    {"port", required_argument, NULL, 'p'},
    {"block", required_argument, NULL, 'b'},
    {"config", required_argument, NULL, 'c'},
    {"root", required_argument, NULL, OPT_ROOT},
    {"users", required_argument, NULL, OPT_USERS},
    {"anonymous", no_argument, NULL, OPT_ANON},
    {"anon-root", required_argument, NULL, OPT_ANON_ROOT},
    {"anon-write", no_argument, NULL, OPT_ANON_WRITE},
    {"listen", required_argument, NULL, OPT_LISTEN},
    {"max-sessions", required_argument, NULL, OPT_MAX_SESSIONS},
    {"max-per-host", required_argument, NULL, OPT_MAX_PER_HOST},
    {"idle", required_argument, NULL, OPT_IDLE},
    {"login-timeout", required_argument, NULL, OPT_LOGIN},
    {"data-timeout", required_argument, NULL, OPT_DATA},
    {"max-mem", required_argument, NULL, OPT_MAX_MEM},
    {"max-fails", required_argument, NULL, OPT_MAX_FAILS},
    {"max-host-fails", required_argument, NULL, OPT_MAX_HOST_FAILS},
    {"ban-time", required_argument, NULL, OPT_BAN_TIME},
    {"run-as", required_argument, NULL, OPT_RUN_AS},
    {"allow-root", no_argument, NULL, OPT_ALLOW_ROOT},
    {"direct-reads", no_argument, NULL, OPT_DIRECT_READS},
    {"fxp", no_argument, NULL, OPT_FXP},
    {"pasv-ports", required_argument, NULL, OPT_PASV_PORTS},
    {"pasv-address", required_argument, NULL, OPT_PASV_ADDRESS},
    {"syslog", no_argument, NULL, OPT_SYSLOG},
    {"xferlog", required_argument, NULL, OPT_XFERLOG},
    {"add-user", required_argument, NULL, OPT_ADD_USER},
    {"home", required_argument, NULL, OPT_HOME},
    {"read-only", no_argument, NULL, OPT_READ_ONLY},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

/* Not settings of the server: the config file refuses them as unknown keys. */
static const char *const not_in_file[] = {"config", "add-user", "home", "read-only",
                                          "help",   "version",  NULL};

/* The command line, in order, into o. With take false only -c is kept (the first pass,
 * which finds the config file that the command line then overrides). */
static void take_command_line(int argc, char **argv, struct options *o, bool take)
{
        char name[64];
        int c, index = -1;

        optind = 0; /* getopt's full reset: the command line is read more than once */
        opterr = 0;
        while ((c = getopt_long(argc, argv, ":p:b:c:h", longs, &index)) != -1) {
                if (c == '?' || c == ':') {
                        if (take)
                                ds_cli_bad_option("xftpd", argv, c);
                } else if (take || c == 'c') {
                        if (index >= 0)
                                snprintf(name, sizeof(name), "--%s", longs[index].name);
                        else
                                snprintf(name, sizeof(name), "-%c", c);
                        take_option(c, optarg, name, o);
                }
                index = -1;
        }
}

/* The settings: the defaults, then the config file's text (NULL: none; o owns it after),
 * then the command line; exits 2 on the first bad one. --add-user exits here once done. */
static void parse_options(int argc, char **argv, char *config_text, struct options *o)
{
        *o = (struct options){.port = 21,
                              .block = 4u << 20,
                              .max_sessions = 64,
                              .max_per_host = 16,
                              .max_fails = 3,
                              .max_host_fails = 10,
                              .ban_ms = 60000,
                              .idle_ms = 300000,
                              .login_ms = 30000,
                              .data_ms = 30000,
                              .config_text = config_text};
        take_command_line(argc, argv, o, false);
        if (config_text)
                xftpd_conf_each(config_text, o->config_file, longs, not_in_file, take_option, o);
        take_command_line(argc, argv, o, true);
        if (o->add_file) {
                if (optind != argc - 1)
                        errx(2, "--add-user FILE NAME: expected one user name after the file");
                add_user(o->add_file, argv[optind], o);
        }
        if (o->home || o->read_only)
                errx(2, "--home and --read-only go with --add-user (try 'xftpd --help')");
        if (optind < argc)
                errx(2, "unexpected argument '%s' (try 'xftpd --help')", argv[optind]);
        if (!o->roots)
                errx(2, "--root is required (try 'xftpd --help')");
        if (!o->users_file && !o->anonymous)
                errx(2, "--users FILE is required, or --anonymous for a read-only server");
        if ((o->anon_root || o->anon_write) && !o->anonymous)
                errx(2, "--anon-root and --anon-write go with --anonymous");
        /* Less than one plain transfer's buffers (depth 4, xfer.h) would refuse them all:
         * given, that is a mistake; by default, one transfer at a time is the least. */
        uint64_t one_transfer = 4 * (uint64_t)o->block;
        if (o->max_mem && o->max_mem < one_transfer)
                errx(2, "--max-mem: %llu bytes is less than one transfer's buffers (4 x -b %zu)",
                     (unsigned long long)o->max_mem, o->block);
        if (!o->max_mem)
                o->max_mem =
                    ds_budget_default() > one_transfer ? ds_budget_default() : one_transfer;
}

/* The config file's text, or NULL without -c; exits 1 when it cannot be read. */
static char *read_config(int argc, char **argv)
{
        struct options first = {0};
        struct ds_error err;

        take_command_line(argc, argv, &first, false);
        if (!first.config_file)
                return NULL;
        char *text = xftpd_conf_read(first.config_file, &err);
        if (!text)
                errx(1, "%s", err.text);
        return text;
}

/* Starts a session for the client on fd unless a limit refuses it (421 and closed). */
static void start_session(int listen_fd, int fd, struct guard_sessions *table,
                          const struct throttle *throttle, const struct xftpd_config *config)
{
        char refusal[96];
        struct ds_ftp_addr peer;
        unsigned ban_s = 0;
        const char *why =
            ds_ftp_addr_peer(fd, &peer) < 0 ? "421 Gone.\r\n" : guard_sessions_refuse(table, &peer);

        if (!why && (ban_s = throttle_banned(throttle, &peer, ds_now_ns())) > 0) {
                snprintf(refusal, sizeof(refusal),
                         "421 Too many failed logins from your address; try again in %u s.\r\n",
                         ban_s);
                why = refusal;
        }
        if (why) {
                (void)!send(fd, why, strlen(why), MSG_NOSIGNAL | MSG_DONTWAIT);
                close(fd);
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
}

/* Whether text (with the command line) gives good settings. The option handlers exit on
 * a bad value, as they should at start, so a child tries them first: its one line on
 * stderr says what is wrong. */
static bool settings_ok(const struct server *sv, char *text)
{
        struct options tried;
        int status;

        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
                parse_options(sv->argc, sv->argv, text, &tried);
                _exit(0);
        }
        if (pid < 0) {
                xftpd_log(LOG_ERR, "reload: fork: %s", strerror(errno));
                return false;
        }
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return false;
        return WIFEXITED(status) && WEXITSTATUS(status) == 0;
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
        parse_options(sv->argc, sv->argv, text, &o); /* cannot fail now */
        if (o.users_file && xftpd_users_load(&users, o.users_file, &err) < 0) {
                xftpd_log(LOG_ERR, "reload: %s; the old settings are kept", err.text);
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
        xftpd_log(LOG_INFO, "reloaded%s%s%s%s", o.config_file ? " " : "",
                  o.config_file ? o.config_file : "", o.users_file ? " and " : "",
                  o.users_file ? o.users_file : "");
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
                /* Sessions that ended while accept waited leave the table first. */
                guard_sessions_reap(&table);
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
        static atomic_bool stop;
        static struct server sv;
        struct ds_error err;
        struct ds_store *store;
        static struct throttle throttle; /* a few dozen KiB: not on the stack */

        sv.argc = ds_live_take_option(argc, argv);
        sv.argv = argv;
        parse_options(sv.argc, argv, read_config(sv.argc, argv), &sv.o);
        const struct options *o = &sv.o;
        xftpd_log_open(o->syslog);
        if (o->users_file && xftpd_users_load(&sv.users, o->users_file, &err) < 0)
                errx(1, "%s", err.text);
        if (ds_store_open(&store, o->roots, o->direct_reads ? DS_STORE_DIRECT_READS : 0, &err) < 0)
                errx(1, "%s", err.text);
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
        if (guard_drop_privileges(o->run_as, first_root, o->allow_root, sv.xferlog_fd, &err) < 0)
                errx(1, "%s", err.text);
        ds_cli_catch_stop(&stop);
        catch_reload();
        xftpd_session_catch_ban();
        struct ds_shared_budget *budget;
        rc = ds_shared_budget_create(&budget, o->max_mem, o->max_sessions);
        if (rc < 0)
                errx(1, "memory budget: %s", strerror(-rc));

        sv.config = (struct xftpd_config){
            .store = store,
            .fail_report_fd = throttle.report_fd[1],
            .stop = &stop,
            .budget = budget,
        };
        set_session_config(&sv);
        unsigned width = ds_store_width(store);
        xftpd_log(LOG_INFO, "serving %s%s on port %u", o->roots, width > 1 ? " (striped)" : "",
                  o->port);
        int status = serve(listen_fd, &sv, &throttle);
        close(listen_fd);
        throttle_close(&throttle);
        ds_shared_budget_destroy(budget);
        ds_store_close(store);
        xftpd_users_free(sv.users);
        free(sv.o.config_text);
        if (sv.xferlog_fd >= 0)
                close(sv.xferlog_fd);
        return status;
}
