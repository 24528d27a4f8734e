/* xftpd: an FTP server for bulk copies. Parses options, binds, drops root, then accepts
 * and forks one process per session (session.c). See xftpd(8) and docs/xftp.md. */
#include "guard.h"
#include "session.h"
#include "throttle.h"
#include "users.h"
#include "xtls.h"

#include <dragstrip/cli.h>
#include <dragstrip/clock.h>
#include <dragstrip/error.h>
#include <dragstrip/live.h>
#include <dragstrip/net.h>
#include <dragstrip/serve.h>
#include <dragstrip/size.h>
#include <dragstrip/stop.h>

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
            "  --run-as USER          started as root, serve as USER (default: the owner\n"
            "                         of the first --root directory)\n"
            "  --allow-root           allow serving as root\n"
            "  --tls-cert FILE        certificate chain (PEM): offer FTPS, AUTH TLS\n"
            "  --tls-key FILE         its private key (PEM), read before privileges drop\n"
            "  --tls-required         refuse USER before AUTH TLS (530) and data\n"
            "                         connections without PROT P (521)\n"
            "  --no-stats             publish no live counters for tach\n"
            "  -h, --help             this text;  --version  the version\n");
}

struct options {
        uint16_t port;
        const char *roots, *users_file, *listen_addr, *run_as;
        const char *tls_cert, *tls_key;
        bool anonymous, allow_root, direct_reads, fxp, tls_required;
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
        OPT_TLS_CERT,
        OPT_TLS_KEY,
        OPT_TLS_REQUIRED,
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
                o->idle_ms = ds_cli_ms("--idle", optarg);
                break;
        case OPT_LOGIN:
                o->login_ms = ds_cli_ms("--login-timeout", optarg);
                break;
        case OPT_DATA:
                o->data_ms = ds_cli_ms("--data-timeout", optarg);
                break;
        case OPT_MAX_MEM:
                o->max_mem = ds_cli_size("--max-mem", optarg, 1u << 20, UINT64_MAX / 2);
                break;
        case OPT_MAX_FAILS:
                o->max_fails = count_arg("--max-fails", optarg, 1000);
                break;
        case OPT_MAX_HOST_FAILS:
                o->max_host_fails = count_arg("--max-host-fails", optarg, 100000);
                break;
        case OPT_BAN_TIME:
                o->ban_ms = ds_cli_ms("--ban-time", optarg);
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
        case OPT_FXP:
                o->fxp = true;
                break;
        case OPT_ADD_USER:
                *add_file = optarg;
                break;
        case OPT_TLS_CERT:
                o->tls_cert = optarg;
                break;
        case OPT_TLS_KEY:
                o->tls_key = optarg;
                break;
        case OPT_TLS_REQUIRED:
                o->tls_required = true;
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
            {"max-mem", required_argument, NULL, OPT_MAX_MEM},
            {"max-fails", required_argument, NULL, OPT_MAX_FAILS},
            {"max-host-fails", required_argument, NULL, OPT_MAX_HOST_FAILS},
            {"ban-time", required_argument, NULL, OPT_BAN_TIME},
            {"run-as", required_argument, NULL, OPT_RUN_AS},
            {"allow-root", no_argument, NULL, OPT_ALLOW_ROOT},
            {"direct-reads", no_argument, NULL, OPT_DIRECT_READS},
            {"fxp", no_argument, NULL, OPT_FXP},
            {"add-user", required_argument, NULL, OPT_ADD_USER},
            {"tls-cert", required_argument, NULL, OPT_TLS_CERT},
            {"tls-key", required_argument, NULL, OPT_TLS_KEY},
            {"tls-required", no_argument, NULL, OPT_TLS_REQUIRED},
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
                              .max_host_fails = 10,
                              .ban_ms = 60000,
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
        if (!o->tls_cert != !o->tls_key)
                errx(2, "--tls-cert and --tls-key go together");
        if (o->tls_required && !o->tls_cert)
                errx(2, "--tls-required needs --tls-cert FILE and --tls-key FILE");
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
                struct ds_xconn ctl;
                ds_xconn_plain(&ctl, fd);
                (void)!ds_xconn_send(&ctl, why, strlen(why), MSG_DONTWAIT);
                ds_xconn_close(&ctl);
                return;
        }
        unsigned slot = guard_sessions_free_slot(table);
        pid_t pid = fork();
        if (pid == 0) {
                struct xftpd_config own = *config;
                own.budget_slot = slot;
                close(listen_fd);
                close(throttle->report_fd[0]); /* sessions only write to the listener */
                _exit(xftpd_session_run(&own, fd));
        }
        if (pid < 0)
                warn("fork");
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

