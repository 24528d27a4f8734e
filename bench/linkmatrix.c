/* linkmatrix: the bandwidth of every ordered pair of MPI ranks over dragstrip's own links.
 *
 * MPI only swaps addresses, keeps the rounds in step and gathers the figures; the bytes
 * move over the blast/sink link layer (tcp, udp, raw or verbs). Pairs run in rounds in
 * which no rank is in two tests at once (a round-robin tournament, each pairing run once
 * each way), or, with --all-to-all, every link at once. Rank 0 writes the N x N matrix as
 * CSV and JSON and a heat map, and flags pairs well below the median. */
#include "pairtest.h"
#include "schedule.h"
#include "matrix_out.h"

#include <dragstrip/cli.h>
#include <dragstrip/clock.h>
#include <dragstrip/error.h>
#include <dragstrip/size.h>

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <ifaddrs.h>
#include <mpi.h>
#include <netdb.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct options {
        const struct ds_link_ops *link;
        const char *iface;
        uint16_t port;
        uint32_t msg_size;
        double seconds;
        double timeout_s;
        double slow; /* flag pairs below this fraction of the median */
        bool all_to_all;
        const char *out;
};

static atomic_bool stop_flag;

static void usage(FILE *f)
{
        fprintf(
            f,
            "usage: mpirun -np N linkmatrix [options]\n"
            "Measures every ordered pair of ranks over a dragstrip link, in rounds in which\n"
            "no rank is in two tests at once, and writes PREFIX.csv, PREFIX.json and\n"
            "PREFIX.png (a heat map) on rank 0.\n"
            "  -x, --link LINK    %s (default tcp)\n"
            "  -d IFACE           the interface each rank uses: its IPv4 address (tcp,\n"
            "                     udp, verbs) or its MAC (raw, where -d is needed)\n"
            "  -p PORT            rank r listens on PORT + r (default 5060)\n"
            "  -l LEN             message length (default 1M; raw: 64000)\n"
            "  -w SEC             seconds per pair (default 1)\n"
            "  --timeout SEC      a pair fails when a step waits longer (default 5)\n"
            "  --all-to-all       every pair at once, loading every link together\n"
            "  --slow FRACTION    flag pairs below FRACTION of the median (default 0.5)\n"
            "  -o PREFIX          output files (default linkmatrix)\n"
            "  -h, --help         this text;  --version\n"
            "Rates are the receiver's, MB/s = 10^6 bytes/s. Exit status 1 when a pair failed.\n",
            ds_link_names());
}

