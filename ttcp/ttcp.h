/* ttcp's pieces: options, the TCP and UDP movers, and the classic output. */
#ifndef TTCP_H
#define TTCP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <dragstrip/clock.h>
#include <dragstrip/error.h>
#include <dragstrip/live.h>
#include <dragstrip/pool.h>

#define TTCP_DEFAULT_PORT   5001
#define TTCP_DEFAULT_BUFLEN 8192
#define TTCP_DEFAULT_NBUF   2048
#define TTCP_DEFAULT_ALIGN  16384
#define TTCP_MAX_STREAMS    128
#define TTCP_UDP_MAX_DGRAM  65507
/* A connect needs a deadline even when --timeout says to wait forever for data. */
#define TTCP_CONNECT_TIMEOUT_S 10
/* With -s a silent peer is an error after this long unless --timeout says otherwise;
 * copying stdin to stdout waits as long as the sender takes, as classic ttcp did. */
#define TTCP_SINK_TIMEOUT_S 10

struct ttcp_options {
        bool transmit;     /* -t */
        bool sink_mode;    /* -s: a pattern source / discarding sink instead of stdin/stdout */
        bool udp;          /* -u */
        size_t buf_len;    /* -l */
        uint64_t nbuf;     /* -n */
        int sockbuf;       /* -b, 0: the kernel's autotuning */
        uint16_t port;     /* -p */
        bool nodelay;      /* -D */
        size_t align;      /* -A */
        size_t offset;     /* -O */
        char unit;         /* -f, 0: classic KB/sec, in the closing and the interval lines */
        bool touch;        /* -T: the receiver reads every byte it gets */
        bool verbose;      /* -v */
        bool so_debug;     /* -d */
        const char *host;  /* the receiver, with -t */
        unsigned streams;  /* -P */
        double duration_s; /* -w, 0: count buffers with -n instead */
        bool zerocopy;     /* --zerocopy */
        bool splice;       /* --splice */
        double interval_s; /* -i */
        bool json;         /* --json */
        double rate_bps;   /* -R, 0: unpaced */
        double timeout_s;  /* --timeout: how long a silent peer is waited for, 0: forever */
};

/* --timeout in milliseconds for poll(), -1 when ttcp waits forever. */
static inline int ttcp_timeout_ms(const struct ttcp_options *opt)
{
        return opt->timeout_s > 0 ? ds_duration_ms(opt->timeout_s) : -1;
}

/* What one direction of a run did, for the classic lines and the JSON report. */
struct ttcp_outcome {
        uint64_t bytes;
        uint64_t io_calls;
        uint64_t start_ns;
        struct ds_cpu cpu_at_start; /* the CPU line measures the same span as start_ns */
        uint64_t end_ns;
        unsigned streams;
        char peer[96];
        /* --zerocopy: sends the kernel completed, and how many of those it copied anyway */
        uint64_t zc_completions;
        uint64_t zc_copied;
        /* UDP receive accounting */
        bool udp_sequenced; /* the sender numbered its datagrams */
        bool udp_ended_by_silence;
        uint64_t udp_datagrams;
        uint64_t udp_expected;
        uint64_t touch_sum;
        uintptr_t buf_addr; /* for -v's classic "buffer address" line */
};

/* The run begins now: its real time and its CPU time count from here. */
void ttcp_mark_start(struct ttcp_outcome *out, uint64_t now_ns);

/* Shared by the movers and main(): the stop flag set by -w, SIGINT or SIGTERM. */
extern atomic_bool ttcp_stop;

/* The buffer every move goes through: page-aligned from the pool, then -A/-O applied. */
struct ttcp_buffers {
        struct ds_pool *pool;
        unsigned count;
        unsigned char *buf[64];
};
int ttcp_buffers_create(struct ttcp_buffers *bufs, const struct ttcp_options *opt, unsigned count,
                        size_t len, struct ds_error *err);
void ttcp_buffers_destroy(struct ttcp_buffers *bufs);

/* The movers. Each returns 0 with out filled, or a negative errno with err saying why;
 * a partial run still fills out with what moved before the failure. */
int ttcp_tcp_transmit(const struct ttcp_options *opt, struct ds_live_segment *live,
                      struct ttcp_outcome *out, struct ds_error *err);
int ttcp_tcp_receive(const struct ttcp_options *opt, struct ds_live_segment *live,
                     struct ttcp_outcome *out, struct ds_error *err);
int ttcp_udp_transmit(const struct ttcp_options *opt, struct ds_live_segment *live,
                      struct ttcp_outcome *out, struct ds_error *err);
int ttcp_udp_receive(const struct ttcp_options *opt, struct ds_live_segment *live,
                     struct ttcp_outcome *out, struct ds_error *err);

/* Progress lines ("ttcp-t: socket") go to stderr as classic ttcp printed them. The
 * banner and the closing lines go to stdout as classic printed them, unless stdout
 * carries the received data or the JSON report: then to stderr. */
void ttcp_say(const struct ttcp_options *opt, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The opening line: buflen, nbuf, align, port, protocol, peer. */
void ttcp_print_banner(const struct ttcp_options *opt);
/* The closing lines: bytes and rate, I/O calls, rusage, with -v classic's CPU rate and
 * buffer address, then our own lines. cpu_used and cpu_span_s are the CPU time and the
 * wall time from the run's start to the end of the movers. */
void ttcp_print_classic(const struct ttcp_options *opt, const struct ttcp_outcome *out,
                        const struct ds_counters *counters, const struct ds_cpu *cpu_used,
                        double cpu_span_s);

#endif
