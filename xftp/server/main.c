/* xftpd: an FTP server for bulk copies. Parses options, binds, drops root, then accepts
 * and forks one process per session (session.c). See xftpd(8) and docs/xftp.md. */
#include "guard.h"
#include "session.h"
#include "users.h"

#include <dragstrip/cli.h>
#include <dragstrip/clock.h>
#include <dragstrip/error.h>
#include <dragstrip/live.h>
#include <dragstrip/net.h>
#include <dragstrip/size.h>

#include <err.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

static void usage(void)
{
        printf(
            "usage: xftpd -p PORT --root DIR[,DIR...] (--users FILE | --anonymous) [options]\n"
            "       xftpd --add-user FILE NAME   (the password comes from stdin)\n"
            "  -p, --port PORT        port to listen on (default 21)\n"
            "  --root DIR[,DIR...]    the store: a directory, or a striped set (one per disk)\n"
            "  --users FILE           users and crypt(3) hashes, lines name:hash\n"
            "  --anonymous            also serve USER anonymous, read-only\n"
            "  --listen ADDR          listen on ADDR only (default: every IPv6 and IPv4 address)\n"
            "  -b, --block SIZE       buffer and MODE E block size (default 4M)\n"
            "  --direct-reads         read a one-directory store with O_DIRECT\n"
            "  --max-sessions N       sessions at once (default 64)\n"
            "  --max-per-host N       sessions from one address (default 16)\n"
            "  --idle SEC             end a session silent this long (default 300)\n"
            "  --login-timeout SEC    end a session not logged in by then (default 30)\n"
            "  --data-timeout SEC     deadline of each data connection's set-up (default 30)\n"
            "  --max-fails N          failed logins before a session ends (default 3)\n"
            "  --run-as USER          started as root, serve as USER (default: the owner\n"
            "                         of the first --root directory)\n"
            "  --allow-root           allow serving as root\n"
            "  --no-stats             publish no live counters for tach\n"
            "  -h, --help             this text;  --version  the version\n");
}

