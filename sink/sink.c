/* sink: receive what blast sends, check it and report, run after run. */
#include <dragstrip/blast.h>
#include <dragstrip/cli.h>
#include <dragstrip/error.h>
#include <dragstrip/live.h>
#include <dragstrip/net.h>
#include <dragstrip/size.h>
#include <dragstrip/stop.h>

#include <err.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

static atomic_bool stop_requested;

static void usage(FILE *out)
{
        fprintf(out,
                "usage: sink [options]\n"
                "  -x LINK         %s (default tcp)\n"
                "  -d IFACE        interface for raw\n"
                "  -p PORT         port to listen on (default 5050)\n"
                "  -B ADDR         address to listen on (default: all)\n"
                "  --once          serve one run, then exit (status 1 if it was cut short)\n"
                "  --idle SEC      give up on a silent blast after SEC (default 3)\n"
                "  --max-msg LEN   largest message a blast may ask for (default 64M, up to 1G)\n"
                "  --max-mem SIZE  receive buffers of all runs together (default: RAM/8)\n"
                "  --max-peers N   links served at once (default 64)\n"
                "  --pcap FILE     raw: write every frame received to FILE\n"
                "  --events        verbs: sleep on completion events\n"
                "  -i SEC          interval reports\n"
                "  -f UNIT         rate unit k K m M g G (default MB/s and Gbit/s)\n"
                "  --json          one JSON object per run\n"
                "  --quiet         no 'listening' line on stderr\n"
                "  --no-stats      publish no live counters for tach\n"
                "  -h, --help      this text;  --version\n"
                "Message size, count, --verify and flow control come from blast.\n",
                ds_link_names());
}

enum {
        OPT_ONCE = 256,
        OPT_IDLE,
        OPT_MAX_MSG,
        OPT_MAX_MEM,
        OPT_MAX_PEERS,
        OPT_PCAP,
        OPT_EVENTS,
        OPT_JSON,
        OPT_QUIET,
        OPT_VERSION
};

static const char short_options[] = ":x:d:p:B:i:f:h";
static const struct option long_options[] = {
    {"once", no_argument, NULL, OPT_ONCE},
    {"idle", required_argument, NULL, OPT_IDLE},
    {"max-msg", required_argument, NULL, OPT_MAX_MSG},
    {"max-mem", required_argument, NULL, OPT_MAX_MEM},
    {"max-peers", required_argument, NULL, OPT_MAX_PEERS},
    {"pcap", required_argument, NULL, OPT_PCAP},
    {"events", no_argument, NULL, OPT_EVENTS},
    {"json", no_argument, NULL, OPT_JSON},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

/* Once the listener is up, where it listens, as ttcp's receiver says it is up. */
static void say_listening(const struct ds_sink_options *o)
{
        if (o->link->caps & DS_LINK_NEEDS_IFACE)
                fprintf(stderr, "sink: listening on %s %s\n", o->link->name, o->where.iface);
        else if (o->where.host)
                fprintf(stderr, "sink: listening on %s %s port %u\n", o->link->name, o->where.host,
                        o->where.port);
        else
                fprintf(stderr, "sink: listening on %s port %u (all addresses)\n", o->link->name,
                        o->where.port);
}

static void parse(int argc, char **argv, struct ds_sink_options *o)
{
        const char *link = "tcp";
        bool quiet = false;
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
                case 'B':
                        o->where.host = optarg;
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
                case OPT_ONCE:
                        o->once = true;
                        break;
                case OPT_IDLE:
                        o->idle_ms = ds_cli_ms("--idle", optarg);
                        break;
                case OPT_MAX_MSG:
                        o->max_msg = (uint32_t)ds_cli_size("--max-msg", optarg, 64, 1u << 30);
                        break;
                case OPT_MAX_MEM:
                        o->max_mem = ds_cli_size("--max-mem", optarg, 1u << 20, UINT64_MAX / 2);
                        break;
                case OPT_MAX_PEERS:
                        o->max_peers = (unsigned)ds_cli_size("--max-peers", optarg, 1, 100000);
                        break;
                case OPT_PCAP:
                        o->where.pcap_path = optarg;
                        break;
                case OPT_EVENTS:
                        o->where.events = true;
                        break;
                case OPT_JSON:
                        o->report.json = true;
                        break;
                case OPT_QUIET:
                        quiet = true;
                        break;
                case OPT_VERSION:
                        printf("sink (dragstrip) %s\n", DS_VERSION);
                        exit(0);
                default:
                        ds_cli_bad_option("sink", argv, c);
                }
        }
        if (optind != argc)
                errx(2, "unexpected argument '%s': sink takes options only; see -h", argv[optind]);
        o->link = ds_cli_link(link, o->where.iface);
        if (o->where.pcap_path && !(o->link->caps & DS_LINK_PCAP))
                errx(2, "--pcap is for -x raw only, in a build with libpcap");
        if (!quiet)
                o->on_listening = say_listening;
}

int main(int argc, char **argv)
{
        struct ds_sink_options o = {
            .where = {.port = 5050}, .idle_ms = 3000, .max_msg = 64u << 20, .max_peers = 64};
        argc = ds_live_take_option(argc, argv, short_options, long_options);
        parse(argc, argv, &o);
        ds_cli_catch_stop(&stop_requested);
        struct ds_error err = {{0}};
        int rc = ds_sink_serve(&o, &stop_requested, &err);
        if (ds_stop_status())
                return ds_stop_status(); /* the open runs were reported, interrupted */
        if (rc < 0)
                errx(1, "%s", err.text);
        return 0;
}
