/* RETR, STOR and APPE: a file moved through the pipeline (xfer.h) over the data
 * connections (channel.c). While data moves, a watcher thread reads the control
 * connection so that ABOR, a hang-up or SIGTERM cut the transfer. */
#include "transfer.h"

#include "channel.h"
#include "ftps.h"
#include "verbs.h"
#include "watch.h"

#include <dragstrip/clock.h>
#include <dragstrip/error.h>
#include <dragstrip/live.h>
#include <dragstrip/pool.h>
#include <dragstrip/serve.h>
#include <dragstrip/stop.h>

#include "modee.h"
#include "xfer.h"
#include "xverbs.h"

#include <errno.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* One line in the server's log and one in the transfer log (--xferlog); whole says
 * whether the file went through complete (xferlog's c, else i). */
static void log_transfer(struct session *s, const char *verb, const char *path,
                         const struct xftp_xfer_result *result, bool whole, const char *outcome)
{
        xftpd_log(LOG_INFO, "%s %s %s /%s %llu bytes %.3f s %.2f MB/s %u stream%s %s", s->user,
                  s->peer_text, verb, path, (unsigned long long)result->bytes, result->seconds,
                  result->mb_per_s, s->mode == 'E' ? s->streams : 1,
                  s->mode == 'E' && s->streams > 1 ? "s" : "", outcome);
        xftpd_xferlog_write(s->config->xferlog_fd,
                            &(struct xftpd_xfer_record){.host = s->peer_text,
                                                        .path = path,
                                                        .user = s->user,
                                                        .bytes = result->bytes,
                                                        .seconds = result->seconds,
                                                        .upload = verb[0] != 'R',
                                                        .anonymous = s->anonymous,
                                                        .complete = whole});
}

/* What RETR and STOR share: the data connections, the watcher, the pipeline. */
struct job {
        struct xftp_store_file *file;
        bool upload;
        bool connected; /* false: no data connection came, and 425 was sent */
        struct xftp_xfer_opts opts;
        struct xftp_xfer_result result;
        struct ds_error err;
        uint64_t data_end_ns; /* a MODE S upload whose end may be a death: when it ended;
                               * 0: its end is sure (ALLO reached, MODE E) */
};

static int on_prefix(uint64_t prefix_end, void *ctx)
{
        return xftp_store_upload_prefix(ctx, prefix_end);
}

/* Whether ALLO announced a size and the upload's bytes reach exactly it. */
static bool allo_reached(const struct session *s, const struct job *job)
{
        return s->allocate != 0 && job->opts.offset + job->result.bytes == s->allocate;
}

/* How long after a MODE S upload's end a killed client's control connection has to show
 * its hang-up. As a process dies its descriptors are closed one after another (the last
 * opened first: the closes run as task work, last queued first), so the FINs of its data
 * and control connections leave within microseconds of each other: on loopback the
 * control connection's hang-up was already there, when the data's end had been read, in
 * 87 and 89 of 100 kills, and came within 0.1 ms in 95, 1.2 ms in 99, 3.9 ms at worst on
 * a busy machine. Across a network both arrive within the path's jitter, which scales
 * with its round trip: the control connection's least round trip (tcpi_min_rtt; its
 * smoothed tcpi_rtt counts the client's delayed ACKs of replies, 10 ms and more on
 * loopback), no less than HANGUP_WAIT_FLOOR_NS, no more than the 25 ms that once was
 * waited after every upload and cost a tree of 2,000 small files 13.6 s. The file's write
 * out (on a plain store) runs inside this wait: where it takes longer, the wait adds nothing. */
#define HANGUP_WAIT_FLOOR_NS 200000ull
#define HANGUP_WAIT_CEIL_NS  25000000ull

static uint64_t hangup_wait_ns(int ctl_fd)
{
        struct tcp_info info;
        socklen_t len = sizeof(info);

        if (getsockopt(ctl_fd, IPPROTO_TCP, TCP_INFO, &info, &len) < 0 ||
            len < offsetof(struct tcp_info, tcpi_min_rtt) + sizeof(info.tcpi_min_rtt))
                return HANGUP_WAIT_CEIL_NS;
        uint64_t rtt_ns = (uint64_t)info.tcpi_min_rtt * 1000u;
        return rtt_ns < HANGUP_WAIT_FLOOR_NS  ? HANGUP_WAIT_FLOOR_NS
               : rtt_ns > HANGUP_WAIT_CEIL_NS ? HANGUP_WAIT_CEIL_NS
                                              : rtt_ns;
}

/* A MODE S upload ends when the client closes the data connection, which is also what a
 * client killed mid-transfer does; its control connection closes in the same instant. So
 * the upload's data is written out first (commit needs that anyway), then the control
 * connection is looked at (the kernel's view, not the watcher's, which a loaded machine
 * could schedule too late) until hangup_wait_ns after the data's end. Returns the write's
 * result: once a writeback has failed, a later wait may not say so again. */
static int finish_stream_upload(struct session *s, struct job *job)
{
        uint64_t deadline = job->data_end_ns + hangup_wait_ns(s->ctl.fd);
        int rc = xftp_store_write_out(job->file);
        uint64_t now = ds_now_ns();
        uint64_t left = deadline > now ? deadline - now : 0;
        struct timespec wait = {.tv_sec = (time_t)(left / 1000000000u),
                                .tv_nsec = (long)(left % 1000000000u)};
        struct pollfd pfd = {.fd = s->ctl.fd, .events = POLLRDHUP};

        if (ppoll(&pfd, 1, &wait, NULL) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)))
                atomic_store(&s->ctl_gone, true);
        return rc;
}

