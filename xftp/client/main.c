/* xftp: the client. `xftp get URL [DEST]`, `xftp put SRC URL`, `xftp ls URL`,
 * `xftp cp URL URL`. main() parses the command line, logs in, runs the job and reports. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dragstrip/cli.h>
#include <dragstrip/clock.h>
#include <dragstrip/error.h>
#include <dragstrip/live.h>
#include <dragstrip/pace.h>
#include <dragstrip/report.h>
#include <dragstrip/size.h>
#include <dragstrip/stop.h>

#include "listing.h"
#include "modee.h"
#include "summary.h"
#include "transfer.h"
#include "tree.h"
#include "url.h"
#include "xfer.h"
#include "xtls.h"

static void usage(FILE *out)
{
        fprintf(out, "usage: xftp [options] get URL... [DEST]\n"
                     "       xftp [options] put SRC... URL\n"
                     "       xftp [options] ls URL\n"
                     "       xftp [options] cp URL URL\n"
                     "URL is ftp://[user[:password]@]host[:port]/path; a get's last part may be\n"
                     "a glob ('*.h5'). Several sources go into the directory DEST (or URL).\n"
                     "  -P, --parallel N   data connections (MODE E, 1-16; servers that offer it)\n"
                     "  -b, --block SIZE   buffer and block size (default 4M)\n"
                     "  -x, --link LINK    data channel: tcp (default), or verbs (RDMA; servers\n"
                     "                     that offer RPSV and RPRT)\n"
                     "  -r, --recursive    copy directories\n"
                     "  -j, --jobs N       files at once, over a connection each (default: get 4,\n"
                     "                     put 8)\n"
                     "  -u, --update       skip files whose size and time already match\n"
                     "  -R, --rate RATE    pace the whole job, every stream and file, to RATE\n"
                     "                     bits/s (160M, 2G)\n"
                     "  -i, --interval SEC\n"
                     "                     a report every SEC seconds (a JSON line with --json)\n"
                     "      --resume       continue an interrupted transfer\n"
                     "      --verify       compare the server's HASH with the local file\n"
                     "      --json         one JSON object on stdout (ls: the listing in it)\n"
                     "  -q, --quiet        no progress bar\n"
                     "      --netrc FILE   credentials file (default ~/.netrc)\n"
                     "      --timeout SEC  deadline for replies and stalled data (default 30)\n"
                     "      --no-sendfile  send from pool buffers even where sendfile serves\n"
                     "      --tls          require TLS (AUTH TLS; default: whenever offered)\n"
                     "      --no-tls       never TLS: password and data in the clear\n"
                     "      --cacert FILE  check the server's certificate against FILE\n"
                     "                     (PEM) instead of the system's CAs\n"
                     "  -k, --insecure     TLS without checking the certificate\n"
                     "      --no-stats     publish no live counters for tach\n"
                     "  -h, --help         this text\n"
                     "      --version      the version\n");
}

enum {
        OPT_RESUME = 256,
        OPT_VERIFY,
        OPT_JSON,
        OPT_NETRC,
        OPT_TIMEOUT,
        OPT_NO_SENDFILE,
        OPT_TLS,
        OPT_NO_TLS,
        OPT_CACERT,
        OPT_VERSION
};

struct cli {
        struct job_opts job;
        struct ftp_tls_opts tls;
        bool json, quiet;
        double interval_s; /* -i, 0: none */
        double rate_bps;   /* -R, 0: flat out */
        const char *netrc;
        struct ds_live *live; /* tach sees the peer here */
        const char *op;
        char **args;
        int nargs;
};

/* --tls and --no-tls: given both, neither may quietly win (--tls promises no clear text). */
static void tls_mode(struct cli *cli, enum ftp_tls_mode mode)
{
        if (cli->tls.mode != FTP_TLS_AUTO && cli->tls.mode != mode) {
                fprintf(stderr, "xftp: --tls and --no-tls contradict each other\n");
                exit(2);
        }
        cli->tls.mode = mode;
}

