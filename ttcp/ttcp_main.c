/* ttcp: the classic Test TCP, tuned. Options as classic ttcp read them, plus parallel
 * streams, durations, zero-copy sends, splice receives, interval and JSON reports. */
#include <err.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dragstrip/cli.h>
#include <dragstrip/stop.h>
#include <dragstrip/report.h>
#include <dragstrip/size.h>
#include <dragstrip/net.h>

#include "ttcp.h"
#include "ttcp_supervise.h"

atomic_bool ttcp_stop;

enum { OPT_ZEROCOPY = 256, OPT_SPLICE, OPT_JSON, OPT_TIMEOUT, OPT_VERSION };

static const char short_options[] = ":trsul:n:b:p:DA:O:f:TvdP:w:i:R:h";
static const struct option long_options[] = {
    {"transmit", no_argument, NULL, 't'},
    {"receive", no_argument, NULL, 'r'},
    {"sink", no_argument, NULL, 's'},
    {"udp", no_argument, NULL, 'u'},
    {"length", required_argument, NULL, 'l'},
    {"count", required_argument, NULL, 'n'},
    {"sockbuf", required_argument, NULL, 'b'},
    {"port", required_argument, NULL, 'p'},
    {"nodelay", no_argument, NULL, 'D'},
    {"format", required_argument, NULL, 'f'},
    {"parallel", required_argument, NULL, 'P'},
    {"time", required_argument, NULL, 'w'},
    {"interval", required_argument, NULL, 'i'},
    {"rate", required_argument, NULL, 'R'},
    {"verbose", no_argument, NULL, 'v'},
    {"zerocopy", no_argument, NULL, OPT_ZEROCOPY},
    {"splice", no_argument, NULL, OPT_SPLICE},
    {"json", no_argument, NULL, OPT_JSON},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

static void usage(FILE *to)
{
        fprintf(to, "usage: ttcp -t [options] host [< in]\n"
                    "       ttcp -r [options] [> out]\n"
                    "Measures TCP or UDP throughput between two hosts, or copies stdin to the\n"
                    "network and the network to stdout.\n"
                    "\n"
                    "Classic options:\n"
                    "  -t          transmit to host          -r          receive\n"
                    "  -s          send a pattern / discard what arrives, instead of stdin/stdout\n"
                    "  -u          use UDP instead of TCP\n"
                    "  -l LEN      bytes per read/write (default 8192; 64K, 1M are fine)\n"
                    "  -n COUNT    buffers to send (default 2048)\n"
                    "  -b SIZE     socket buffer size (default: the kernel's autotuning)\n"
                    "  -p PORT     port (default 5001)\n"
                    "  -D          TCP_NODELAY\n"
                    "  -A ALIGN    align the buffer to ALIGN bytes (default 16384)\n"
                    "  -O OFFSET   start the buffer OFFSET bytes past the alignment\n"
                    "  -f UNIT     rate unit of the closing and interval lines: k K m M g G\n"
                    "              (bits/bytes, powers of 1024; default K as classic),\n"
                    "              or a for MB/s and Gbit/s\n"
                    "  -T          touch: the receiver reads every byte it is given\n"
                    "  -v          verbose: more statistics\n"
                    "  -d          SO_DEBUG on the socket\n"
                    "Beyond the classic:\n"
                    "  -P N        N parallel TCP streams (with -s)\n"
                    "  -w SEC      transmit for SEC seconds instead of -n buffers\n"
                    "  -R RATE     pace to RATE bits/s (2G, 500M)\n"
                    "  -i SEC      report every SEC seconds\n"
                    "  --json      one JSON object at the end (JSON lines with -i)\n"
                    "  --zerocopy  transmit with MSG_ZEROCOPY, reaping its completions\n"
                    "  --splice    receive by splice(2), never copying into user space\n"
                    "  --timeout SEC  give up on a silent peer after SEC s; 0 or inf: never\n"
                    "              (default: 10 with -s, never when copying stdin/stdout)\n"
                    "  --no-stats  publish no live counters for tach\n"
                    "  -h, --help  this text         --version  the version\n"
                    "Host may be a name, an IPv4 or an IPv6 address.\n");
}

/* --timeout: a duration, or 0, inf or none for no limit. */
static double parse_timeout(const char *arg)
{
        if (strcmp(arg, "0") == 0 || strcmp(arg, "inf") == 0 || strcmp(arg, "none") == 0)
                return 0;
        return ds_cli_seconds("--timeout", arg);
}

static void parse_options(int argc, char **argv, struct ttcp_options *opt)
{
        bool transmit = false, receive = false;
        int c;

        *opt = (struct ttcp_options){
            .buf_len = TTCP_DEFAULT_BUFLEN,
            .nbuf = TTCP_DEFAULT_NBUF,
            .port = TTCP_DEFAULT_PORT,
            .align = TTCP_DEFAULT_ALIGN,
            .streams = 1,
            .timeout_s = -1, /* until the options say whether -s is in force */
        };
        opterr = 0; /* one line of our own instead of getopt's two */
        while ((c = getopt_long(argc, argv, short_options, long_options, NULL)) != -1) {
                switch (c) {
                case 't':
                        transmit = true;
                        break;
                case 'r':
                        receive = true;
                        break;
                case 's':
                        opt->sink_mode = true;
                        break;
                case 'u':
                        opt->udp = true;
                        break;
                case 'l':
                        opt->buf_len = ds_cli_size("-l", optarg, 1, 1ULL << 30);
                        break;
                case 'n':
                        opt->nbuf = ds_cli_size("-n", optarg, 0, UINT64_MAX);
                        break;
                case 'b':
                        opt->sockbuf = (int)ds_cli_size("-b", optarg, 1, 1ULL << 30);
                        break;
                case 'p':
                        opt->port = ds_cli_port("-p", optarg);
                        break;
                case 'D':
                        opt->nodelay = true;
                        break;
                case 'A':
                        opt->align = ds_cli_size("-A", optarg, 1, 1 << 24);
                        break;
                case 'O':
                        opt->offset = ds_cli_size("-O", optarg, 0, 1 << 24);
                        break;
                case 'f':
                        opt->unit = ds_cli_rate_unit("-f", optarg);
                        break;
                case 'T':
                        opt->touch = true;
                        break;
                case 'v':
                        opt->verbose = true;
                        break;
                case 'd':
                        opt->so_debug = true;
                        break;
                case 'P':
                        opt->streams = ds_cli_count("-P", optarg, TTCP_MAX_STREAMS);
                        break;
                case 'w':
                        opt->duration_s = ds_cli_seconds("-w", optarg);
                        break;
                case 'i':
                        opt->interval_s = ds_cli_seconds("-i", optarg);
                        break;
                case 'R':
                        opt->rate_bps = ds_cli_rate("-R", optarg);
                        break;
                case OPT_ZEROCOPY:
                        opt->zerocopy = true;
                        break;
                case OPT_SPLICE:
                        opt->splice = true;
                        break;
                case OPT_JSON:
                        opt->json = true;
                        break;
                case OPT_TIMEOUT:
                        opt->timeout_s = parse_timeout(optarg);
                        break;
                case 'h':
                        usage(stdout);
                        exit(0);
                case OPT_VERSION:
                        printf("ttcp (dragstrip) %s\n", DS_VERSION);
                        exit(0);
                default:
                        ds_cli_bad_option("ttcp", argv, c);
                }
        }
        if (transmit == receive)
                errx(2, "say -t host to transmit or -r to receive (try 'ttcp --help')");
        opt->transmit = transmit;
        if (opt->timeout_s < 0)
                opt->timeout_s = opt->sink_mode ? TTCP_SINK_TIMEOUT_S : 0;
        if (transmit) {
                if (optind != argc - 1)
                        errx(2, "-t needs exactly one host to send to");
                opt->host = argv[optind];
        } else if (optind != argc) {
                errx(2, "-r takes no host ('%s' is extra)", argv[optind]);
        }
}

/* Refuses the combinations that cannot mean anything, naming the conflict. */
static void check_options(const struct ttcp_options *opt)
{
        if (opt->streams > 1 && opt->udp)
                errx(2, "-P: parallel streams are TCP only");
        if (opt->streams > 1 && !opt->sink_mode)
                errx(2, "-P: parallel streams need -s (stdin/stdout is one ordered stream)");
        if (opt->zerocopy && (!opt->transmit || opt->udp))
                errx(2, "--zerocopy is for a TCP transmitter (-t without -u)");
        if (opt->splice && (opt->transmit || opt->udp))
                errx(2, "--splice is for a TCP receiver (-r without -u)");
        if (opt->splice && opt->touch)
                errx(2, "--splice never brings data into user space, so -T cannot touch it");
        if (opt->udp && opt->transmit && opt->buf_len <= 16)
                errx(2, "-l: UDP datagrams must be longer than 16 bytes (4 or fewer mark start and "
                        "end)");
        if (opt->udp && opt->buf_len > TTCP_UDP_MAX_DGRAM)
                errx(2, "-l: a UDP datagram holds at most %d bytes", TTCP_UDP_MAX_DGRAM);
        if (opt->duration_s > 0 && !opt->transmit)
                errx(2, "-w: the transmitter decides how long a run lasts");
}

/* The options of the run, defaults applied, for the report's "params". */
static void add_json_params(struct ds_json *json, void *ctx)
{
        const struct ttcp_options *opt = ctx;

        ds_json_u64(json, "port", opt->port);
        ds_json_bool(json, "sink_mode", opt->sink_mode);
        ds_json_i64(json, "sockbuf", opt->sockbuf);
        ds_json_double(json, "timeout_s", opt->timeout_s);
        if (opt->transmit) { /* the transmitter decides what the run is */
                ds_json_str(json, "host", opt->host);
                ds_json_u64(json, "count", opt->duration_s > 0 ? 0 : opt->nbuf);
                ds_json_double(json, "duration_s", opt->duration_s);
                ds_json_u64(json, "streams", opt->streams);
                ds_json_double(json, "rate_bps", opt->rate_bps);
                ds_json_bool(json, "nodelay", opt->nodelay);
                ds_json_bool(json, "zerocopy", opt->zerocopy);
        } else {
                ds_json_bool(json, "touch", opt->touch);
                ds_json_bool(json, "splice", opt->splice);
        }
}

static void add_json_extras(struct ds_json *json, void *ctx)
{
        const struct ttcp_outcome *out = ctx;

        ds_json_u64(json, "streams", out->streams);
        ds_json_u64(json, "io_calls", out->io_calls);
        if (out->peer[0])
                ds_json_str(json, "peer", out->peer);
        if (out->zc_completions)
                ds_json_u64(json, "zerocopy_copied", out->zc_copied);
        if (out->udp_datagrams) {
                ds_json_u64(json, "datagrams", out->udp_datagrams);
                ds_json_bool(json, "sequenced", out->udp_sequenced);
        }
}

int main(int argc, char **argv)
{
        struct ttcp_options opt;
        struct ttcp_outcome out = {0};
        struct ds_error error = {{0}};
        struct ds_live *live;
        struct ds_report report;
        struct ds_result result;
        struct ds_cpu cpu_end, cpu_used;
        const char *role;
        int rc;

        argc = ds_live_take_option(argc, argv, short_options, long_options);
        parse_options(argc, argv, &opt);
        check_options(&opt);
        ds_cli_catch_stop(&ttcp_stop);

        role = opt.transmit ? "send" : "recv";
        if (ds_live_open(&live, "ttcp", role, opt.udp ? "udp" : "tcp", NULL, &error) != 0)
                errx(1, "%s", error.text);
        ds_live_set_msg_size(live, opt.buf_len);
        if (opt.host)
                ds_live_set_peer(live, opt.host);

        /* Reports share stdout only when stdout is not carrying the data. */
        struct ds_report_config config = {
            .tool = "ttcp",
            .role = role,
            .link = opt.udp ? "udp" : "tcp",
            .msg_size = opt.buf_len,
            .json = opt.json,
            .interval_s = opt.interval_s,
            /* Interval lines in the unit of the closing line: classic's K unless -f. */
            .unit = opt.unit ? opt.unit : 'K',
            .out = (opt.sink_mode || opt.transmit) ? stdout : stderr,
            .params = add_json_params,
            .params_ctx = &opt,
        };
        ds_report_init(&report, &config, ds_live_segment(live));
        if (supervise_init(&report) != 0)
                err(1, "pipe");

        ttcp_print_banner(&opt);
        ds_report_start(&report);
        ds_live_start(live);
        if (opt.udp)
                rc = opt.transmit ? ttcp_udp_transmit(&opt, ds_live_segment(live), &out, &error)
                                  : ttcp_udp_receive(&opt, ds_live_segment(live), &out, &error);
        else
                rc = opt.transmit ? ttcp_tcp_transmit(&opt, ds_live_segment(live), &out, &error)
                                  : ttcp_tcp_receive(&opt, ds_live_segment(live), &out, &error);
        ds_cpu_now(&cpu_end);
        uint64_t cpu_end_ns = ds_now_ns();
        ds_live_done(live);

        if (rc != 0) {
                ds_live_close(live);
                /* A signal that ended a wait (a connection never came) is not a failure. */
                if (ds_stop_status())
                        errx(ds_stop_status(), "interrupted: %s", error.text);
                errx(1, "%s", error.text);
        }
        cpu_used = ds_cpu_since(&out.cpu_at_start, &cpu_end);
        report.start_ns = out.start_ns;
        ds_report_finish_at(&report, out.end_ns, &result); /* with -i, the last interval */
        if (opt.json) {
                result.interrupted = ds_stop_status() != 0;
                ds_report_print(&report, &result, add_json_extras, &out);
        }
        struct ds_counters counters;
        ds_live_read(ds_live_segment(live), &counters);
        ttcp_print_classic(&opt, &out, &counters, &cpu_used,
                           ds_seconds_between(out.start_ns, cpu_end_ns));
        ds_live_close(live);
        return ds_stop_status(); /* 130 or 143 after a signal, as shells expect */
}
