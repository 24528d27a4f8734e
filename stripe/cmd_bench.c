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
#include <dragstrip/json.h>
#include <dragstrip/pool.h>
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
        struct progress progress;
        uint64_t left;
        char name[64];
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

/* A signal ends the bench between or inside runs: no figures to compare, only where. */
_Noreturn static void bench_interrupted(struct bench *b, const char *label)
{
        if (b->cmd->json) {
                struct ds_json json;
                ds_json_begin(&json, stdout);
                ds_json_str(&json, "tool", "stripe");
                ds_json_str(&json, "role", "bench");
                ds_json_bool(&json, "interrupted", true);
                ds_json_str(&json, "during", label);
                ds_json_end(&json);
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

static void print_results(const struct bench *b, const struct bench_run *runs, unsigned ndirs)
{
        const struct bench_run *striped = &runs[ndirs];
        double mean_write = 0, mean_read = 0;
        char size[32], unit[32];

        for (unsigned i = 0; i < ndirs; i++) {
                mean_write += runs[i].write_MBps / ndirs;
                mean_read += runs[i].read_MBps / ndirs;
        }
        ds_size_format(size, sizeof(size), b->cmd->size);
        ds_size_format(unit, sizeof(unit), b->cmd->unit ? b->cmd->unit : DS_STRIPE_DEFAULT_UNIT);
        if (b->cmd->json) {
                struct ds_json json;
                ds_json_begin(&json, stdout);
                ds_json_str(&json, "tool", "stripe");
                ds_json_str(&json, "role", "bench");
                ds_json_str(&json, "link", "disk");
                ds_json_u64(&json, "bytes", b->cmd->size);
                ds_json_u64(&json, "unit", b->cmd->unit ? b->cmd->unit : DS_STRIPE_DEFAULT_UNIT);
                ds_json_bool(&json, "checksums", !b->cmd->no_checksum);
                ds_json_str(&json, "crc32c", crc32c_chosen()->name);
                for (unsigned i = 0; i <= ndirs; i++) {
                        char key[32];
                        snprintf(key, sizeof(key), i < ndirs ? "disk%u" : "striped", i);
                        ds_json_open(&json, key);
                        ds_json_str(&json, "dirs", runs[i].label);
                        ds_json_double(&json, "write_MB_per_s", runs[i].write_MBps);
                        ds_json_double(&json, "read_MB_per_s", runs[i].read_MBps);
                        ds_json_close(&json);
                }
                ds_json_double(&json, "write_speedup", striped->write_MBps / mean_write);
                ds_json_double(&json, "read_speedup", striped->read_MBps / mean_read);
                ds_json_end(&json);
                return;
        }
        printf("stripe bench: %s per run, unit %s, data checksums %s (CRC-32C by %s), "
               "MB = 10^6 bytes\n",
               size, unit, b->cmd->no_checksum ? "off" : "on", crc32c_chosen()->name);
        printf("  %-40s %12s %12s\n", "directories", "write MB/s", "read MB/s");
        for (unsigned i = 0; i <= ndirs; i++)
                printf("  %-40s %12.1f %12.1f\n", runs[i].label, runs[i].write_MBps,
                       runs[i].read_MBps);
        printf("  %-40s %11.2fx %11.2fx\n", "striped / mean single disk",
               striped->write_MBps / mean_write, striped->read_MBps / mean_read);
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
        ds_live_start(b.live);
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
        print_results(&b, runs, ndirs);
        ds_live_close(b.live);
        free(runs);
        free(dirs);
        return 0;
}