static void parse_cli(int argc, char **argv, struct cli *cli, atomic_bool *stop)
{
        static const struct option longs[] = {{"parallel", required_argument, NULL, 'P'},
                                              {"block", required_argument, NULL, 'b'},
                                              {"link", required_argument, NULL, 'x'},
                                              {"recursive", no_argument, NULL, 'r'},
                                              {"jobs", required_argument, NULL, 'j'},
                                              {"update", no_argument, NULL, 'u'},
                                              {"rate", required_argument, NULL, 'R'},
                                              {"interval", required_argument, NULL, 'i'},
                                              {"resume", no_argument, NULL, OPT_RESUME},
                                              {"verify", no_argument, NULL, OPT_VERIFY},
                                              {"json", no_argument, NULL, OPT_JSON},
                                              {"quiet", no_argument, NULL, 'q'},
                                              {"netrc", required_argument, NULL, OPT_NETRC},
                                              {"timeout", required_argument, NULL, OPT_TIMEOUT},
                                              {"no-sendfile", no_argument, NULL, OPT_NO_SENDFILE},
                                              {"tls", no_argument, NULL, OPT_TLS},
                                              {"no-tls", no_argument, NULL, OPT_NO_TLS},
                                              {"cacert", required_argument, NULL, OPT_CACERT},
                                              {"insecure", no_argument, NULL, 'k'},
                                              {"help", no_argument, NULL, 'h'},
                                              {"version", no_argument, NULL, OPT_VERSION},
                                              {NULL, 0, NULL, 0}};
        static const char shorts[] = ":P:b:x:rj:uR:i:qkh";
        int c;

        *cli = (struct cli){
            .job = {.streams = 1, .block = XFTP_XFER_BLOCK, .timeout_ms = 30000, .stop = stop}};
        argc = ds_live_take_option(argc, argv, shorts, longs);
        opterr = 0;
        while ((c = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
                switch (c) {
                case 'P':
                        cli->job.streams = ds_cli_count("-P", optarg, XFTP_MODEE_MAX_STREAMS);
                        break;
                case 'b':
                        cli->job.block = (size_t)ds_cli_size("-b", optarg, 4096, 256u << 20);
                        break;
                case 'x':
                        if (strcmp(optarg, "tcp") != 0 && strcmp(optarg, "verbs") != 0) {
                                fprintf(stderr,
                                        "xftp: -x: '%s' is not a data channel (tcp, verbs)\n",
                                        optarg);
                                exit(2);
                        }
                        cli->job.verbs = strcmp(optarg, "verbs") == 0;
                        break;
                case 'r':
                        cli->job.recursive = true;
                        break;
                case 'j':
                        cli->job.jobs = ds_cli_count("-j", optarg, TREE_JOBS_MAX);
                        break;
                case 'u':
                        cli->job.update = true;
                        break;
                case 'R':
                        cli->rate_bps = ds_cli_rate("-R", optarg);
                        break;
                case 'i':
                        cli->interval_s = ds_cli_seconds("-i", optarg);
                        break;
                case 'q':
                        cli->quiet = cli->job.quiet = true;
                        break;
                case OPT_RESUME:
                        cli->job.resume = true;
                        break;
                case OPT_VERIFY:
                        cli->job.verify = true;
                        break;
                case OPT_JSON:
                        cli->json = true;
                        break;
                case OPT_NETRC:
                        cli->netrc = optarg;
                        break;
                case OPT_TIMEOUT:
                        cli->job.timeout_ms = ds_cli_ms("--timeout", optarg);
                        break;
                case OPT_NO_SENDFILE:
                        cli->job.no_sendfile = true;
                        break;
                case OPT_TLS:
                case OPT_NO_TLS:
                        tls_mode(cli, c == OPT_TLS ? FTP_TLS_REQUIRE : FTP_TLS_NEVER);
                        break;
                case OPT_CACERT:
                        cli->tls.ca_file = optarg;
                        break;
                case 'k':
                        cli->tls.insecure = true;
                        break;
                case 'h':
                        usage(stdout);
                        exit(0);
                case OPT_VERSION:
                        printf("xftp %s\n", DS_VERSION);
                        exit(0);
                default:
                        ds_cli_bad_option("xftp", argv, c);
                }
        }
        if (optind >= argc) {
                fprintf(stderr, "xftp: missing command: get, put, ls or cp (see --help)\n");
                exit(2);
        }
        cli->op = argv[optind];
        cli->args = argv + optind + 1;
        cli->nargs = argc - optind - 1;
        static const struct {
                const char *name;
                int min, max;
                bool through_us; /* the data passes through xftp: -R and -i apply */
        } ops[] = {{"get", 1, 4096, true},
                   {"put", 2, 4096, true},
                   {"ls", 1, 1, false},
                   {"cp", 2, 2, false}};
        for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
                if (strcmp(cli->op, ops[i].name) != 0)
                        continue;
                if (cli->nargs < ops[i].min || cli->nargs > ops[i].max) {
                        fprintf(stderr, "xftp %s: wrong number of arguments (see --help)\n",
                                cli->op);
                        exit(2);
                }
                const char *data_option = cli->rate_bps > 0     ? "-R"
                                          : cli->interval_s > 0 ? "-i"
                                                                : NULL;
                if (data_option && !ops[i].through_us) {
                        fprintf(stderr,
                                "xftp %s: %s applies to get and put, whose data passes through "
                                "xftp\n",
                                cli->op, data_option);
                        exit(2);
                }
                return;
        }
        fprintf(stderr, "xftp: '%s' is not a command: get, put, ls or cp\n", cli->op);
        exit(2);
}

