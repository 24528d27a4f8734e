/* blast: send fixed-length messages over a link as fast as it allows. */
#include <dragstrip/blast.h>
#include <dragstrip/cli.h>
#include <dragstrip/error.h>
#include <dragstrip/live.h>
#include <dragstrip/net.h>
#include <dragstrip/size.h>
#include <dragstrip/stop.h>

#include <err.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_bool stop_requested;

static void usage(FILE *out)
{
        fprintf(out,
                "usage: blast [options] DEST\n"
                "  DEST            the sink: host or IP (tcp, udp, verbs), its MAC (raw)\n"
                "  -x LINK         %s (default tcp)\n"
                "  -d IFACE        interface for raw\n"
                "  -p PORT         sink's port (default 5050)\n"
                "  -l LEN          message length, 64 to 1G (default 64K)\n"
                "  -n COUNT        messages per repeat (default: 1 GiB worth)\n"
                "  -w SEC          send for SEC seconds instead of a count\n"
                "  -r REPEAT       repeats, each reported (default 1)\n"
                "  -1, -2          one worker per stream (default), or two interleaved\n"
                "  -q N            streams (QPs) in parallel (default 1)\n"
                "  -R RATE         pace to RATE bits/s over all streams (e.g. 2G)\n"
                "  --verify        fill a pattern sink checks\n"
                "  --flow MODE     credit (default) or none (run free, count loss)\n"
                "  --op OP         verbs: write (default), send, read\n"
                "  --window N      messages in flight asked of sink (default: sink's)\n"
                "  --events        verbs: sleep on completion events\n"
                "  --timeout SEC   give up on a silent sink after SEC (default 5)\n"
                "  -i SEC          interval reports\n"
                "  -f UNIT         rate unit k K m M g G (default MB/s and Gbit/s)\n"
                "  --json          one JSON object per repeat\n"
                "  --no-stats      publish no live counters for tach\n"
                "  -h, --help      this text;  --version\n",
                ds_link_names());
}

enum {
        OPT_VERIFY = 256,
        OPT_FLOW,
        OPT_OP,
        OPT_WINDOW,
        OPT_EVENTS,
        OPT_TIMEOUT,
        OPT_JSON,
        OPT_VERSION
};

static const char short_options[] = ":x:d:p:l:n:w:r:12q:R:i:f:h";
static const struct option long_options[] = {
    {"verify", no_argument, NULL, OPT_VERIFY},   {"flow", required_argument, NULL, OPT_FLOW},
    {"op", required_argument, NULL, OPT_OP},     {"window", required_argument, NULL, OPT_WINDOW},
    {"events", no_argument, NULL, OPT_EVENTS},   {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"json", no_argument, NULL, OPT_JSON},       {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, OPT_VERSION}, {NULL, 0, NULL, 0},
};

static void parse_long(int c, const char *arg, char **argv, struct ds_blast_options *o)
{
        switch (c) {
        case OPT_VERIFY:
                o->verify = true;
                break;
        case OPT_FLOW:
                if (ds_flow_parse(arg, &o->flow) < 0)
                        errx(2, "--flow: '%s' is not credit or none", arg);
                break;
        case OPT_OP:
                if (ds_link_op_parse(arg, &o->op) < 0)
                        errx(2, "--op: '%s' is not write, send or read", arg);
                break;
        case OPT_WINDOW:
                o->window = (uint32_t)ds_cli_size("--window", arg, 1, 1u << 20);
                break;
        case OPT_EVENTS:
                o->where.events = true;
                break;
        case OPT_TIMEOUT:
                o->where.timeout_ms = ds_cli_ms("--timeout", arg);
                break;
        case OPT_JSON:
                o->report.json = true;
                break;
        case OPT_VERSION:
                printf("blast (dragstrip) %s\n", DS_VERSION);
                exit(0);
        default:
                ds_cli_bad_option("blast", argv, c);
        }
}

static void parse(int argc, char **argv, struct ds_blast_options *o)
{
        const char *link = "tcp";
        bool count_given = false;
        int c;
        opterr = 0; /* one line of our own instead of getopt's and the usage */
        while ((c = getopt_long(argc, argv, short_options, long_options, NULL)) != -1) {
                switch (c) {
                case 'x':
                        link = optarg;
                        break;
                case 'd':
                        o->where.iface = optarg;
                        break;
                case 'p':
                        o->where.port = ds_cli_port("-p", optarg);
                        break;
                case 'l':
                        o->msg_size = (uint32_t)ds_cli_size("-l", optarg, 64, 1u << 30);
                        break;
                case 'n':
                        o->count = ds_cli_size("-n", optarg, 1, UINT64_MAX / 2);
                        count_given = true;
                        break;
                case 'w':
                        o->duration_s = ds_cli_seconds("-w", optarg);
                        break;
                case 'r':
                        o->repeat = (unsigned)ds_cli_size("-r", optarg, 1, 1000000);
                        break;
                case '1':
                case '2':
                        o->workers = (unsigned)(c - '0');
                        break;
                case 'q':
                        o->streams = (unsigned)ds_cli_size("-q", optarg, 1, DS_BLAST_MAX_STREAMS);
                        break;
                case 'R':
                        o->rate_bps = ds_cli_rate("-R", optarg);
                        break;
                case 'i':
                        o->report.interval_s = ds_cli_seconds("-i", optarg);
                        break;
                case 'f':
                        o->report.unit = ds_cli_rate_unit("-f", optarg);
                        break;
                case 'h':
                        usage(stdout);
                        exit(0);
                default:
                        parse_long(c, optarg, argv, o);
                }
        }
        if (optind != argc - 1)
                errx(2, "expected one DEST (the sink's host, or its MAC with -x raw); see -h");
        o->where.host = argv[optind];
        o->link = ds_cli_link(link, o->where.iface);
        if (count_given && o->duration_s > 0)
                errx(2, "-n and -w are exclusive: send a count or for a time");
        if (count_given && o->count < o->streams)
                errx(2, "-n %llu is fewer messages than -q %u streams",
                     (unsigned long long)o->count, o->streams);
        if (o->op != DS_OP_DEFAULT && !(o->link->caps & DS_LINK_CHOOSES_OP))
                errx(2, "--op is for -x verbs only");
        if (!count_given && o->duration_s <= 0) {
                o->count = (1ull << 30) / o->msg_size;
                if (o->count < 16)
                        o->count = 16;
        }
}

int main(int argc, char **argv)
{
        struct ds_blast_options o = {
            .where = {.port = 5050},
            .msg_size = 64 << 10,
            .repeat = 1,
            .workers = 1,
            .streams = 1,
            .flow = DS_FLOW_CREDIT,
        };
        argc = ds_live_take_option(argc, argv, short_options, long_options);
        parse(argc, argv, &o);
        ds_cli_catch_stop(&stop_requested);
        struct ds_error err = {{0}};
        int rc = ds_blast_run(&o, &stop_requested, &err);
        if (rc < 0 && ds_stop_status())
                errx(ds_stop_status(), "interrupted: %s", err.text);
        if (rc == -ECONNREFUSED) /* said as ttcp says it, whichever link found out */
                errx(1, "nobody is receiving on %s port %u: %s", o.where.host, o.where.port,
                     strerror(ECONNREFUSED));
        if (rc < 0)
                errx(1, "%s", err.text);
        return ds_stop_status(); /* 130 or 143 after a signal, the run reported so far */
}
