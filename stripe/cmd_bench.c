/* stripe bench: sequential write then read of one file on each directory alone, then
 * striped over all of them, with the speed-up of striping over the mean single disk. The
 * data path is put's and get's (pool buffers, O_DIRECT, checksums); only the source and
 * the destination are left out, as dd's /dev/zero and /dev/null leave them out. */
#include <err.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dragstrip/clock.h>
#include <dragstrip/error.h>
#include <dragstrip/pool.h>
#include <dragstrip/report.h>
#include <dragstrip/size.h>

#include "crc32c_int.h"
#include "stripe_cmd.h"

struct bench_run {
        const char *label;
        double write_MBps;
        double read_MBps;
};

struct bench {
        const struct stripe_cmd *cmd;
        struct ds_live *live;
        struct ds_report report; /* the whole bench: every run's bytes, its CPU */
        struct progress progress;
        uint64_t left;
        char name[64];
        const char *during; /* the run a signal cut short, or NULL */
        const struct bench_run *runs;
        unsigned ndirs;
};

static int synthetic_source(void *buf, size_t room, size_t *len, void *ctx, struct ds_error *err)
{
        struct bench *b = ctx;

        (void)buf;
        if (cmd_interrupted)
                return ds_fail(err, -EINTR, "interrupted");
        *len = b->left < room ? (size_t)b->left : room;
        b->left -= *len;
        progress_tick(&b->progress);
        return 0;
}

static int discard_sink(const void *buf, size_t len, uint64_t offset, void *ctx,
                        struct ds_error *err)
{
        struct bench *b = ctx;

        (void)buf, (void)len, (void)offset;
        if (cmd_interrupted)
                return ds_fail(err, -EINTR, "interrupted");
        progress_tick(&b->progress);
        return 0;
}

/* Fills the pool once with a pattern that is not all zeros, so nothing can shortcut it. */
static void fill_pattern(struct ds_pool *pool)
{
        for (unsigned i = 0; i < ds_pool_count(pool); i++) {
                uint64_t *words = ds_pool_buf(pool, i);
                for (size_t w = 0; w < ds_pool_buf_size(pool) / 8; w++)
                        words[w] = (w + i) * 0x9E3779B97F4A7C15ull;
        }
}

static int bench_write(struct bench *b, const char *const *dirs, unsigned ndirs,
                       const struct ds_stripe_options *options, double *seconds,
                       struct ds_error *err)
{
        struct ds_stripe *stripe;
        struct ds_pool *pool = NULL;
        uint64_t start;
        int rc = ds_stripe_create(&stripe, dirs, ndirs, b->name, options, err);

        if (rc != 0)
                return rc;
        cmd_note_buffered(stripe, dirs);
        rc = ds_stripe_stream_pool(stripe, &pool, err);
        if (rc == 0) {
                fill_pattern(pool);
                b->left = b->cmd->size;
                progress_begin(&b->progress, "write", b->cmd->size, ds_live_segment(b->live));
                start = ds_now_ns();
                rc = ds_stripe_write_stream(stripe, pool, synthetic_source, b, err);
                if (rc == 0)
                        rc = ds_stripe_commit(stripe, err);
                *seconds = ds_seconds_between(start, ds_now_ns());
                progress_end(&b->progress);
        }
        int crc = ds_stripe_close(stripe, rc ? NULL : err);
        if (pool)
                ds_pool_destroy(pool);
        return rc ? rc : crc;
}

static int bench_read(struct bench *b, const char *const *dirs, unsigned ndirs,
                      const struct ds_stripe_options *options, double *seconds,
                      struct ds_error *err)
{
        struct ds_stripe *stripe;
        struct ds_pool *pool = NULL;
        uint64_t start;
        int rc = ds_stripe_open(&stripe, dirs, ndirs, b->name, options, err);

        if (rc != 0)
                return rc;
        rc = ds_stripe_stream_pool(stripe, &pool, err);
        if (rc == 0) {
                /* Timed from the pool made, as the write is: a pool is touched page by page
                 * when made, a cost of its size (4 buffers of unit x width), not of the
                 * data moved, that under emulation outlasts reading a small file. */
                progress_begin(&b->progress, "read ", b->cmd->size, ds_live_segment(b->live));
                start = ds_now_ns();
                rc = ds_stripe_read_stream(stripe, pool, discard_sink, b, err);
                if (rc == 0 && !b->cmd->no_checksum)
                        rc = ds_stripe_check_data(stripe, err); /* read back bit-exact? */
                *seconds = ds_seconds_between(start, ds_now_ns());
                progress_end(&b->progress);
        }
        int crc = ds_stripe_close(stripe, rc ? NULL : err);
        if (pool)
                ds_pool_destroy(pool);
        return rc ? rc : crc;
}

static void bench_params(struct ds_json *json, void *ctx)
{
        const struct bench *b = ctx;
        ds_json_str(json, "dirs", b->cmd->args[0]);
        ds_json_u64(json, "size", b->cmd->size);
        ds_json_u64(json, "mem", b->cmd->mem);
        ds_json_bool(json, "direct", !b->cmd->no_direct);
}

/* Striped over the mean single disk, writing and reading. */
static void speedups(const struct bench *b, double *write, double *read)
{
        double mean_write = 0, mean_read = 0;
        for (unsigned i = 0; i < b->ndirs; i++) {
                mean_write += b->runs[i].write_MBps / b->ndirs;
                mean_read += b->runs[i].read_MBps / b->ndirs;
        }
        *write = b->runs[b->ndirs].write_MBps / mean_write;
        *read = b->runs[b->ndirs].read_MBps / mean_read;
}