/* The URL argument, parsed, or one line (its password hidden) and exit(2). */
static void url_arg(const char *text, struct url *url)
{
        if (url_parse(text, url) < 0) {
                char shown[2 * URL_PART_MAX];
                url_show(text, shown, sizeof(shown));
                fprintf(stderr,
                        "xftp: '%s' is not an ftp:// URL "
                        "(ftp://[user[:password]@]host[:port]/path)\n",
                        shown);
                exit(2);
        }
}

/* The streams whose verbs buffers a login makes ahead: -P's, for a get or put over -x
 * verbs that is no tree (a tree's files go over connections of their own, each making
 * buffers for what its files need). */
static unsigned verbs_streams(const struct cli *cli)
{
        bool moves = strcmp(cli->op, "get") == 0 || strcmp(cli->op, "put") == 0;
        bool warm = cli->job.verbs && moves && !cli->job.recursive;
        return warm ? (cli->job.streams ? cli->job.streams : 1) : 0;
}

/* Ends a session after a job whose result is rc. A goodbye that fails after uploads fails
 * a job that had not failed already; a job's own failure stays the one said. */
static int close_after(struct ftp *ftp, int rc, struct ds_error *err)
{
        struct ds_error close_err;
        int closed = ftp_close(ftp, &close_err);

        if (rc < 0 || closed == 0)
                return rc;
        *err = close_err;
        return closed;
}

static int login(struct ftp *ftp, struct url *url, const struct cli *cli, struct ds_error *err)
{
        int rc = url_credentials(url, cli->netrc, true, err);
        if (rc < 0)
                return rc;
        return ftp_open(ftp, url->host, url->port, url->user, url->pass, cli->job.timeout_ms,
                        cli->job.stop, &cli->tls, verbs_streams(cli), err);
}

/* The progress bar: one line redrawn four times a second on the terminal. */
struct progress {
        pthread_t thread;
        atomic_bool done;
        struct ds_live_segment *seg;
        struct job_totals *totals;
};

static void *progress_main(void *arg)
{
        struct progress *p = arg;
        uint64_t start = ds_now_ns(), last_bytes = 0, last_ns = start;
        double rate = 0;

        while (!atomic_load(&p->done)) {
                usleep(250000);
                struct ds_counters c;
                ds_live_read(p->seg, &c);
                uint64_t now = ds_now_ns();
                double dt = ds_seconds_between(last_ns, now);
                double instant = dt > 0 ? (double)(c.bytes - last_bytes) / dt : 0;
                rate = rate == 0 ? instant : 0.7 * rate + 0.3 * instant; /* smoothed */
                last_bytes = c.bytes;
                last_ns = now;
                uint64_t expected = atomic_load(&p->totals->expected_live);
                char done_text[32], eta[32] = "", files[160] = "";
                ds_size_format(done_text, sizeof(done_text), c.bytes);
                if (expected > c.bytes && rate > 0) {
                        unsigned s = (unsigned)((double)(expected - c.bytes) / rate);
                        snprintf(eta, sizeof(eta), "  ETA %u:%02u", s / 60, s % 60);
                }
                unsigned total = atomic_load(&p->totals->files_expected);
                if (total > 1) { /* many files: how many, and the one last begun */
                        char name[sizeof(p->totals->current)];
                        pthread_mutex_lock(&p->totals->current_lock);
                        memcpy(name, p->totals->current, sizeof(name));
                        pthread_mutex_unlock(&p->totals->current_lock);
                        snprintf(files, sizeof(files), "  %u/%u files  %.40s",
                                 atomic_load(&p->totals->files_live), total, name);
                }
                if (expected > 0)
                        printf("\r%5.1f%% %10s %9.1f MB/s%s",
                               100.0 * (double)c.bytes / (double)expected, done_text, rate / 1e6,
                               eta);
                else
                        printf("\r%10s %9.1f MB/s", done_text, rate / 1e6);
                listing_show(stdout, files, strlen(files), false); /* a server's name */
                printf("\033[K"); /* the rest of a longer line before */
                fflush(stdout);
        }
        printf("\r\033[K");
        fflush(stdout);
        return NULL;
}