bool xfer_budget_take(struct session *s, uint64_t bytes)
{
        if (bytes == 0 || !s->config->budget ||
            ds_shared_budget_take(s->config->budget, s->config->budget_slot, bytes))
                return true;
        session_reply(s, "451 Server memory budget exhausted; try fewer streams or later.");
        return false;
}

void xfer_budget_give(struct session *s, uint64_t bytes)
{
        if (bytes > 0 && s->config->budget)
                ds_shared_budget_give(s->config->budget, s->config->budget_slot, bytes);
}

#define LENT_BUFFERS     4u
#define LENT_BUFFER_SIZE (1u << 20)

/* The session's lent buffers, made at its first transfer when the budget has room for
 * them; NULL when it had not (each transfer then maps its own, as it is budgeted). */
static struct ds_pool *lent_pool(struct session *s)
{
        struct ds_error ignored;
        uint64_t bytes = (uint64_t)LENT_BUFFERS * LENT_BUFFER_SIZE;
        size_t size = s->config->block < LENT_BUFFER_SIZE ? s->config->block : LENT_BUFFER_SIZE;

        if (s->lend_tried)
                return s->lend;
        s->lend_tried = true;
        if (s->config->budget &&
            !ds_shared_budget_take(s->config->budget, s->config->budget_slot, bytes))
                return NULL;
        if (ds_pool_create(&s->lend, size, LENT_BUFFERS, 0, &ignored) < 0) {
                s->lend = NULL;
                xfer_budget_give(s, bytes);
        }
        return s->lend;
}

/* Lends the session's buffers to a transfer they fit: one whose own would be no larger,
 * or an upload of no announced size over a few connections. Such an upload may be a small
 * file of a tree as well as a large one: it goes in the lent buffers' pieces (1 MiB, as
 * fast on these disks as 4 MiB) rather than in 16 MiB mapped and zeroed for what may be a
 * few KiB. Larger transfers keep buffers of their own, budgeted as before. */
static void lend_if_fits(struct session *s, struct job *job, enum xftp_xfer_mode mode, unsigned n)
{
        struct xftp_xfile *xfile = xftp_store_xfile(job->file);
        bool unsized = job->upload && job->opts.limit == UINT64_MAX && n <= LENT_BUFFERS;
        uint64_t own = xftp_xfer_buffer_bytes(xfile, mode, n, &job->opts, !job->upload);

        if (own == 0 || (!unsized && own > (uint64_t)LENT_BUFFERS * LENT_BUFFER_SIZE))
                return;
        job->opts.pool = lent_pool(s);
        if (unsized && job->opts.pool)
                job->opts.block = ds_pool_buf_size(job->opts.pool);
}