static void parse(int argc, char **argv, struct options *o)
{
        enum { OPT_TIMEOUT = 256, OPT_ALL, OPT_SLOW, OPT_VERSION };
        static const struct option longs[] = {
            {"link", required_argument, NULL, 'x'},
            {"timeout", required_argument, NULL, OPT_TIMEOUT},
            {"all-to-all", no_argument, NULL, OPT_ALL},
            {"slow", required_argument, NULL, OPT_SLOW},
            {"help", no_argument, NULL, 'h'},
            {"version", no_argument, NULL, OPT_VERSION},
            {NULL, 0, NULL, 0},
        };
        *o = (struct options){
            .port = 5060, .seconds = 1, .timeout_s = 5, .slow = 0.5, .out = "linkmatrix"};
        const char *len = NULL, *link_name = "tcp";
        int c;
        opterr = 0;
        while ((c = getopt_long(argc, argv, ":x:d:p:l:w:o:h", longs, NULL)) != -1) {
                switch (c) {
                case 'x':
                        link_name = optarg;
                        break;
                case 'd':
                        o->iface = optarg;
                        break;
                case 'p':
                        o->port = ds_cli_port("-p", optarg);
                        break;
                case 'l':
                        len = optarg;
                        break;
                case 'w':
                        o->seconds = ds_cli_seconds("-w", optarg);
                        break;
                case 'o':
                        o->out = optarg;
                        break;
                case OPT_TIMEOUT:
                        o->timeout_s = ds_cli_seconds("--timeout", optarg);
                        break;
                case OPT_ALL:
                        o->all_to_all = true;
                        break;
                case OPT_SLOW: {
                        char *end;
                        o->slow = strtod(optarg, &end);
                        if (*end || !(o->slow > 0 && o->slow < 1)) {
                                fprintf(stderr,
                                        "linkmatrix: --slow '%s' is not a fraction "
                                        "between 0 and 1 (try 0.5)\n",
                                        optarg);
                                exit(2);
                        }
                        break;
                }
                case 'h':
                        usage(stdout);
                        exit(0);
                case OPT_VERSION:
                        printf("linkmatrix (dragstrip) %s\n", DS_VERSION);
                        exit(0);
                default:
                        ds_cli_bad_option("linkmatrix", argv, c);
                }
        }
        if (optind < argc) {
                fprintf(stderr, "linkmatrix: unexpected argument '%s' (try --help)\n",
                        argv[optind]);
                exit(2);
        }
        if (o->seconds <= 0 || o->seconds > 3600) {
                fprintf(stderr, "linkmatrix: -w must be above 0 and at most 3600 seconds\n");
                exit(2);
        }
        if (o->timeout_s <= 0 || o->timeout_s > 600) {
                fprintf(stderr, "linkmatrix: --timeout must be above 0 and at most 600 seconds\n");
                exit(2);
        }
        o->link = ds_cli_link(link_name, o->iface);
        /* A link of frames on an interface runs best with a message in one jumbo frame. */
        bool frames = o->link->caps & DS_LINK_NEEDS_IFACE;
        o->msg_size = len      ? (uint32_t)ds_cli_size("-l", len, 64, 1u << 30)
                      : frames ? 64000
                               : 1u << 20;
}

/* What each rank tells the others. */
struct rank_info {
        char host[64];
        char addr[64]; /* IPv4 address, or MAC for raw */
        uint16_t port;
        int32_t listening; /* 0: its listener failed, reason says why */
        char reason[PAIR_REASON_MAX];
};

/* The IPv4 address (or, by_mac, the MAC) of iface. */
static int iface_addr(const char *iface, bool by_mac, char *out, size_t cap, struct ds_error *err)
{
        if (by_mac) {
                char path[128];
                snprintf(path, sizeof(path), "/sys/class/net/%s/address", iface);
                FILE *f = fopen(path, "r");
                if (!f)
                        return ds_fail(err, -errno, "-d %s: no such interface", iface);
                bool ok = fgets(out, (int)cap, f) != NULL;
                fclose(f);
                out[strcspn(out, "\n")] = 0;
                return ok ? 0 : ds_fail(err, -EIO, "-d %s: cannot read its MAC", iface);
        }
        struct ifaddrs *list;
        if (getifaddrs(&list) < 0)
                return ds_fail(err, -errno, "getifaddrs");
        int rc = ds_fail(err, -ENOENT, "-d %s: no IPv4 address on it", iface);
        for (struct ifaddrs *a = list; a; a = a->ifa_next) {
                if (a->ifa_addr && a->ifa_addr->sa_family == AF_INET &&
                    strcmp(a->ifa_name, iface) == 0) {
                        inet_ntop(AF_INET, &((struct sockaddr_in *)a->ifa_addr)->sin_addr, out,
                                  (socklen_t)cap);
                        rc = 0;
                        break;
                }
        }
        freeifaddrs(list);
        return rc;
}

/* This host's first non-loopback IPv4 address, or its name when it has none. */
static void host_addr(const char *host, char *out, size_t cap)
{
        struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res;
        snprintf(out, cap, "%s", host);
        if (getaddrinfo(host, NULL, &hints, &res) != 0)
                return;
        for (struct addrinfo *a = res; a; a = a->ai_next) {
                const struct sockaddr_in *sin = (const struct sockaddr_in *)a->ai_addr;
                if ((ntohl(sin->sin_addr.s_addr) >> 24) != 127) {
                        inet_ntop(AF_INET, &sin->sin_addr, out, (socklen_t)cap);
                        break;
                }
        }
        freeaddrinfo(res);
}

