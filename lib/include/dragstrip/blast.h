/* blast and sink, the raw-link test pair: the runs themselves, so that the tools' main()
 * only parses options. blast sends fixed-length messages as fast as the link allows (or
 * at a rate); sink receives, checks and reports, one run after another. */
#ifndef DRAGSTRIP_BLAST_H
#define DRAGSTRIP_BLAST_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <dragstrip/link.h>
#include <dragstrip/report.h>

struct ds_error;

#define DS_BLAST_MAX_STREAMS 64

struct ds_blast_options {
        const struct ds_link_ops *link;
        struct ds_link_config where; /* host = DEST */
        uint32_t msg_size;
        uint64_t count;    /* messages per repeat over all streams; 0 with duration_s */
        double duration_s; /* per repeat, when count is 0 */
        unsigned repeat;   /* >= 1 */
        unsigned workers;  /* per stream: 1, or 2 taking turns as the original forked */
        unsigned streams;  /* -q: links (QPs) in parallel, 1..DS_BLAST_MAX_STREAMS */
        double rate_bps;   /* -R, bits per second over all streams; 0: flat out */
        bool verify;
        enum ds_flow flow;
        enum ds_link_op op;
        uint32_t window;                /* messages in flight asked of sink; 0: sink's */
        struct ds_report_config report; /* tool/role/link/msg_size are filled in */
};

/* Runs every repeat, printing each through the reporter (with the sink's own counts),
 * then a summary when repeat > 1. stop (may be NULL) ends the run early once it is set. Returns 0
 * when every repeat completed, or a negative errno with err filled: -ECONNREFUSED when
 * nothing receives at the sink's address (a refused connect, or ICMP port unreachable). */
int ds_blast_run(const struct ds_blast_options *options, const atomic_bool *stop,
                 struct ds_error *err);

struct ds_sink_options {
        const struct ds_link_ops *link;
        struct ds_link_config where; /* host: address to listen on, NULL for any */
        bool once;                   /* serve one run (all its streams), then return */
        int idle_ms;                 /* a blast silent this long is given up on */
        uint32_t max_msg;            /* largest message a hello may ask for (0: the link's) */
        uint64_t max_mem;            /* receive buffers of all runs together (0: default) */
        unsigned max_peers;          /* links served at once, >= 1 */
        FILE *log;                   /* shortages and a full house, said once (NULL: stderr) */
        struct ds_report_config report;
        /* Called once the listener is up, before the first accept (NULL: not called), so
         * the tool can say where it listens. */
        void (*on_listening)(const struct ds_sink_options *options);
};

/* Serves runs until *stop is set or a stop is requested (stop.h), or after one run with
 * once, printing a report for each. Each link gets its own thread. Returns 0, -ECANCELED
 * after a stop (the runs open then are reported, interrupted), or a negative errno with
 * err filled when listening fails (or, with once, when the run failed). */
int ds_sink_serve(const struct ds_sink_options *options, const atomic_bool *stop,
                  struct ds_error *err);

#endif
