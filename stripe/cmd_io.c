/* stripe put and stripe get: a file into a striped file and back, through pool buffers
 * filled and drained by O_DIRECT where the filesystem allows it. */
#include <err.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dragstrip/error.h>
#include <dragstrip/pool.h>
#include <dragstrip/report.h>

#include "stripe_cmd.h"

struct transfer {
        const struct stripe_cmd *cmd;
        const char *name;
        char **dirs;
        unsigned ndirs;
        struct ds_stripe *stripe;
        struct ds_pool *pool;
        struct ds_live *live;
        struct ds_report report;
        struct progress progress;
        int fd; /* source (put) or destination (get) */
        bool fd_direct;
        const char *fd_name;
};

static void transfer_extra(struct ds_json *json, void *ctx)
{
        const struct transfer *t = ctx;
        struct ds_stripe_info info;

        ds_stripe_stat(t->stripe, &info);
        ds_json_str(json, "name", t->name);
        ds_json_u64(json, "size", info.size);
        ds_json_u64(json, "width", info.layout.width);
        ds_json_u64(json, "unit", info.layout.unit);
        ds_json_u64(json, "direct_members", info.direct);
}

/* Live counters and the reporter, shared by put and get. */
static void transfer_begin(struct transfer *t, const char *role, bool to_stderr)
{
        struct ds_error e;
        struct ds_report_config config = {.tool = "stripe",
                                          .role = role,
                                          .link = "disk",
                                          .json = t->cmd->json,
                                          .out = to_stderr ? stderr : stdout};

        if (ds_live_open(&t->live, "stripe", role, "disk", NULL, &e) != 0)
                errx(1, "%s: %s", t->cmd->name, e.text);
        ds_report_init(&t->report, &config, ds_live_segment(t->live));
}

static void transfer_started(struct transfer *t, uint64_t total)
{
        struct ds_stripe_info info;

        ds_stripe_stat(t->stripe, &info);
        t->report.config.msg_size = info.layout.unit;
        ds_live_set_msg_size(t->live, info.layout.unit);
        ds_live_start(t->live);
        ds_report_start(&t->report);
        progress_begin(&t->progress, t->cmd->name, total, ds_live_segment(t->live));
}

/* A transfer that succeeded: its report, then the stripe closed (verb names it in an
 * error) and everything it held given back. */
static int transfer_finish(struct transfer *t, const char *verb)
{
        struct ds_result result;
        struct ds_error e;

        progress_end(&t->progress);
        ds_report_finish(&t->report, &result);
        ds_live_done(t->live);
        ds_report_print(&t->report, &result, transfer_extra, t);
        if (ds_stripe_close(t->stripe, &e) != 0)
                errx(1, "%s %s: %s", verb, t->name, e.text);
        ds_pool_destroy(t->pool);
        ds_live_close(t->live);
        free(t->dirs);
        return 0;
}

static int fill_from_fd(void *buf, size_t room, size_t *len, void *ctx, struct ds_error *err)
{
        struct transfer *t = ctx;
        size_t got = 0;

        while (got < room) {
                if (cmd_interrupted)
                        return ds_fail(err, -EINTR, "interrupted");
                ssize_t n = read(t->fd, (char *)buf + got, room - got);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return ds_fail(err, -errno, "read %s", t->fd_name);
                if (n == 0)
                        break;
                got += (size_t)n;
                /* A short O_DIRECT read is the end of the file; reading on from that
                 * unaligned offset would be refused. */
                if (t->fd_direct && got < room && got % DS_STRIPE_MIN_UNIT != 0)
                        break;
        }
        *len = got;
        progress_tick(&t->progress);
        return 0;
}

/* Opens path with O_DIRECT when the filesystem takes it, so reads land straight in pool
 * buffers; *direct says which. */
static int open_maybe_direct(const char *path, int flags, bool want, bool *direct)
{
        int fd = want ? open(path, flags | O_DIRECT | O_CLOEXEC, 0644) : -1;

        *direct = fd >= 0;
        if (fd < 0)
                fd = open(path, flags | O_CLOEXEC, 0644);
        return fd;
}

