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
#include <dragstrip/pace.h>
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
        struct ds_report_ticker *ticker; /* -i */
        struct ds_pace pace;             /* -R */
        bool paced;
        struct progress progress;
        int fd; /* source (put) or destination (get) */
        bool fd_direct;
        const char *fd_name;
        char *tmp_path;   /* get: DEST's bytes until they all check out */
        char *final_path; /* get: where tmp_path goes then */
};

/* The command line's choices, for the report's "params". */
static void transfer_params(struct ds_json *json, void *ctx)
{
        const struct transfer *t = ctx;

        ds_json_open_array(json, "dirs");
        for (unsigned i = 0; i < t->ndirs; i++)
                ds_json_str(json, NULL, t->dirs[i]);
        ds_json_close(json);
        ds_json_u64(json, "unit", t->cmd->unit);
        ds_json_u64(json, "mem", t->cmd->mem);
        ds_json_bool(json, "force", t->cmd->force);
        ds_json_bool(json, "direct", !t->cmd->no_direct);
        ds_json_bool(json, "checksums", !t->cmd->no_checksum);
        ds_json_double(json, "rate_bps", t->cmd->rate_bps);
}

static void transfer_extra(struct ds_json *json, void *ctx)
{
        const struct transfer *t = ctx;
        struct ds_stripe_info info;

        if (cmd_interrupted)
                ds_json_bool(json, "interrupted", true);
        ds_stripe_stat(t->stripe, &info);
        ds_json_str(json, "name", t->name);
        ds_json_u64(json, "size", info.size);
        ds_json_u64(json, "width", info.layout.width);
        ds_json_u64(json, "unit", info.layout.unit);
        ds_json_u64(json, "direct_members", info.direct);
}

/* The segment of the running transfer, removed on every exit path (errx included). */
static struct ds_live *open_live;

static void close_live_at_exit(void)
{
        ds_live_close(open_live);
        open_live = NULL;
}

/* Live counters and the reporter, shared by put and get. */
static void transfer_begin(struct transfer *t, const char *role, bool to_stderr)
{
        struct ds_error e;
        struct ds_report_config config = {.tool = "stripe",
                                          .role = role,
                                          .link = "disk",
                                          .json = t->cmd->json,
                                          .interval_s = t->cmd->interval_s,
                                          .out = to_stderr ? stderr : stdout,
                                          .params = transfer_params,
                                          .params_ctx = t};

        if (ds_live_open(&t->live, "stripe", role, "disk", NULL, &e) != 0)
                errx(1, "%s: %s", t->cmd->name, e.text);
        open_live = t->live;
        atexit(close_live_at_exit);
        ds_report_init(&t->report, &config, ds_live_segment(t->live));
        t->paced = t->cmd->rate_bps > 0;
        if (t->paced)
                ds_pace_init(&t->pace, t->cmd->rate_bps);
}

static void transfer_started(struct transfer *t, uint64_t total)
{
        struct ds_stripe_info info;

        ds_stripe_stat(t->stripe, &info);
        t->report.config.msg_size = info.layout.unit;
        ds_live_set_msg_size(t->live, info.layout.unit);
        ds_live_start(t->live);
        ds_report_start(&t->report);
        int rc = ds_report_ticker_start(&t->report, &t->ticker);
        if (rc < 0)
                errx(1, "%s: interval reports: %s", t->cmd->name, strerror(-rc));
        progress_begin(&t->progress, t->cmd->name, total, ds_live_segment(t->live));
        if (t->ticker)
                t->progress.on = false; /* the interval lines say how far it came */
}

/* The end of the moving: no more interval reports nor progress. */
static void transfer_stopped(struct transfer *t)
{
        ds_report_ticker_stop(t->ticker);
        t->ticker = NULL;
        progress_end(&t->progress);
}

/* -R: after bytes moved, waits until they are due; a stop ends the wait. Unpaced, nothing
 * to do. */
static int pace(struct transfer *t, size_t bytes, struct ds_error *err)
{
        if (t->paced && ds_pace_wait(&t->pace, bytes) < 0)
                return ds_fail(err, -EINTR, "interrupted");
        return 0;
}

/* The end of a transfer: its report (marked when a signal cut it short), then the stripe
 * closed (verb names it in an error; an uncommitted put is removed) and everything it held
 * given back. Returns the exit status. */
static int transfer_finish(struct transfer *t, const char *verb)
{
        bool interrupted = cmd_interrupted;
        struct ds_result result;
        struct ds_error e;

        transfer_stopped(t);
        ds_report_finish(&t->report, &result);
        ds_live_done(t->live);
        ds_report_print(&t->report, &result, transfer_extra, t);
        if (interrupted && !t->cmd->json)
                fprintf(t->report.config.out ? t->report.config.out : stdout,
                        "interrupted by signal %d: %s %s did not complete\n", ds_stop_signal(),
                        verb, t->name);
        if (ds_stripe_close(t->stripe, &e) != 0 && !interrupted)
                errx(1, "%s %s: %s", verb, t->name, e.text);
        ds_pool_destroy(t->pool);
        close_live_at_exit();
        free(t->dirs);
        return interrupted ? ds_stop_status() : 0;
}