void xfer_free_lent(struct session *s)
{
        if (!s->lend)
                return;
        ds_pool_destroy(s->lend);
        s->lend = NULL;
        xfer_budget_give(s, (uint64_t)LENT_BUFFERS * LENT_BUFFER_SIZE);
}

/* Whether a transfer may run without the watcher thread: a block or less over the MODE E
 * connection kept from the last one. It runs in the session's thread over a connection
 * already open, and after each socket call on the data connection and each slice of a wait
 * (a client that does not read, or does not send) the pipeline has the session glance at
 * the control connection itself, for an ABOR, a hang-up or a stop, as the watcher would
 * (watch_glance). An ABOR that comes after the last of them is read after the transfer's
 * 226 and answered as one with no transfer.
 * Arming the watcher, waking it and waiting for it to let go of the control connection
 * cost each small file of a tree two thread switches: a get of 2,000 files of 64 KiB took
 * 586 ms unwatched against 626 (bench/xftp-tree.sh's tree, ext4 with a journal, median of
 * 10 alternating rounds; 548 against 626 in another 10). */
static bool unwatched(const struct session *s, const struct job *job, unsigned n,
                      enum xftp_xfer_mode mode, bool verbs)
{
        const struct xftp_xfer_opts *o = &job->opts;
        uint64_t bytes = !job->upload             ? o->length
                         : o->limit == UINT64_MAX ? UINT64_MAX
                                                  : o->limit - o->offset;
        return !verbs && n == 1 && mode == XFTP_XFER_BLOCKS && s->keep && xfer_kept_serve(s, n) &&
               bytes <= o->block;
}

/* Opens the data connections, moves the data, closes them. Returns the pipeline's
 * result; job->connected says whether it ran. */
static int run_job(struct session *s, struct job *job)
{
        struct xftp_conn conns[XFTP_MODEE_MAX_STREAMS];
        unsigned n = s->mode == 'E' ? s->streams : 1;
        enum xftp_xfer_mode mode = s->mode == 'E' ? XFTP_XFER_BLOCKS : XFTP_XFER_STREAM;
        bool verbs = xfer_verbs_asked(s);

        job->opts.block = s->config->block;
        /* A MODE S send takes no buffers: sendfile, or under TLS in user space a window
         * of the file mapped (xtls.c): page cache, not memory of the session's own. */
        lend_if_fits(s, job, mode, n);
        uint64_t need =
            xftp_xfer_buffer_bytes(xftp_store_xfile(job->file), mode, n, &job->opts, !job->upload);
        if (verbs) /* each stream's registered buffers not already the session's */
                need += xfer_verbs_need(s, n);
        if (!xfer_budget_take(s, need))
                return -ENOMEM;
        bool watched = !unwatched(s, job, n, mode, verbs);
        int rc = watched ? watch_begin(s) : watch_skip(s);
        if (!watched) {
                job->opts.on_slice = watch_glance;
                job->opts.slice_ctx = s;
        }
        if (rc < 0) {
                xfer_budget_give(s, need);
                session_reply(s, "451 Cannot start the transfer.");
                return rc;
        }
        bool reused = false;
        rc = verbs ? xfer_open_verbs(s, conns, n, job->upload, mode == XFTP_XFER_BLOCKS)
                   : xfer_open_data(s, conns, n, mode == XFTP_XFER_BLOCKS, &reused);
        job->connected = rc == 0;
        if (rc == 0 && reused) {
                session_reply(s, "125 Data connection%s already open; transfer starting.",
                              n > 1 ? "s" : "");
        } else if (rc == 0 && !verbs) { /* xfer_open_verbs said 150 before the links */
                session_reply(s, "150 Opening %s data connection%s.",
                              mode == XFTP_XFER_BLOCKS ? "MODE E" : "BINARY", n > 1 ? "s" : "");
                rc = ftps_secure_data(s, conns, n, &job->err);
        }
        if (rc == 0 && job->connected) {
                job->opts.idle_ms = s->config->idle_ms;
                job->opts.stop = &s->xfer_stop;
                job->opts.live = s->live ? ds_live_segment(s->live) : NULL;
                if (s->live)
                        ds_live_start(s->live);
                struct xftp_xfile *xfile = xftp_store_xfile(job->file);
                /* MODE E: GridFTP's cached channels, when asked; kept connections are
                 * sockets, looked at with poll() before their next transfer. */
                bool keep = s->keep && !verbs;
                if (keep)
                        job->opts.flags |= XFTP_XFER_KEEP;
                rc = job->upload ? xftp_xfer_recv_conns(xfile, mode, conns, n, &job->opts,
                                                        &job->result, &job->err)
                                 : xftp_xfer_send_conns(xfile, mode, conns, n, &job->opts,
                                                        &job->result, &job->err);
                if (rc == 0 && keep && job->result.kept) { /* for the next transfer */
                        memcpy(s->kept, conns, n * sizeof(*conns));
                        s->kept_n = n;
                        s->kept_prot_p = s->prot_p;
                } else {
                        xftp_conn_close_all(conns, n);
                }
                if (s->live)
                        ds_live_done(s->live);
                /* A size announced by ALLO and reached says the end itself. */
                if (rc == 0 && job->upload && mode == XFTP_XFER_STREAM && !allo_reached(s, job))
                        job->data_end_ns = ds_now_ns();
        }
        if (watched)
                watch_end(s);
        if (!job->connected)
                xfer_reply_unopened(s);
        xfer_budget_give(s, need);
        return rc;
}