/* Accepts until SIGTERM, one child process per session. Returns the exit status. */
static int serve(int listen_fd, const struct options *o, struct throttle *throttle,
                 const struct xftpd_config *config)
{
        struct guard_sessions table;
        struct ds_accept_guard shortage = {0};
        int status = 0;

        if (guard_sessions_init(&table, o->max_sessions, o->max_per_host, config->budget) < 0)
                errx(1, "out of memory");
        while (!ds_stopping()) {
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
                if (fd < 0 && ds_accept_survive(&shortage, fd, "xftpd: accept", stderr))
                        continue;
                if (fd < 0) {
                        warnx("accept: %s", strerror(-fd));
                        status = 1;
                        break;
                }
                ds_accept_ok(&shortage);
                /* Sessions that ended while accept waited leave the table first. */
                guard_sessions_reap(&table);
                start_session(listen_fd, fd, &table, throttle, config);
        }
        guard_sessions_end(&table, 5000);
        fprintf(stderr, "xftpd: stopped\n");
        return status;
}

int main(int argc, char **argv)
{
        struct options o;
        struct ds_error err;
        struct ds_store *store;
        struct xftpd_users *users = NULL;
        static struct throttle throttle; /* a few dozen KiB: not on the stack */

        argc = ds_live_take_option(argc, argv);
        parse_options(argc, argv, &o);
        if (o.users_file && xftpd_users_load(&users, o.users_file, &err) < 0)
                errx(1, "%s", err.text);
        struct ds_tls *tls = NULL; /* before the drop: the key may be root's alone */
        if (o.tls_cert && ds_tls_server(&tls, o.tls_cert, o.tls_key, &err) < 0)
                errx(1, "%s", err.text);
        if (ds_store_open(&store, o.roots, o.direct_reads ? DS_STORE_DIRECT_READS : 0, &err) < 0)
                errx(1, "%s", err.text);
        int listen_fd = ds_net_listen(o.listen_addr, o.port, SOCK_STREAM, &err);
        if (listen_fd < 0)
                errx(1, "%s", err.text);
        if (fcntl(listen_fd, F_SETFL, O_NONBLOCK) < 0)
                errx(1, "listening socket: %s", strerror(errno));
        int rc = throttle_init(&throttle, o.max_host_fails, o.ban_ms);
        if (rc < 0)
                errx(1, "failed-login table: %s", strerror(-rc));
        char first_root[PATH_MAX];
        snprintf(first_root, sizeof(first_root), "%.*s", (int)strcspn(o.roots, ","), o.roots);
        if (guard_drop_privileges(o.run_as, first_root, o.allow_root, &err) < 0)
                errx(1, "%s", err.text);
        ds_cli_catch_stop(NULL); /* one stop flag: ds_stopping() */
        xftpd_session_catch_ban();
        struct ds_shared_budget *budget;
        rc = ds_shared_budget_create(&budget, o.max_mem, o.max_sessions);
        if (rc < 0)
                errx(1, "memory budget: %s", strerror(-rc));

        const struct xftpd_config config = {
            .store = store,
            .users = users,
            .anonymous = o.anonymous,
            .fxp = o.fxp,
            .block = o.block,
            .idle_ms = o.idle_ms,
            .login_ms = o.login_ms,
            .data_ms = o.data_ms,
            .max_fails = o.max_fails,
            .fail_report_fd = throttle.report_fd[1],
            .budget = budget,
            .tls = tls,
            .tls_required = o.tls_required,
        };
        unsigned width = ds_store_width(store);
        fprintf(stderr, "xftpd: serving %s%s on port %u\n", o.roots, width > 1 ? " (striped)" : "",
                o.port);
        int status = serve(listen_fd, &o, &throttle, &config);
        close(listen_fd);
        throttle_close(&throttle);
        ds_shared_budget_destroy(budget);
        ds_store_close(store);
        xftpd_users_free(users);
        ds_tls_free(tls);
        return status;
}
