/* The one result reporter every tool uses: human text by default, one JSON object with
 * --json, and interval reports every -i seconds (JSON lines with --json).
 *
 * Counters come from the tool's ds_live segment, so workers only count and the reporting
 * thread only reads. MB means 10^6 bytes. */
#ifndef DRAGSTRIP_REPORT_H
#define DRAGSTRIP_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <dragstrip/clock.h>
#include <dragstrip/json.h>
#include <dragstrip/live.h>

struct ds_report_config {
        const char *tool; /* "blast" */
        const char *role; /* "send" */
        const char *link; /* "tcp" */
        uint64_t msg_size;
        bool json;
        double interval_s; /* 0: no interval reports */
        char unit;         /* -f letter, see ds_rate_unit_check; 0 means 'a' */
        FILE *out;         /* NULL: stdout */
};

/* The figures of a finished run. */
struct ds_result {
        struct ds_counters counters;
        double seconds;
        struct ds_cpu cpu; /* used during the run */
        double MB_per_s;
        double Gbit_per_s;
        bool interrupted; /* a signal cut the run short: these are its figures so far */
};

/* Adds tool-specific members to the final JSON object. */
typedef void (*ds_report_extra_fn)(struct ds_json *json, void *ctx);

struct ds_report {
        struct ds_report_config config;
        const struct ds_live_segment *live;
        uint64_t start_ns;
        uint64_t last_ns;
        uint64_t next_ns;
        struct ds_cpu start_cpu;
        struct ds_counters last;
};

/* Binds the reporter to a config (copied; its strings must outlive the report) and to
 * the counters it reports. */
void ds_report_init(struct ds_report *report, const struct ds_report_config *config,
                    const struct ds_live_segment *live);

/* Marks time zero and the CPU used so far. */
void ds_report_start(struct ds_report *report);

/* When the next interval report is due (CLOCK_MONOTONIC ns), or UINT64_MAX without -i. */
uint64_t ds_report_next_due(const struct ds_report *report);

/* Prints an interval line if one is due by now; call it as often as convenient. */
void ds_report_tick(struct ds_report *report);

/* Stops the clock and fills result (end time = now). */
void ds_report_finish(struct ds_report *report, struct ds_result *result);

/* Like ds_report_finish, with an end time the caller measured (e.g. the last byte). */
void ds_report_finish_at(struct ds_report *report, uint64_t end_ns, struct ds_result *result);

/* Prints the final result: one JSON object (with extra members, if extra is non-NULL) or,
 * in text mode, one summary line. */
void ds_report_print(const struct ds_report *report, const struct ds_result *result,
                     ds_report_extra_fn extra, void *ctx);

/* Interval reports from a thread of their own, for a tool whose bytes move in threads it
 * does not loop in itself (xftp's pipeline, stripe's engine): the thread sleeps until each
 * report is due and ticks report. Start it after ds_report_start; *ticker is NULL when
 * report has no interval (no thread then). Returns 0 or a negative errno. */
struct ds_report_ticker;
int ds_report_ticker_start(struct ds_report *report, struct ds_report_ticker **ticker);

/* Ends the thread at once, not at its next report, and frees ticker (NULL: nothing to do).
 * Call it before ds_report_finish. */
void ds_report_ticker_stop(struct ds_report_ticker *ticker);

#endif