/* Ends a transfer command: the file closed (an upload kept for REST when keep), the data
 * set-up forgotten. */
static void job_end(struct session *s, struct job *job, bool keep)
{
        xftp_store_file_close(job->file, keep);
        xfer_reset(s);
}

void xfer_cmd_retr(struct session *s, const char *arg)
{
        char path[XFTP_STORE_PATH_MAX];
        struct job job = {.upload = false};
        uint64_t size = 0;

        int rc = xftp_store_path(s->cwd, arg, path, sizeof(path));
        if (rc == 0)
                rc = xftp_store_open_read(s->store, path, &job.file);
        struct xftp_xfile *xfile = rc == 0 ? xftp_store_xfile(job.file) : NULL;
        if (rc == 0)
                rc = xfile->ops->size(xfile, &size);
        job.opts.offset = s->rest ? s->rest : s->range_start;
        /* The file as SIZE names it now: bytes appended while it goes are the next RETR's. */
        job.opts.length = s->range_end ? s->range_end - s->range_start : UINT64_MAX;
        if (!s->range_end && job.opts.offset <= size)
                job.opts.length = size - job.opts.offset;
        job.opts.limit = UINT64_MAX;
        if (rc < 0)
                session_reply_errno(s, rc, arg);
        else if (job.opts.offset > size)
                session_reply(s, "554 Restart point %llu lies beyond the end (%llu).",
                              (unsigned long long)job.opts.offset, (unsigned long long)size);
        if (rc < 0 || job.opts.offset > size) {
                job_end(s, &job, false);
                return;
        }
        rc = run_job(s, &job);
        if (job.connected)
                log_transfer(s, "RETR", path, &job.result, rc == 0, rc == 0 ? "ok" : "cut");
        if (rc == 0)
                xfer_reply_done(s, "Transfer complete.");
        else if (job.connected)
                xfer_reply_cut(s, rc, job.result.file_failed, job.err.text);
        job_end(s, &job, false);
}

/* Whether an upload that ended without error holds the whole file. */
static bool upload_whole(struct session *s, const struct job *job)
{
        if (atomic_load(&s->ctl_gone) || atomic_load(&s->aborted))
                return false;
        /* ALLO announced the file's size: a MODE S upload must reach it exactly. */
        return s->allocate == 0 || s->mode == 'E' || allo_reached(s, job);
}

static int start_upload(struct session *s, const char *arg, const char *path, bool append,
                        struct job *job)
{
        struct xftp_store_upload how = {.user = s->user, .offset = s->rest, .append = append};
        int rc = xftp_store_create(s->store, path, &how, &job->file);