/* The comparison, or where a signal cut the bench short. */
static void bench_extra(struct ds_json *json, void *ctx)
{
        const struct bench *b = ctx;
        ds_json_u64(json, "unit", b->cmd->unit ? b->cmd->unit : DS_STRIPE_DEFAULT_UNIT);
        ds_json_bool(json, "checksums", !b->cmd->no_checksum);
        ds_json_str(json, "crc32c", crc32c_chosen()->name);
        if (b->during) {
                ds_json_str(json, "during", b->during);
                return;
        }
        double write_speedup, read_speedup;
        speedups(b, &write_speedup, &read_speedup);
        for (unsigned i = 0; i <= b->ndirs; i++) {
                char key[32];
                snprintf(key, sizeof(key), i < b->ndirs ? "disk%u" : "striped", i);
                ds_json_open(json, key);
                ds_json_str(json, "dirs", b->runs[i].label);
                ds_json_double(json, "write_MB_per_s", b->runs[i].write_MBps);
                ds_json_double(json, "read_MB_per_s", b->runs[i].read_MBps);
                ds_json_close(json);
        }
        ds_json_double(json, "write_speedup", write_speedup);
        ds_json_double(json, "read_speedup", read_speedup);
}

static void print_json(struct bench *b)
{
        struct ds_result result;
        ds_report_finish(&b->report, &result);
        result.interrupted = b->during != NULL;
        ds_report_print(&b->report, &result, bench_extra, b);
}

/* A signal ends the bench between or inside runs: no figures to compare, only where. */
_Noreturn static void bench_interrupted(struct bench *b, const char *label)
{
        if (b->cmd->json) {
                b->during = label;
                print_json(b);
        } else {
                printf("stripe bench: interrupted by signal %d during %s\n", ds_stop_signal(),
                       label);
        }
        ds_live_close(b->live);
        exit(ds_stop_status());
}

static void bench_one(struct bench *b, const char *const *dirs, unsigned ndirs,
                      struct bench_run *run)
{
        struct ds_stripe_options options = cmd_options(b->cmd);
        double write_s = 0, read_s = 0;
        struct ds_error err;
        int rc;

        options.unit = b->cmd->unit;
        options.flags |= DS_STRIPE_REPLACE;
        options.live = ds_live_segment(b->live);
        rc = bench_write(b, dirs, ndirs, &options, &write_s, &err);

        if (rc == 0)
                rc = bench_read(b, dirs, ndirs, &options, &read_s, &err);
        ds_stripe_unlink(dirs, ndirs, b->name, NULL);
        if (rc != 0 && cmd_interrupted)
                bench_interrupted(b, run->label);
        if (rc != 0)
                errx(1, "bench %s: %s", run->label, err.text);
        run->write_MBps = (double)b->cmd->size / 1e6 / write_s;
        run->read_MBps = (double)b->cmd->size / 1e6 / read_s;
}

static void print_results(struct bench *b)
{
        const struct bench_run *runs = b->runs;
        double write_speedup, read_speedup;
        char size[32], unit[32];

        if (b->cmd->json) {
                print_json(b);
                return;
        }
        speedups(b, &write_speedup, &read_speedup);
        ds_size_format(size, sizeof(size), b->cmd->size);
        ds_size_format(unit, sizeof(unit), b->cmd->unit ? b->cmd->unit : DS_STRIPE_DEFAULT_UNIT);
        printf("stripe bench: %s per run, unit %s, data checksums %s (CRC-32C by %s), "
               "MB = 10^6 bytes\n",
               size, unit, b->cmd->no_checksum ? "off" : "on", crc32c_chosen()->name);
        printf("  %-40s %12s %12s\n", "directories", "write MB/s", "read MB/s");
        for (unsigned i = 0; i <= b->ndirs; i++)
                printf("  %-40s %12.1f %12.1f\n", runs[i].label, runs[i].write_MBps,
                       runs[i].read_MBps);
        printf("  %-40s %11.2fx %11.2fx\n", "striped / mean single disk", write_speedup,
               read_speedup);
}

int cmd_bench(const struct stripe_cmd *cmd)
{
        struct bench b = {.cmd = cmd};
        struct ds_error err;
        unsigned ndirs;
        char **dirs = cmd_dirs(cmd, cmd->args[0], &ndirs);
        struct bench_run *runs = calloc(ndirs + 1, sizeof(*runs));

        if (!runs)
                errx(1, "bench: out of memory");
        snprintf(b.name, sizeof(b.name), "stripe-bench.%d", (int)getpid());
        if (ds_live_open(&b.live, "stripe", "bench", "disk", NULL, &err) != 0)
                errx(1, "bench: %s", err.text);
        ds_live_set_msg_size(b.live, cmd->unit ? cmd->unit : DS_STRIPE_DEFAULT_UNIT);
        struct ds_report_config config = {.tool = "stripe",
                                          .role = "bench",
                                          .link = "disk",
                                          .msg_size =
                                              cmd->unit ? cmd->unit : DS_STRIPE_DEFAULT_UNIT,
                                          .json = cmd->json,
                                          .params = bench_params,
                                          .params_ctx = &b};
        ds_report_init(&b.report, &config, ds_live_segment(b.live));
        b.runs = runs;
        b.ndirs = ndirs;
        ds_live_start(b.live);
        ds_report_start(&b.report);
        for (unsigned i = 0; i < ndirs; i++) {
                runs[i].label = dirs[i];
                bench_one(&b, (const char *const *)&dirs[i], 1, &runs[i]);
        }
        runs[ndirs].label = cmd->args[0];
        if (ndirs > 1)
                bench_one(&b, (const char *const *)dirs, ndirs, &runs[ndirs]);
        else
                runs[ndirs] = runs[0];
        ds_live_done(b.live);
        print_results(&b);
        ds_live_close(b.live);
        free(runs);
        free(dirs);
        return 0;
}