struct options {
        uint16_t port;
        const char *roots, *users_file, *listen_addr, *run_as;
        bool anonymous, allow_root, direct_reads;
        size_t block;
        unsigned max_sessions, max_per_host, max_fails;
        int idle_ms, login_ms, data_ms;
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
        OPT_RUN_AS,
        OPT_ALLOW_ROOT,
        OPT_ADD_USER,
        OPT_DIRECT_READS,
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

static int ms_arg(const char *opt, const char *arg)
{
        double seconds = ds_cli_seconds(opt, arg);
        if (seconds > 86400)
                errx(2, "%s: '%s' is too long (at most a day)", opt, arg);
        int ms = ds_duration_ms(seconds);
        return ms > 0 ? ms : 1;
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

static _Noreturn void add_user(const char *file, const char *name)
{
        char password[256];
        struct ds_error err;

        if (!xftpd_user_name_ok(name))
                errx(2, "--add-user: '%s' is not a user name (1 to %u of A-Z a-z 0-9 . _ -)", name,
                     XFTPD_USER_NAME_MAX);
        read_password(password, sizeof(password));
        int rc = xftpd_users_add(file, name, password, &err);
        explicit_bzero(password, sizeof(password));
        if (rc < 0)
                errx(1, "--add-user: %s", err.text);
        exit(0);
}

/* One option from getopt_long into o; --help, --version and bad options exit here. */
static void take_option(int c, char **argv, struct options *o, const char **add_file)
{
        switch (c) {
        case 'p':
                o->port = ds_cli_port("-p", optarg);
                break;
        case 'b':
                o->block = ds_cli_size("-b", optarg, 64u << 10, 256u << 20);
                break;
        case OPT_ROOT:
                o->roots = optarg;
                break;
        case OPT_USERS:
                o->users_file = optarg;
                break;
        case OPT_ANON:
                o->anonymous = true;
                break;
        case OPT_LISTEN:
                o->listen_addr = optarg;
                break;
        case OPT_MAX_SESSIONS:
                o->max_sessions = count_arg("--max-sessions", optarg, 10000);
                break;
        case OPT_MAX_PER_HOST:
                o->max_per_host = count_arg("--max-per-host", optarg, 10000);
                break;
        case OPT_IDLE:
                o->idle_ms = ms_arg("--idle", optarg);
                break;
        case OPT_LOGIN:
                o->login_ms = ms_arg("--login-timeout", optarg);
                break;
        case OPT_DATA:
                o->data_ms = ms_arg("--data-timeout", optarg);
                break;
        case OPT_MAX_FAILS:
                o->max_fails = count_arg("--max-fails", optarg, 1000);
                break;
        case OPT_RUN_AS:
                o->run_as = optarg;
                break;
        case OPT_ALLOW_ROOT:
                o->allow_root = true;
                break;
        case OPT_DIRECT_READS:
                o->direct_reads = true;
                break;
        case OPT_ADD_USER:
                *add_file = optarg;
                break;
        case 'h':
                usage();
                exit(0);
        case OPT_VERSION:
                printf("xftpd %s\n", DS_VERSION);
                exit(0);
        default:
                ds_cli_bad_option("xftpd", argv, c);
        }
}

static void parse_options(int argc, char **argv, struct options *o)
{
        static const struct option longs[] = {
            {"port", required_argument, NULL, 'p'},
            {"block", required_argument, NULL, 'b'},
            {"root", required_argument, NULL, OPT_ROOT},
            {"users", required_argument, NULL, OPT_USERS},
            {"anonymous", no_argument, NULL, OPT_ANON},
            {"listen", required_argument, NULL, OPT_LISTEN},
            {"max-sessions", required_argument, NULL, OPT_MAX_SESSIONS},
            {"max-per-host", required_argument, NULL, OPT_MAX_PER_HOST},
            {"idle", required_argument, NULL, OPT_IDLE},
            {"login-timeout", required_argument, NULL, OPT_LOGIN},
            {"data-timeout", required_argument, NULL, OPT_DATA},
            {"max-fails", required_argument, NULL, OPT_MAX_FAILS},
            {"run-as", required_argument, NULL, OPT_RUN_AS},
            {"allow-root", no_argument, NULL, OPT_ALLOW_ROOT},
            {"direct-reads", no_argument, NULL, OPT_DIRECT_READS},
            {"add-user", required_argument, NULL, OPT_ADD_USER},
            {"help", no_argument, NULL, 'h'},
            {"version", no_argument, NULL, OPT_VERSION},
            {NULL, 0, NULL, 0},
        };
        const char *add_file = NULL;
        int c;

        *o = (struct options){.port = 21,
                              .block = 4u << 20,
                              .max_sessions = 64,
                              .max_per_host = 16,
                              .max_fails = 3,
                              .idle_ms = 300000,
                              .login_ms = 30000,
                              .data_ms = 30000};
        opterr = 0;
        while ((c = getopt_long(argc, argv, ":p:b:h", longs, NULL)) != -1)
                take_option(c, argv, o, &add_file);
        if (add_file) {
                if (optind != argc - 1)
                        errx(2, "--add-user FILE NAME: expected one user name after the file");
                add_user(add_file, argv[optind]);
        }
        if (optind < argc)
                errx(2, "unexpected argument '%s' (try 'xftpd --help')", argv[optind]);
        if (!o->roots)
                errx(2, "--root is required (try 'xftpd --help')");
        if (!o->users_file && !o->anonymous)
                errx(2, "--users FILE is required, or --anonymous for a read-only server");
}

/* Accepts until SIGTERM, one child process per session. */
static int serve(int listen_fd, const struct options *o, const struct xftpd_config *config)
{
        struct guard_sessions table;

        if (guard_sessions_init(&table, o->max_sessions, o->max_per_host) < 0)
                errx(1, "out of memory");
        while (!atomic_load(config->stop)) {
                int fd = guard_accept(listen_fd, config->stop);
                if (fd == -EINTR)
                        break;
                if (fd < 0) {
                        if (fd != -EAGAIN)
                                warnx("accept: %s", strerror(-fd));
                        continue;
                }
                /* Sessions that ended while accept waited leave the table first. */
                guard_sessions_reap(&table);
                struct ds_ftp_addr peer;
                const char *refusal = ds_ftp_addr_peer(fd, &peer) < 0
                                          ? "421 Gone.\r\n"
                                          : guard_sessions_refuse(&table, &peer);
                if (refusal) {
                        (void)!send(fd, refusal, strlen(refusal), MSG_NOSIGNAL | MSG_DONTWAIT);
                        close(fd);
                        continue;
                }
                pid_t pid = fork();
                if (pid == 0) {
                        close(listen_fd);
                        _exit(xftpd_session_run(config, fd));
                }
                if (pid < 0)
                        warn("fork");
                else
                        guard_sessions_add(&table, pid, &peer);
                close(fd);
        }
        guard_sessions_end(&table, 5000);
        fprintf(stderr, "xftpd: stopped\n");
        return 0;
}

int main(int argc, char **argv)
{
        static atomic_bool stop;
        struct options o;
        struct ds_error err;
        struct ds_store *store;
        struct xftpd_users *users = NULL;

        argc = ds_live_take_option(argc, argv);
        parse_options(argc, argv, &o);
        if (o.users_file && xftpd_users_load(&users, o.users_file, &err) < 0)
                errx(1, "%s", err.text);
        if (ds_store_open(&store, o.roots, o.direct_reads ? DS_STORE_DIRECT_READS : 0, &err) < 0)
                errx(1, "%s", err.text);
        int listen_fd = ds_net_listen(o.listen_addr, o.port, SOCK_STREAM, &err);
        if (listen_fd < 0)
                errx(1, "%s", err.text);
        char first_root[PATH_MAX];
        snprintf(first_root, sizeof(first_root), "%.*s", (int)strcspn(o.roots, ","), o.roots);
        if (guard_drop_privileges(o.run_as, first_root, o.allow_root, &err) < 0)
                errx(1, "%s", err.text);
        ds_cli_catch_stop(&stop);

        const struct xftpd_config config = {
            .store = store,
            .users = users,
            .anonymous = o.anonymous,
            .block = o.block,
            .idle_ms = o.idle_ms,
            .login_ms = o.login_ms,
            .data_ms = o.data_ms,
            .max_fails = o.max_fails,
            .stop = &stop,
        };
        unsigned width = ds_store_width(store);
        fprintf(stderr, "xftpd: serving %s%s on port %u\n", o.roots, width > 1 ? " (striped)" : "",
                o.port);
        int status = serve(listen_fd, &o, &config);
        close(listen_fd);
        ds_store_close(store);
        xftpd_users_free(users);
        return status;
}