/* A transfer that failed, or that a signal stopped: what was left undone is undone. */
static int transfer_fail(struct transfer *t, const char *verb, const struct ds_error *e)
{
        if (t->tmp_path)
                unlink(t->tmp_path); /* ours; DEST itself is untouched */
        if (cmd_interrupted)
                return transfer_finish(t, verb);
        transfer_stopped(t);
        ds_stripe_close(t->stripe, NULL); /* removes the members of an uncommitted put */
        errx(1, "%s %s: %s", verb, t->name, e->text);
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
        return pace(t, got, err);
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

/* A unit larger than the whole file would only make one member hold it all: a file of
 * known size gets a unit no larger than itself (rounded up to 4K). */
static uint64_t trimmed_unit(uint64_t unit, uint64_t total)
{
        uint64_t want = unit ? unit : DS_STRIPE_DEFAULT_UNIT;
        uint64_t fits = (total + DS_STRIPE_MIN_UNIT - 1) / DS_STRIPE_MIN_UNIT * DS_STRIPE_MIN_UNIT;

        if (total == 0 || fits >= want)
                return want;
        return fits;
}

int cmd_put(const struct stripe_cmd *cmd)
{
        struct transfer t = {.cmd = cmd, .fd_name = cmd->args[0]};
        struct ds_stripe_options options;
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
                if (t.fd < 0 && cmd_interrupted)
                        errx(ds_stop_status(), "put: interrupted opening %s", cmd->args[0]);
                if (t.fd < 0)
                        err(1, "put: %s", cmd->args[0]);
        }
        if (fstat(t.fd, &st) == 0 && S_ISREG(st.st_mode))
                total = (uint64_t)st.st_size;
        t.name = cmd->nargs == 3 ? cmd->args[2] : basename(cmd->args[0]);
        cmd_name(cmd, t.name);
        t.dirs = cmd_dirs(cmd, cmd->args[1], &t.ndirs);
        options = cmd_options(cmd);
        options.unit = trimmed_unit(cmd->unit, total);
        options.flags |= cmd->force ? DS_STRIPE_REPLACE : 0;
        transfer_begin(&t, "put", false);
        options.live = ds_live_segment(t.live);
        rc =
            ds_stripe_create(&t.stripe, (const char *const *)t.dirs, t.ndirs, t.name, &options, &e);
        if (rc == -EEXIST) /* never `rm` a member: that damages the set */
                errx(1,
                     "put: %s: replace it with 'stripe put -f', or remove the whole set with "
                     "'stripe rm %s %s'",
                     e.text, cmd->args[1], t.name);
        if (rc != 0) /* a stop while it waited for the commit lock: 130/143 */
                errx(rc == -EINTR && cmd_interrupted ? ds_stop_status() : 1, "put: %s", e.text);
        cmd_note_buffered(t.stripe, (const char *const *)t.dirs);
        transfer_started(&t, total);
        rc = ds_stripe_stream_pool(t.stripe, &t.pool, &e);
        if (rc == 0)
                rc = ds_stripe_write_stream(t.stripe, t.pool, fill_from_fd, &t, &e);
        if (rc == 0 && !cmd_interrupted)
                rc = ds_stripe_commit(t.stripe, &e);
        if (rc != 0 || cmd_interrupted)
                return transfer_fail(&t, "put", &e);
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
        return pace(t, len, err);
}

/* DEST that is a member of the file being read would be destroyed by the reading. */
static void refuse_member(const struct transfer *t, const struct stat *dest)
{
        struct stat st;

        for (unsigned i = 0; i < t->ndirs; i++) {
                const char *path = ds_stripe_member_path(t->stripe, i);
                if (stat(path, &st) == 0 && st.st_dev == dest->st_dev && st.st_ino == dest->st_ino)
                        errx(2, "get: %s is member %u of %s itself (%s)", t->fd_name, i, t->name,
                             path);
        }
}

/* Devices, FIFOs and sockets are written in place and never truncated nor removed; a
 * regular file (or a new name) gets the bytes under a temporary name beside it, renamed
 * over it only once every byte has checked out. */