/* lib's reporter, started with the job: with -i it prints an interval report (a JSON line
 * with --json) every SEC seconds, from a thread of its own, of the live counters every
 * transfer adds to (the ticker; NULL without -i); the summary goes through it at the end. */
static struct ds_report_ticker *start_report(struct ds_report *report, const struct cli *cli)
{
        struct ds_report_config config = {.tool = "xftp",
                                          .role = cli->op,
                                          .link = cli->job.verbs ? "verbs" : "tcp",
                                          .msg_size = cli->job.block,
                                          .json = cli->json,
                                          .interval_s = cli->interval_s};
        struct ds_report_ticker *ticker;

        ds_report_init(report, &config, cli->job.live);
        ds_report_start(report);
        int rc = ds_report_ticker_start(report, &ticker);
        if (rc < 0) {
                fprintf(stderr, "xftp: interval reports: %s\n", strerror(-rc));
                exit(1);
        }
        return ticker;
}

/* Whether two URLs reach the same server as the same user: one job's sources must. */
static bool same_login(const struct url *a, const struct url *b)
{
        return strcmp(a->host, b->host) == 0 && a->port == b->port &&
               strcmp(a->user, b->user) == 0 && a->has_user == b->has_user &&
               (!b->has_pass || strcmp(a->pass, b->pass) == 0);
}

/* The sources of a get (URLs, all on one server: their paths into paths) and its DEST
 * (the last argument when it is no URL, else NULL). exit(2) on a bad URL or an empty DEST. */
static const char *get_args(const struct cli *cli, struct url *first, char **paths, int *npaths)
{
        int n = cli->nargs;
        const char *dest = NULL;
        if (n > 1 && !url_is_ftp(cli->args[n - 1]))
                dest = cli->args[--n];
        if (dest && !*dest) { /* else a partial named "..xftp-part" here, never renamed */
                fprintf(stderr, "xftp get: an empty DEST names no file or directory\n");
                exit(2);
        }
        url_arg(cli->args[0], first);
        for (int i = 0; i < n; i++) {
                struct url other;
                url_arg(cli->args[i], &other);
                if (!same_login(first, &other)) {
                        fprintf(stderr, "xftp get: the sources must be on one server, as one "
                                        "user\n");
                        exit(2);
                }
                paths[i] = strdup(other.path);
                if (!paths[i]) {
                        fprintf(stderr, "xftp: out of memory\n");
                        exit(1);
                }
        }
        *npaths = n;
        return dest;
}

static int run(const struct cli *cli, struct job_totals *t, struct ds_error *err)
{
        struct url a, b;
        struct ftp ftp, other;
        const char *op = cli->op;
        const char *dest = NULL;
        char **paths = calloc((size_t)cli->nargs, sizeof(*paths));
        int npaths = 0, rc;

        if (!paths) {
                fprintf(stderr, "xftp: out of memory\n");
                exit(1);
        }
        if (strcmp(op, "get") == 0) {
                dest = get_args(cli, &a, paths, &npaths);
        } else if (strcmp(op, "put") == 0) {
                url_arg(cli->args[cli->nargs - 1], &a);
        } else {
                url_arg(cli->args[0], &a);
                if (strcmp(op, "cp") == 0)
                        url_arg(cli->args[1], &b);
        }
        ds_live_set_peer(cli->live, a.host);
        rc = login(&ftp, &a, cli, err);
        if (rc < 0) {
                url_hide_secret(err->text, sizeof(err->text), a.pass);
                goto out;
        }
        struct tree_login more = {.host = a.host,
                                  .port = a.port,
                                  .user = a.user,
                                  .pass = a.pass,
                                  .timeout_ms = cli->job.timeout_ms,
                                  .tls = &cli->tls};
        if (strcmp(op, "get") == 0) {
                if (npaths == 1 && !cli->job.recursive &&
                    ftp_size(&ftp, "SIZE", paths[0], &t->expected, err) == 0)
                        atomic_store(&t->expected_live, t->expected);
                rc = tree_get(&ftp, &more, paths, npaths, dest, &cli->job, t, err);
        } else if (strcmp(op, "put") == 0) {
                struct stat st;
                if (cli->nargs == 2 && stat(cli->args[0], &st) == 0)
                        atomic_store(&t->expected_live, (uint64_t)st.st_size);
                rc = tree_put(&ftp, &more, cli->args, cli->nargs - 1, a.path, &cli->job, t, err);
        } else if (strcmp(op, "ls") == 0) {
                rc = job_ls(&ftp, a.path, cli->json, &cli->job, t, err);
        } else {
                rc = login(&other, &b, cli, err);
                if (rc == 0) {
                        rc = job_cp(&ftp, a.path, &other, b.path, &cli->job, t, err);
                        rc = close_after(&other, rc, err);
                }
        }
        snprintf(t->tls_version, sizeof(t->tls_version), "%s", xftp_tls_version(&ftp.ctl));
        snprintf(t->tls_cipher, sizeof(t->tls_cipher), "%s", xftp_tls_cipher(&ftp.ctl));
        t->tls_kernel = ftp.data_kernel;
        t->tls_sealed_by = ftp.data_sealed_by;
        t->tls_opened_by = ftp.data_opened_by;
        rc = close_after(&ftp, rc, err);
        if (rc < 0) {
                url_hide_secret(err->text, sizeof(err->text), a.pass);
                if (strcmp(op, "cp") == 0)
                        url_hide_secret(err->text, sizeof(err->text), b.pass);
        }
out:
        for (int i = 0; i < npaths; i++)
                free(paths[i]);
        free(paths);
        return rc;
}

