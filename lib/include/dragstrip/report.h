/* The one result reporter every tool uses: human text by default, one JSON object with
 * --json, and interval reports every -i seconds (JSON lines with --json). Every JSON
 * object it writes, final or interval, follows docs/result.schema.json.
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

/* Adds tool-specific members to a JSON object. */
typedef void (*ds_report_extra_fn)(struct ds_json *json, void *ctx);

struct ds_report_config {
        const char *tool; /* "blast" */
        const char *role; /* "send" */
        const char *link; /* "tcp" */
        uint64_t msg_size;
        bool json;
        double interval_s;         /* 0: no interval reports */
        char unit;                 /* -f letter, see ds_rate_unit_check; 0 means 'a' */
        FILE *out;                 /* NULL: stdout */
        ds_report_extra_fn params; /* the run's options, into the final object's "params"
                                    * after interval_s; NULL: interval_s alone */
        void *params_ctx;
};

/* The figures of a finished run. */
struct ds_result {
        struct ds_counters counters;
        double seconds;
        struct ds_cpu cpu; /* used during the run; NaN: a peer that did not say */
        double MB_per_s;
        double Gbit_per_s;
        bool interrupted; /* a signal cut the run short: these are its figures so far */
};

struct ds_report {
        struct ds_report_config config;
        const struct ds_live_segment *live;
        uint64_t start_ns;      /* a caller may move it to when the data really began */
        uint64_t start_unix_ns; /* the run's start as a date, for every object alike */
        uint64_t last_ns;
        uint64_t next_ns;
        struct ds_cpu start_cpu;
        struct ds_cpu last_cpu;
        struct ds_counters last;
};

/* Binds the reporter to a config (copied; its strings must outlive the report) and to
 * the counters it reports. */
void ds_report_init(struct ds_report *report, const struct ds_report_config *config,
                    const struct ds_live_segment *live);

/* Marks time zero and the CPU used so far. */
void ds_report_start(struct ds_report *report);

/* The same with time zero at start_ns, a ds_now_ns() reading not long past (when the
 * connection came, say), for a tool that knows when its run began only once it has. */
void ds_report_start_at(struct ds_report *report, uint64_t start_ns);

/* When the next interval report is due (CLOCK_MONOTONIC ns), or UINT64_MAX without -i. */
uint64_t ds_report_next_due(const struct ds_report *report);

/* Prints an interval line if one is due by now; call it as often as convenient. */
void ds_report_tick(struct ds_report *report);

/* Stops the clock and fills result (end time = now). With -i, first prints the interval
 * that ends with the run, unless it is shorter than a tenth of an interval. */
void ds_report_finish(struct ds_report *report, struct ds_result *result);

/* Like ds_report_finish, with an end time the caller measured (e.g. the last byte). */
void ds_report_finish_at(struct ds_report *report, uint64_t end_ns, struct ds_result *result);

/* Fills result's MB_per_s and Gbit_per_s from its bytes and seconds (0 for no time). */
void ds_result_rates(struct ds_result *result);

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

/* The figures of a result as members of the open JSON object: messages, bytes, seconds,
 * MB_per_s, Gbit_per_s, cpu_user_s, cpu_sys_s and errors, as every report has them; for
 * a result nested in another (blast's "sink"). */
void ds_report_json_figures(struct ds_json *json, const struct ds_result *result);

#endif