struct world {
        const struct options *o;
        struct pair_options pair;
        int rank, size;
        struct rank_info *info; /* size entries */
        struct ds_link_listener *listener;
        struct pair_outcome *sent; /* this rank as sender, to each rank */
        struct pair_outcome *got;  /* this rank as receiver, from each rank */
};

static void outcome_fail(struct pair_outcome *p, const struct ds_error *err)
{
        p->status = PAIR_FAILED;
        snprintf(p->reason, sizeof(p->reason), "%.*s", PAIR_REASON_MAX - 1, err->text);
}

static uint64_t tag_of(int round, int from, int to)
{
        return 0x4c4d000000000000ull | ((uint64_t)round << 32) | ((uint64_t)from << 16) |
               (uint64_t)to;
}

static void outcome_set(struct pair_outcome *p, int rc, const struct pair_result *r,
                        const struct ds_error *err)
{
        if (rc < 0) {
                outcome_fail(p, err);
                return;
        }
        p->status = PAIR_OK;
        p->MB_per_s = r->MB_per_s;
        p->lost = r->lost;
}

static void send_to(struct world *w, int round, int peer)
{
        const struct rank_info *them = &w->info[peer];
        struct pair_outcome *p = &w->sent[peer];
        struct ds_error err = {{0}};
        struct pair_result r;
        if (!them->listening) {
                p->status = PAIR_FAILED;
                snprintf(p->reason, sizeof(p->reason), "%s", them->reason);
                return;
        }
        struct ds_link_config where = {.host = them->addr,
                                       .iface = w->o->iface,
                                       .port = them->port,
                                       .timeout_ms = w->pair.timeout_ms};
        int rc = pair_send(&w->pair, &where, tag_of(round, w->rank, peer), &r, &err);
        outcome_set(p, rc, &r, &err);
}

static void recv_from(struct world *w, int round, int peer)
{
        struct pair_outcome *p = &w->got[peer];
        struct ds_error err = {{0}};
        struct pair_result r;
        if (!w->listener) {
                p->status = PAIR_FAILED;
                snprintf(p->reason, sizeof(p->reason), "%s", w->info[w->rank].reason);
                return;
        }
        uint64_t tag = tag_of(round, peer, w->rank);
        bool taken = false;
        struct pair_link pl;
        int rc = pair_accept(&w->pair, w->listener, &tag, &taken, 1, &pl, &err);
        if (rc >= 0)
                rc = pair_receive(&w->pair, &pl, &r, &err);
        outcome_set(p, rc, &r, &err);
}

static void run_rounds(struct world *w)
{
        int rounds = schedule_rounds(w->size);
        for (int round = 0; round < rounds && !atomic_load(&stop_flag); round++) {
                bool sends;
                int peer = schedule_peer(w->rank, w->size, round, &sends);
                MPI_Barrier(MPI_COMM_WORLD);
                if (peer < 0)
                        continue;
                if (sends)
                        send_to(w, round, peer);
                else
                        recv_from(w, round, peer);
        }
}

struct job {
        struct world *w;
        int peer;
        struct pair_link link; /* receivers: the accepted link */
};

static void *send_job(void *arg)
{
        struct job *j = arg;
        send_to(j->w, 0, j->peer);
        return NULL;
}

static void *recv_job(void *arg)
{
        struct job *j = arg;
        struct ds_error err = {{0}};
        struct pair_result r;
        int rc = pair_receive(&j->w->pair, &j->link, &r, &err);
        outcome_set(&j->w->got[j->peer], rc, &r, &err);
        return NULL;
}

/* Accepts a link from every other rank (whichever comes first) and hands each to a
 * receiving thread, while this rank's senders run in theirs. */
