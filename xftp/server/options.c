/* xftpd's options (options.h): usage, one handler per option that the command line and
 * the config file both feed, and --add-user. */
#include "options.h"

#include "conf.h"
#include "users.h"

#include <dragstrip/cli.h>
#include <dragstrip/error.h>
#include <dragstrip/live.h>
#include <dragstrip/serve.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <err.h>
#include <errno.h>
#include <getopt.h>
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
            "  --pasv-ports LO-HI     passive data ports (and RPSV's verbs ports) only from\n"
            "                         this range\n"
            "  --no-rdma              never offer the verbs data channel (RPSV, RPRT)\n"
            "  --pasv-address ADDR    the IPv4 address PASV replies name (behind NAT)\n"
            "  --syslog               log to syslog (facility ftp), not to stderr\n"
            "  --xferlog FILE         one line per transfer in the wu-ftpd xferlog format\n"
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
        OPT_TLS_CERT,
        OPT_TLS_KEY,
        OPT_TLS_REQUIRED,
        OPT_NO_RDMA,
        OPT_VERSION
};

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
                o->max_sessions = ds_cli_count(name, arg, 10000);
                break;
        case OPT_MAX_PER_HOST:
                o->max_per_host = ds_cli_count(name, arg, 10000);
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
                o->max_fails = ds_cli_count(name, arg, 1000);
                break;
        case OPT_MAX_HOST_FAILS:
                o->max_host_fails = ds_cli_count(name, arg, 100000);
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
        case OPT_TLS_CERT:
                o->tls_cert = arg;
                break;
        case OPT_TLS_KEY:
                o->tls_key = arg;
                break;
        case OPT_TLS_REQUIRED:
                o->tls_required = true;
                break;
        case OPT_NO_RDMA:
                o->no_rdma = true;
                break;
        case 'h':
                usage();
                exit(0);
        case OPT_VERSION:
                printf("xftpd %s\n", DS_VERSION);
                exit(0);
        }
}

static const char shorts[] = ":p:b:c:h";
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
    {"tls-cert", required_argument, NULL, OPT_TLS_CERT},
    {"tls-key", required_argument, NULL, OPT_TLS_KEY},
    {"tls-required", no_argument, NULL, OPT_TLS_REQUIRED},
    {"no-rdma", no_argument, NULL, OPT_NO_RDMA},
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
        while ((c = getopt_long(argc, argv, shorts, longs, &index)) != -1) {
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

void xftpd_options_parse(int argc, char **argv, char *config_text, struct options *o)
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

int xftpd_options_take_no_stats(int argc, char **argv)
{
        return ds_live_take_option(argc, argv, shorts, longs);
}

char *xftpd_options_read_config(int argc, char **argv)
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