        if (rc == -ERANGE)
                session_reply(s, "554 No upload to continue from %llu (PSIZ tells where to).",
                              (unsigned long long)s->rest);
        else if (rc == -EBUSY)
                session_reply(s, "450 An upload of %s is still ending; try again.", arg);
        else if (rc == -EOPNOTSUPP)
                session_reply(s, "504 REST and APPE are not available on a striped store.");
        else if (rc < 0)
                session_reply_errno(s, rc, arg);
        if (rc < 0)
                return rc;
        job->upload = true;
        job->opts.offset = xftp_store_upload_start(job->file);
        /* ALLO gives the file's size when done; a start past it could never reach it. */
        if (s->allocate && s->allocate < job->opts.offset) {
                session_reply(s,
                              "552 The upload would start at byte %llu, past the %llu bytes "
                              "ALLO announced.",
                              (unsigned long long)job->opts.offset,
                              (unsigned long long)s->allocate);
                /* An APPE's copy of the file goes; a partial that REST named stays. */
                xftp_store_file_close(job->file, !append);
                return -EFBIG;
        }
        job->opts.length = UINT64_MAX;
        job->opts.limit = s->allocate ? s->allocate : UINT64_MAX;
        job->opts.on_prefix = on_prefix;
        job->opts.prefix_ctx = job->file;
        return 0;
}

void xfer_cmd_stor(struct session *s, const char *arg, bool append)
{
        char path[XFTP_STORE_PATH_MAX];
        struct job job = {.upload = true};

        if (s->read_only || s->range_end) {
                session_reply(s, s->read_only ? "550 Permission denied: read-only."
                                              : "504 RANG applies to RETR and HASH.");
                xfer_reset(s);
                return;
        }
        int rc = xftp_store_path(s->cwd, arg, path, sizeof(path));
        if (rc < 0)
                session_reply_errno(s, rc, arg);
        if (rc < 0 || start_upload(s, arg, path, append, &job) < 0) {
                xfer_reset(s);
                return;
        }
        rc = run_job(s, &job);
        int sync_rc = rc == 0 && job.data_end_ns ? finish_stream_upload(s, &job) : 0;
        rc = rc == 0 ? sync_rc : rc;
        bool whole = rc == 0 && upload_whole(s, &job);
        int commit_rc = whole ? xftp_store_commit(job.file) : sync_rc;
        rc = rc == 0 ? commit_rc : rc;
        const char *verb = append ? "APPE" : "STOR";
        bool full = rc == -ENOSPC || rc == -EDQUOT || rc == -EFBIG;
        if (whole && rc == 0) {
                if (job.connected)
                        log_transfer(s, verb, path, &job.result, true, "ok");
                /* The data is on the disk and under its name; both are made durable later,
                 * one directory sync for a run of uploads (session_pay_owed). */
                xfer_reply_done(s, "Transfer complete.");
                session_check_paid(s, xftp_store_owe(job.file, &s->owed));
                job_end(s, &job, true);
                return;
        }
        /* Kept for REST unless the disk is full or the data overran what was announced;
         * closed before the reply, which says whether the partial could be kept. */
        bool kept = xftp_store_file_close(job.file, !full);
        if (job.connected)
                log_transfer(s, verb, path, &job.result, false,
                             kept ? "kept partial" : "partial discarded");
        if (commit_rc < 0 && !full)
                session_reply(s, "451 Cannot complete the upload: %s.", strerror(-commit_rc));
        else if (job.connected && rc == 0 && !atomic_load(&s->aborted) &&
                 !atomic_load(&s->ctl_gone))
                session_reply(s, "451 Upload incomplete: %llu bytes of %llu announced; %s.",
                              (unsigned long long)(job.opts.offset + job.result.bytes),
                              (unsigned long long)s->allocate,
                              kept ? "kept for REST"
                              : xftp_store_width(s->config->store) > 1
                                  ? "discarded (a striped store keeps no partial upload)"
                                  : "discarded (its bytes could not be made durable)");
        else if (job.connected || full)
                xfer_reply_cut(s, rc, job.result.file_failed, job.err.text);
        xfer_reset(s);
}