int cmd_put(const struct stripe_cmd *cmd)
{
        struct transfer t = {.cmd = cmd, .fd_name = cmd->args[0]};
        struct ds_stripe_options options = {.unit = cmd->unit};
        struct ds_error e;
        struct stat st;
        uint64_t total = 0;
        int rc;

        if (strcmp(cmd->args[0], "-") == 0) {
                if (cmd->nargs < 3)
                        errx(2, "put: reading stdin needs a NAME");
                t.fd = STDIN_FILENO;
                t.fd_name = "stdin";
        } else {
                t.fd = open_maybe_direct(cmd->args[0], O_RDONLY, !cmd->no_direct, &t.fd_direct);
                if (t.fd < 0)
                        err(1, "put: %s", cmd->args[0]);
        }
        if (fstat(t.fd, &st) == 0 && S_ISREG(st.st_mode))
                total = (uint64_t)st.st_size;
        t.name = cmd->nargs == 3 ? cmd->args[2] : basename(cmd->args[0]);
        t.dirs = cmd_dirs(cmd, cmd->args[1], &t.ndirs);
        transfer_begin(&t, "put", false);
        options.live = ds_live_segment(t.live);
        options.flags = (cmd->force ? DS_STRIPE_REPLACE : 0) | cmd_flags(cmd);
        rc =
            ds_stripe_create(&t.stripe, (const char *const *)t.dirs, t.ndirs, t.name, &options, &e);
        if (rc != 0)
                errx(1, "put: %s", e.text);
        cmd_note_buffered(t.stripe, (const char *const *)t.dirs);
        transfer_started(&t, total);
        rc = ds_stripe_stream_pool(t.stripe, &t.pool, &e);
        if (rc == 0)
                rc = ds_stripe_write_stream(t.stripe, t.pool, fill_from_fd, &t, &e);
        if (rc == 0)
                rc = ds_stripe_commit(t.stripe, &e);
        if (rc != 0) {
                progress_end(&t.progress);
                ds_stripe_close(t.stripe, NULL); /* removes the uncommitted members */
                errx(1, "put %s: %s", t.name, e.text);
        }
        return transfer_finish(&t, "put");
}

static int drain_to_fd(const void *buf, size_t len, uint64_t offset, void *ctx,
                       struct ds_error *err)
{
        struct transfer *t = ctx;
        size_t put = 0;

        (void)offset;
        /* The last piece of a file is rarely a multiple of 4K: O_DIRECT would refuse it. */
        if (t->fd_direct && len % DS_STRIPE_MIN_UNIT != 0) {
                if (fcntl(t->fd, F_SETFL, fcntl(t->fd, F_GETFL) & ~O_DIRECT) != 0)
                        return ds_fail(err, -errno, "%s: clear O_DIRECT", t->fd_name);
                t->fd_direct = false;
        }
        while (put < len) {
                if (cmd_interrupted)
                        return ds_fail(err, -EINTR, "interrupted");
                ssize_t n = write(t->fd, (const char *)buf + put, len - put);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return ds_fail(err, -errno, "write %s", t->fd_name);
                put += (size_t)n;
        }
        progress_tick(&t->progress);
        return 0;
}

int cmd_get(const struct stripe_cmd *cmd)
{
        struct transfer t = {.cmd = cmd, .name = cmd->args[1], .fd_name = cmd->args[2]};
        struct ds_stripe_options options = {0};
        bool to_stdout = strcmp(cmd->args[2], "-") == 0;
        struct ds_stripe_info info;
        struct ds_error e;
        int rc;

        t.dirs = cmd_dirs(cmd, cmd->args[0], &t.ndirs);
        transfer_begin(&t, "get", to_stdout);
        options.live = ds_live_segment(t.live);
        options.flags = cmd_flags(cmd);
        rc = ds_stripe_open(&t.stripe, (const char *const *)t.dirs, t.ndirs, t.name, &options, &e);
        if (rc != 0)
                errx(1, "get: %s", e.text);
        cmd_note_buffered(t.stripe, (const char *const *)t.dirs);
        if (to_stdout) {
                t.fd = STDOUT_FILENO;
                t.fd_name = "stdout";
        } else {
                t.fd = open_maybe_direct(t.fd_name, O_WRONLY | O_CREAT | O_TRUNC, !cmd->no_direct,
                                         &t.fd_direct);
                if (t.fd < 0)
                        err(1, "get: %s", t.fd_name);
        }
        ds_stripe_stat(t.stripe, &info);
        transfer_started(&t, info.size);
        rc = ds_stripe_stream_pool(t.stripe, &t.pool, &e);
        if (rc == 0)
                rc = ds_stripe_read_stream(t.stripe, t.pool, drain_to_fd, &t, &e);
        if (rc == 0 && (rc = ds_stripe_check_data(t.stripe, &e)) == -ENODATA)
                rc = 0; /* written piecemeal, without checksums: the headers were checked */
        if (rc == 0 && !to_stdout && close(t.fd) != 0)
                rc = ds_fail(&e, -errno, "close %s", t.fd_name);
        if (rc != 0) {
                progress_end(&t.progress);
                if (!to_stdout)
                        unlink(t.fd_name); /* never leave wrong or partial data behind */
                errx(1, "get %s: %s", t.name, e.text);
        }
        return transfer_finish(&t, "get");
}