static int accept_all(struct world *w, struct job *job, pthread_t *tid, int started)
{
        int n = w->size;
        uint64_t tags[PAIR_MAX_RANKS];
        bool taken[PAIR_MAX_RANKS] = {false};
        for (int peer = 0; peer < n; peer++) {
                tags[peer] = tag_of(0, peer, w->rank);
                taken[peer] = peer == w->rank;
        }
        struct ds_error err = {{0}};
        for (int got = 0; got < n - 1 && w->listener; got++) {
                struct pair_link pl;
                int peer = pair_accept(&w->pair, w->listener, tags, taken, (unsigned)n, &pl, &err);
                if (peer < 0)
                        break;
                job[started] = (struct job){.w = w, .peer = peer, .link = pl};
                if (pthread_create(&tid[started], NULL, recv_job, &job[started]) == 0)
                        started++;
                else
                        recv_job(&job[started]); /* no thread: receive it here, alone */
        }
        for (int peer = 0; peer < n; peer++) {
                if (taken[peer])
                        continue;
                struct pair_outcome *p = &w->got[peer];
                p->status = PAIR_FAILED;
                snprintf(p->reason, sizeof(p->reason), "%.*s", PAIR_REASON_MAX - 1,
                         w->listener ? err.text : w->info[w->rank].reason);
        }
        return started;
}

/* Every rank sends to every other and receives from every other, all at once. */
static void run_all_to_all(struct world *w)
{
        int n = w->size, started = 0;
        struct job *job = calloc(2 * (size_t)n, sizeof(*job));
        pthread_t *tid = calloc(2 * (size_t)n, sizeof(*tid));
        if (!job || !tid) {
                fprintf(stderr, "linkmatrix: out of memory\n");
                MPI_Abort(MPI_COMM_WORLD, 1);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        for (int peer = 0; peer < n; peer++) {
                if (peer == w->rank)
                        continue;
                job[started] = (struct job){.w = w, .peer = peer};
                if (pthread_create(&tid[started], NULL, send_job, &job[started]) == 0)
                        started++;
                else
                        send_job(&job[started]);
        }
        started = accept_all(w, job, tid, started);
        for (int i = 0; i < started; i++)
                pthread_join(tid[i], NULL);
        free(job);
        free(tid);
}

static void open_listener(struct world *w, const struct ds_link_ops *ops)
{
        struct rank_info *me = &w->info[w->rank];
        struct ds_error err = {{0}};
        struct ds_link_config here = {
            .iface = w->o->iface, .port = me->port, .timeout_ms = w->pair.timeout_ms};
        me->listening = ds_link_listen(ops, &w->listener, &here, &err) == 0;
        if (!me->listening) {
                w->listener = NULL;
                snprintf(me->reason, sizeof(me->reason), "rank %d cannot listen: %.90s", w->rank,
                         err.text);
        }
}

/* Another rank's strings end up in file names' neighbours, JSON and gnuplot scripts:
 * terminated, and nothing in host or address but what names and addresses use. */
static void info_sanitize(struct rank_info *info)
{
        char *fields[] = {info->host, info->addr};
        info->host[sizeof(info->host) - 1] = 0;
        info->addr[sizeof(info->addr) - 1] = 0;
        info->reason[sizeof(info->reason) - 1] = 0;
        for (unsigned i = 0; i < 2; i++)
                for (char *p = fields[i]; *p; p++)
                        if (!isalnum((unsigned char)*p) && !strchr(".-_:", *p))
                                *p = '?';
}

/* Fills this rank's entry and swaps entries with every rank. */
static void exchange_info(struct world *w, const struct ds_link_ops *ops)
{
        struct rank_info *me = &w->info[w->rank];
        bool by_mac = ops->caps & DS_LINK_MAC_PEER;
        gethostname(me->host, sizeof(me->host) - 1);
        me->port = (uint16_t)(w->o->port + w->rank);
        if (w->o->iface) {
                struct ds_error err = {{0}};
                if (iface_addr(w->o->iface, by_mac, me->addr, sizeof(me->addr), &err) < 0) {
                        fprintf(stderr, "linkmatrix: rank %d: %s\n", w->rank, err.text);
                        MPI_Abort(MPI_COMM_WORLD, 2);
                }
        }
        open_listener(w, ops);
        MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, w->info, (int)sizeof(*me), MPI_BYTE,
                      MPI_COMM_WORLD);
        for (int r = 0; r < w->size; r++)
                info_sanitize(&w->info[r]);
        if (w->o->iface)
                return;
        /* Without -d: loopback when every rank shares this host, else the host's address. */
        bool one_host = true;
        for (int r = 0; r < w->size; r++)
                one_host &= strcmp(w->info[r].host, me->host) == 0;
        for (int r = 0; r < w->size; r++) {
                if (one_host)
                        snprintf(w->info[r].addr, sizeof(w->info[r].addr), "127.0.0.1");
                else
                        host_addr(w->info[r].host, w->info[r].addr, sizeof(w->info[r].addr));
        }
}