static void open_dest(struct transfer *t)
{
        struct stat st;
        const char *slash;
        bool existed;
        int flags, rc;

        existed = stat(t->fd_name, &st) == 0;
        if (!existed && errno != ENOENT)
                err(1, "get: %s", t->fd_name);
        if (existed && S_ISDIR(st.st_mode))
                errx(2, "get: %s is a directory (expected a file name)", t->fd_name);
        if (existed && !S_ISREG(st.st_mode)) {
                /* A FIFO's open waits for a reader; a signal ends the wait (no SA_RESTART). */
                t->fd = open(t->fd_name, O_WRONLY | O_NOCTTY | O_CLOEXEC);
                if (t->fd < 0 && !cmd_interrupted)
                        err(1, "get: %s", t->fd_name);
                return;
        }
        if (existed)
                refuse_member(t, &st);
        /* Through a symlink, its target is DEST. */
        t->final_path = existed ? realpath(t->fd_name, NULL) : strdup(t->fd_name);
        if (!t->final_path)
                err(1, "get: %s", t->fd_name);
        slash = strrchr(t->final_path, '/');
        if (slash)
                rc = asprintf(&t->tmp_path, "%.*s/.%s.stripe-XXXXXX", (int)(slash - t->final_path),
                              t->final_path, slash + 1);
        else
                rc = asprintf(&t->tmp_path, ".%s.stripe-XXXXXX", t->final_path);
        if (rc < 0)
                errx(1, "get: out of memory");
        t->fd = mkostemp(t->tmp_path, O_CLOEXEC);
        if (t->fd < 0)
                err(1, "get: create a temporary file beside %s", t->fd_name);
        if (existed && fchmod(t->fd, st.st_mode & 07777) != 0)
                warn("get: keep the mode of %s", t->fd_name);
        flags = fcntl(t->fd, F_GETFL);
        t->fd_direct =
            !t->cmd->no_direct && flags >= 0 && fcntl(t->fd, F_SETFL, flags | O_DIRECT) == 0;
}

/* DEST complete: synced and renamed over the old one, whose directory is synced too. */
static int finish_dest(struct transfer *t, struct ds_error *e)
{
        if (t->tmp_path && fsync(t->fd) != 0)
                return ds_fail(e, -errno, "fsync %s", t->tmp_path);
        if (close(t->fd) != 0)
                return ds_fail(e, -errno, "close %s", t->fd_name);
        if (!t->tmp_path)
                return 0;
        if (rename(t->tmp_path, t->final_path) != 0)
                return ds_fail(e, -errno, "rename %s to %s", t->tmp_path, t->final_path);
        free(t->tmp_path);
        t->tmp_path = NULL;
        char *copy = strdup(t->final_path);
        int dir = copy ? open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
        int rc = dir >= 0 && fsync(dir) == 0 ? 0 : ds_fail(e, -errno, "fsync %s", copy);
        if (dir >= 0)
                close(dir);
        free(copy);
        return rc;
}

int cmd_get(const struct stripe_cmd *cmd)
{
        struct transfer t = {.cmd = cmd, .name = cmd->args[1], .fd_name = cmd->args[2]};
        struct ds_stripe_options options = cmd_options(cmd);
        bool to_stdout = strcmp(cmd->args[2], "-") == 0;
        struct ds_stripe_info info;
        struct ds_error e;
        int rc;

        cmd_name(cmd, t.name);
        t.dirs = cmd_dirs(cmd, cmd->args[0], &t.ndirs);
        transfer_begin(&t, "get", to_stdout);
        options.live = ds_live_segment(t.live);
        rc = ds_stripe_open(&t.stripe, (const char *const *)t.dirs, t.ndirs, t.name, &options, &e);
        if (rc != 0) /* a stop while it waited for the commit lock: 130/143 */
                errx(rc == -EINTR && cmd_interrupted ? ds_stop_status() : 1, "get: %s", e.text);
        cmd_note_buffered(t.stripe, (const char *const *)t.dirs);
        ds_stripe_stat(t.stripe, &info);
        transfer_started(&t, info.size);
        if (to_stdout) {
                t.fd = STDOUT_FILENO;
                t.fd_name = "stdout";
        } else {
                open_dest(&t);
        }
        if (t.fd < 0)
                return transfer_fail(&t, "get", &e); /* a signal, waiting for a FIFO reader */
        rc = ds_stripe_stream_pool(t.stripe, &t.pool, &e);
        if (rc == 0)
                rc = ds_stripe_read_stream(t.stripe, t.pool, drain_to_fd, &t, &e);
        if (rc == 0 && (rc = ds_stripe_check_data(t.stripe, &e)) == -ENODATA)
                rc = 0; /* written piecemeal, without checksums: the headers were checked */
        if (rc == 0 && !to_stdout && !cmd_interrupted)
                rc = finish_dest(&t, &e);
        if (rc != 0 || cmd_interrupted)
                return transfer_fail(&t, "get", &e);
        free(t.final_path);
        return transfer_finish(&t, "get");
}