int main(int argc, char **argv)
{
        static atomic_bool stop;
        struct cli cli;
        struct ds_error err = {{0}};
        struct ds_live *live = NULL;
        struct job_totals totals = {.current_lock = PTHREAD_MUTEX_INITIALIZER};

        /* Descriptors 0-2 open (on /dev/null when closed), so that no socket takes one of
         * their numbers and a write meant for the terminal never reaches a server. */
        for (int fd = 0; fd <= 2; fd++)
                if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd)
                        return 1;
        parse_cli(argc, argv, &cli, &stop);
        ds_cli_catch_stop(&stop);
        if (ds_live_open(&live, "xftp", cli.op, cli.job.verbs ? "verbs" : "tcp", NULL, &err) < 0) {
                fprintf(stderr, "xftp: %s\n", err.text);
                return 1;
        }
        ds_live_set_msg_size(live, cli.job.block);
        cli.live = live;
        cli.job.live = ds_live_segment(live);
        ds_live_start(live);
        struct ds_pace pace;
        if (cli.rate_bps > 0) {
                ds_pace_init(&pace, cli.rate_bps);
                cli.job.pace = &pace;
        }

        struct progress bar = {.seg = cli.job.live, .totals = &totals};
        bool show = !cli.json && !cli.quiet && cli.interval_s == 0 && strcmp(cli.op, "ls") != 0 &&
                    isatty(STDOUT_FILENO);
        if (show && pthread_create(&bar.thread, NULL, progress_main, &bar) != 0)
                show = false;
        struct ds_report report;
        struct ds_report_ticker *ticker = start_report(&report, &cli);
        uint64_t start = ds_now_ns();
        int rc = run(&cli, &totals, &err);
        double seconds = ds_seconds_between(start, ds_now_ns());
        ds_report_ticker_stop(ticker);
        if (show) {
                atomic_store(&bar.done, true);
                pthread_join(bar.thread, NULL);
        }
        ds_live_done(live);
        struct summary summary = {.op = cli.op,
                                  .json = cli.json,
                                  .job = &cli.job,
                                  .rate_bps = cli.rate_bps,
                                  .tls = &cli.tls,
                                  .args = cli.args,
                                  .nargs = cli.nargs,
                                  .totals = &totals,
                                  .wall_seconds = seconds,
                                  .rc = rc,
                                  .error = err.text};
        summary_print(&report, &summary);
        free(totals.listing);
        ds_live_close(live);
        if (rc < 0) {
                /* A stop ends any wait with -EINTR: say so, not what was being waited for. */
                bool stopped = ds_stopping();
                const char *text = err.text[0] ? err.text : strerror(-rc);
                if (stopped && strncmp(text, "stopped", 7) != 0)
                        text = "stopped";
                fputs("xftp: ", stderr);
                listing_show(stderr, text, strlen(text), false); /* it may quote a server */
                fputc('\n', stderr);
                return stopped && ds_stop_status() ? ds_stop_status() : 1;
        }
        return 0;
}