static void stop_on_signal(void)
{
        ds_cli_catch_stop(&stop_flag);
}

int main(int argc, char **argv)
{
        int provided;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
        struct options o;
        struct world w = {.o = &o};
        MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
        MPI_Comm_size(MPI_COMM_WORLD, &w.size);
        parse(argc, argv, &o);
        const struct ds_link_ops *ops = o.link;
        if (w.size < 2) {
                if (w.rank == 0)
                        fprintf(stderr, "linkmatrix: needs 2 or more ranks (mpirun -np N)\n");
                MPI_Finalize();
                return 2;
        }
        if (w.size > PAIR_MAX_RANKS) {
                if (w.rank == 0)
                        fprintf(stderr, "linkmatrix: at most %d ranks\n", PAIR_MAX_RANKS);
                MPI_Finalize();
                return 2;
        }
        stop_on_signal();
        w.pair = (struct pair_options){.link = ops,
                                       .msg_size = o.msg_size,
                                       .seconds = o.seconds,
                                       .timeout_ms = ds_duration_ms(o.timeout_s),
                                       .stop = &stop_flag};
        w.info = calloc((size_t)w.size, sizeof(*w.info));
        w.sent = calloc((size_t)w.size, sizeof(*w.sent));
        w.got = calloc((size_t)w.size, sizeof(*w.got));
        if (!w.info || !w.sent || !w.got) {
                fprintf(stderr, "linkmatrix: out of memory\n");
                MPI_Abort(MPI_COMM_WORLD, 1);
        }
        exchange_info(&w, ops);
        if (o.all_to_all)
                run_all_to_all(&w);
        else
                run_rounds(&w);
        if (w.listener)
                ds_link_unlisten(w.listener);

        /* Rank 0 gathers every rank's sent and received outcomes. */
        size_t row = (size_t)w.size * sizeof(struct pair_outcome);
        struct pair_outcome *all_sent = NULL, *all_got = NULL;
        if (w.rank == 0) {
                all_sent = calloc((size_t)w.size, row);
                all_got = calloc((size_t)w.size, row);
                if (!all_sent || !all_got) {
                        fprintf(stderr, "linkmatrix: out of memory\n");
                        MPI_Abort(MPI_COMM_WORLD, 1);
                }
        }
        MPI_Gather(w.sent, (int)row, MPI_BYTE, all_sent, (int)row, MPI_BYTE, 0, MPI_COMM_WORLD);
        MPI_Gather(w.got, (int)row, MPI_BYTE, all_got, (int)row, MPI_BYTE, 0, MPI_COMM_WORLD);
        int status = 0;
        if (w.rank == 0) {
                const char **names = calloc(2 * (size_t)w.size, sizeof(char *));
                if (!names) {
                        fprintf(stderr, "linkmatrix: out of memory\n");
                        MPI_Abort(MPI_COMM_WORLD, 1);
                }
                for (int r = 0; r < w.size; r++) {
                        names[r] = w.info[r].host;
                        names[w.size + r] = w.info[r].addr;
                }
                struct matrix m = {.n = w.size,
                                   .link = ops->name,
                                   .msg_size = o.msg_size,
                                   .seconds = o.seconds,
                                   .all_to_all = o.all_to_all,
                                   .slow = o.slow,
                                   .sent = all_sent,
                                   .got = all_got,
                                   .interrupted = atomic_load(&stop_flag),
                                   .hosts = names,
                                   .addrs = names + w.size};
                status = matrix_report(&m, o.out);
                free(names);
        }
        MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
        free(all_sent);
        free(all_got);
        free(w.info);
        free(w.sent);
        free(w.got);
        MPI_Finalize();
        return status;
}
