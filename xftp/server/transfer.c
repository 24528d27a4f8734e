/* The commands that use a data connection: PASV/EPSV/PORT/EPRT set it up; RETR, STOR,
 * APPE move a file through the pipeline (xfer.h); LIST, NLST, MLSD send a listing; HASH
 * reads a file on the server. While data moves, a watcher thread reads the control
 * connection so that ABOR, a hang-up or SIGTERM cut the transfer. */
#include "session.h"

#include "ftps.h"
#include "watch.h"

#include <dragstrip/clock.h>
#include <dragstrip/error.h>
#include <dragstrip/live.h>
#include <dragstrip/pool.h>
#include <dragstrip/serve.h>
#include <dragstrip/stop.h>

#include "modee.h"
#include "xfer.h"

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

#define LIST_CHUNK (64u << 10) /* a listing goes out in pieces of this size */

/* Forgets the data connection set up, not REST, RANG or ALLO: clients send those before
 * or after PASV. */
static void forget_data(struct session *s)
{
        if (s->pasv_fd >= 0)
                close(s->pasv_fd);
        s->pasv_fd = -1;
        s->active.len = 0;
}

void xfer_drop_kept(struct session *s)
{
        ds_xconn_drop_all(s->kept, s->kept_n); /* the client waits for replies */
        s->kept_n = 0;
}

/* Whether the kept connections can carry a transfer: nothing came on them since (a client
 * that closed its end, or sent bytes no transfer asked for, has them no more). */
static bool kept_alive(struct session *s)
{
        for (unsigned i = 0; i < s->kept_n; i++) {
                struct pollfd pfd = {.fd = s->kept[i].fd, .events = POLLIN | POLLRDHUP};
                bool pending = s->kept[i].ops->pending && s->kept[i].ops->pending(&s->kept[i]) > 0;
                if (pending || poll(&pfd, 1, 0) != 0)
                        return false;
        }
        return true;
}

void xfer_reset(struct session *s)
{
        forget_data(s);
        s->rest = s->allocate = 0;
        s->range_start = s->range_end = 0;
}

static struct ds_data_opts data_opts(struct session *s, atomic_bool *stop)
{
        size_t buf = s->config->block < (64u << 20) ? s->config->block : (64u << 20);
        return (struct ds_data_opts){.sockbuf = (int)buf,
                                     .timeout_ms = s->config->data_ms,
                                     .stop = stop,
                                     .port_lo = s->config->pasv_lo,
                                     .port_hi = s->config->pasv_hi};
}

void xfer_cmd_pasv(struct session *s, bool extended, const char *arg)
{
        struct ds_error err;
        struct ds_ftp_addr bound;
        char text[DS_FTP_ADDR_TEXT];
        int family = s->local.ss.ss_family;
        bool v4 = family == AF_INET || ds_ftp_format_port(&s->local, text, sizeof(text)) == 0;

        if (extended && strcasecmp(arg, "ALL") == 0) {
                s->epsv_all = true;
                session_reply(s, "200 EPSV ALL: only EPSV from now on.");
                return;
        }
        if (extended && arg[0] && strcmp(arg, v4 ? "1" : "2") != 0) {
                session_reply(s, "522 Network protocol not supported, use (%s)", v4 ? "1" : "2");
                return;
        }
        if (!extended && s->epsv_all) {
                session_reply(s, "503 EPSV ALL was given: use EPSV.");
                return;
        }
        if (!extended && !v4) {
                session_reply(s, "425 PASV is for IPv4: use EPSV.");
                return;
        }
        forget_data(s);
        struct ds_data_opts opts = data_opts(s, NULL);
        int fd = ds_data_listen(&s->local, &opts, &err);
        s->pasv_fd = fd;
        if (fd < 0 || ds_ftp_addr_local(fd, &bound) < 0) {
                forget_data(s);
                session_reply(s, "425 Cannot open a passive port%s.",
                              fd == -EADDRINUSE ? ": all in use, try later" : "");
                return;
        }
        if (extended) {
                ds_ftp_format_epsv(ds_ftp_addr_port(&bound), text, sizeof(text));
                session_reply(s, "229 Entering Extended Passive Mode %s", text);
        } else {
                /* Behind NAT the address clients reach (--pasv-address) is not ours. EPSV
                 * names no address (RFC 2428): the client uses the control connection's. */
                if (s->config->pasv_addr.len) {
                        uint16_t port = ds_ftp_addr_port(&bound);
                        bound = s->config->pasv_addr;
                        ds_ftp_addr_set_port(&bound, port);
                }
                ds_ftp_format_port(&bound, text, sizeof(text));
                session_reply(s, "227 Entering Passive Mode (%s).", text);
        }
}

/* Whether a data connection may come from, or go to, a host other than the client's:
 * server-to-server copies, only when the server allows them (--fxp), never anonymous. */
static bool third_host_ok(const struct session *s)
{
        return s->config->fxp && !s->anonymous;
}

void xfer_cmd_port(struct session *s, bool extended, const char *arg)
{
        struct ds_ftp_addr addr;

        if (s->epsv_all) {
                session_reply(s, "503 EPSV ALL was given: use EPSV.");
                return;
        }
        int rc = extended ? ds_ftp_parse_eprt(arg, &addr) : ds_ftp_parse_port(arg, &addr);
        if (rc == -EAFNOSUPPORT) {
                session_reply(s, "522 Network protocol not supported, use (1,2)");
                return;
        }
        if (rc < 0) {
                session_reply(s, "501 Malformed %s argument.", extended ? "EPRT" : "PORT");
                return;
        }
        /* FTP bounce protection: never a privileged port, and a third host only with --fxp
         * for a user who logged in with a password (server-to-server copies). */
        if (ds_ftp_addr_port(&addr) < 1024) {
                session_reply(s, "504 Refused: port below 1024.");
                return;
        }
        if (!ds_ftp_addr_same_host(&addr, &s->peer) && !third_host_ok(s)) {
                session_reply(s, "504 Refused: data connections go to your own address.");
                return;
        }
        forget_data(s);
        s->active = addr;
        session_reply(s, "200 %s command successful.", extended ? "EPRT" : "PORT");
}

/* One line per transfer for the connections a passive port turned away. */
static void log_refused(struct session *s, const struct ds_data_refused *refused)
{
        char from[DS_FTP_ADDR_TEXT];

        ds_ftp_addr_text(&refused->first, from, sizeof(from));
        xftpd_log(LOG_WARNING, "%s %s refused %u data connection%s from another host (first %s)%s",
                  s->user, s->peer_text, refused->count, refused->count == 1 ? "" : "s", from,
                  s->anonymous ? "" : "; --fxp allows them");
}

/* Opens the n data connections of the next transfer: with reuse (a MODE E transfer), the
 * connections kept from the last one when no PASV or PORT came since (*reused says so);
 * else those PASV or PORT set up. Replies 425 and returns a negative errno when it
 * cannot. */
static int open_data(struct session *s, struct ds_xconn *conns, unsigned n, bool reuse,
                     bool *reused)
{
        struct ds_error err;
        struct ds_data_opts opts = data_opts(s, &s->xfer_stop);
        int fds[DS_MODEE_MAX_STREAMS];
        int rc;

        *reused = false;
        if (ftps_data_refused(s))
                return -EACCES;
        if (reuse && s->kept_n == n && s->kept_prot_p == s->prot_p && s->pasv_fd < 0 &&
            !s->active.len) {
                if (!kept_alive(s)) {
                        xfer_drop_kept(s);
                        session_reply(s, "425 The kept data connections were closed: use PASV "
                                         "or PORT.");
                        return -ENOTCONN;
                }
                memcpy(conns, s->kept, n * sizeof(*conns));
                s->kept_n = 0;
                *reused = true;
                return 0;
        }
        xfer_drop_kept(s);
        if (s->pasv_fd >= 0) {
                /* A third host that races the client for the port gets nothing. */
                struct ds_data_refused refused = {0};
                rc = ds_data_accept(s->pasv_fd, third_host_ok(s) ? NULL : &s->peer, fds, n, &opts,
                                    &refused, &err);
                if (refused.count)
                        log_refused(s, &refused);
        } else if (s->active.len) {
                struct ds_ftp_addr from = s->local;
                ds_ftp_addr_set_port(&from, 0);
                rc = ds_data_connect(&s->active, &from, fds, n, &opts, &err);
        } else {
                session_reply(s, "425 Use PORT, EPRT, PASV or EPSV first.");
                return -ENOTCONN;
        }
        for (unsigned i = 0; i < n; i++)
                rc < 0 ? ds_xconn_none(&conns[i]) : ds_xconn_plain(&conns[i], fds[i]);
        if (rc < 0)
                session_reply(s, "425 Cannot open the data connection: %s.", err.text);
        if (rc < 0 && atomic_load(&s->aborted)) /* ABOR while waiting for the connection */
                session_reply(s, "226 ABOR done.");
        return rc;
}

/* Replies for a transfer cut short, and for the ABOR that cut it. */
static void reply_cut(struct session *s, int rc, const char *why)
{
        if (atomic_load(&s->ctl_gone))
                return;
        if (atomic_load(&s->aborted)) {
                session_reply(s, "426 Transfer aborted.");
                session_reply(s, "226 ABOR done.");
        } else if (rc == -ENOSPC || rc == -EDQUOT) {
                session_reply(s, "452 Insufficient storage space; the partial file is removed.");
        } else if (rc == -EFBIG && s->allocate) {
                session_reply(s,
                              "552 More data than the %llu bytes announced; the partial file is "
                              "removed.",
                              (unsigned long long)s->allocate);
        } else if (rc == -EFBIG) {
                /* No ALLO: the limit is the file system's largest file, as the write says. */
                session_reply(s,
                              "552 Beyond the largest file this store takes (%s); the partial "
                              "file is removed.",
                              why);
        } else if (ds_stopping()) {
                session_reply(s, "426 Server shutting down.");
        } else {
                session_reply(s, "426 Transfer failed: %s.", why);
        }
}

/* A transfer that ended well: 226, and a second 226 for an ABOR that came too late to
 * cut it (the client waits for a reply to it). */
static void reply_done(struct session *s, const char *text)
{
        session_reply(s, "226 %s", text);
        if (atomic_load(&s->aborted))
                session_reply(s, "226 ABOR: the transfer had ended.");
}

/* One line in the server's log and one in the transfer log (--xferlog); whole says
 * whether the file went through complete (xferlog's c, else i). */
static void log_transfer(struct session *s, const char *verb, const char *path,
                         const struct ds_xfer_result *result, bool whole, const char *outcome)
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
        struct ds_store_file *file;
        bool upload;
        bool connected; /* false: no data connection came, and 425 was sent */
        struct ds_xfer_opts opts;
        struct ds_xfer_result result;
        struct ds_error err;
        uint64_t data_end_ns; /* a MODE S upload whose end may be a death: when it ended;
                               * 0: its end is sure (ALLO reached, MODE E) */
};

static void on_prefix(uint64_t prefix_end, void *ctx)
{
        ds_store_upload_prefix(ctx, prefix_end);
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
 * waited after every upload and cost a tree of 2,000 small files 13.6 s. The file's fsync
 * (on a plain store) runs inside this wait: where it takes longer, the wait adds nothing. */
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
 * the upload's data is synced first (commit needs that anyway), then the control
 * connection is looked at (the kernel's view, not the watcher's, which a loaded machine
 * could schedule too late) until hangup_wait_ns after the data's end. Returns the sync's
 * result: once an fsync has failed, a later one may not say so again. */
static int finish_stream_upload(struct session *s, struct job *job)
{
        uint64_t deadline = job->data_end_ns + hangup_wait_ns(s->ctl.fd);
        int rc = ds_store_sync(job->file);
        uint64_t now = ds_now_ns();
        uint64_t left = deadline > now ? deadline - now : 0;
        struct timespec wait = {.tv_sec = (time_t)(left / 1000000000u),
                                .tv_nsec = (long)(left % 1000000000u)};
        struct pollfd pfd = {.fd = s->ctl.fd, .events = POLLRDHUP};

        if (ppoll(&pfd, 1, &wait, NULL) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)))
                atomic_store(&s->ctl_gone, true);
        return rc;
}

/* Takes bytes of the memory budget that all sessions share (--max-mem) for what this
 * session is about to allocate, or replies 451: a server never commits more than it
 * was given, however many clients ask at once. */
static bool budget_take(struct session *s, uint64_t bytes)
{
        if (bytes == 0 || !s->config->budget ||
            ds_shared_budget_take(s->config->budget, s->config->budget_slot, bytes))
                return true;
        session_reply(s, "451 Server memory budget exhausted; try fewer streams or later.");
        return false;
}

static void budget_give(struct session *s, uint64_t bytes)
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
                budget_give(s, bytes);
        }
        return s->lend;
}

/* Lends the session's buffers to a transfer they fit: one whose own would be no larger,
 * or an upload of no announced size over a few connections. Such an upload may be a small
 * file of a tree as well as a large one: it goes in the lent buffers' pieces (1 MiB, as
 * fast on these disks as 4 MiB) rather than in 16 MiB mapped and zeroed for what may be a
 * few KiB. Larger transfers keep buffers of their own, budgeted as before. */
static void lend_if_fits(struct session *s, struct job *job, enum ds_xfer_mode mode, unsigned n)
{
        struct ds_xfile *xfile = ds_store_xfile(job->file);
        bool unsized = job->upload && job->opts.limit == UINT64_MAX && n <= LENT_BUFFERS;
        uint64_t own = ds_xfer_buffer_bytes(xfile, mode, n, &job->opts, !job->upload);

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
        budget_give(s, (uint64_t)LENT_BUFFERS * LENT_BUFFER_SIZE);
}

/* Opens the data connections, moves the data, closes them. Returns the pipeline's
 * result; job->connected says whether it ran. */
static int run_job(struct session *s, struct job *job)
{
        struct ds_xconn conns[DS_MODEE_MAX_STREAMS];
        unsigned n = s->mode == 'E' ? s->streams : 1;
        enum ds_xfer_mode mode = s->mode == 'E' ? DS_XFER_BLOCKS : DS_XFER_STREAM;

        job->opts.block = s->config->block;
        /* TLS in user space cannot sendfile: budget for buffers, whatever the kernel does. */
        unsigned flags = job->opts.flags;
        if (s->prot_p)
                job->opts.flags |= DS_XFER_NO_SENDFILE;
        lend_if_fits(s, job, mode, n);
        uint64_t need =
            ds_xfer_buffer_bytes(ds_store_xfile(job->file), mode, n, &job->opts, !job->upload);
        job->opts.flags = flags;
        if (!budget_take(s, need))
                return -ENOMEM;
        int rc = watch_begin(s);
        if (rc < 0) {
                budget_give(s, need);
                session_reply(s, "451 Cannot start the transfer.");
                return rc;
        }
        bool reused;
        rc = open_data(s, conns, n, mode == DS_XFER_BLOCKS, &reused);
        job->connected = rc == 0;
        if (rc == 0 && reused) {
                session_reply(s, "125 Data connection%s already open; transfer starting.",
                              n > 1 ? "s" : "");
        } else if (rc == 0) {
                session_reply(s, "150 Opening %s data connection%s.",
                              mode == DS_XFER_BLOCKS ? "MODE E" : "BINARY", n > 1 ? "s" : "");
                rc = ftps_secure_data(s, conns, n, &job->err);
        }
        if (rc == 0 && job->connected) {
                job->opts.idle_ms = s->config->idle_ms;
                job->opts.stop = &s->xfer_stop;
                job->opts.live = s->live ? ds_live_segment(s->live) : NULL;
                if (s->live)
                        ds_live_start(s->live);
                struct ds_xfile *xfile = ds_store_xfile(job->file);
                if (s->keep) /* MODE E: GridFTP's cached channels, when asked */
                        job->opts.flags |= DS_XFER_KEEP;
                rc = job->upload ? ds_xfer_recv_conns(xfile, mode, conns, n, &job->opts,
                                                      &job->result, &job->err)
                                 : ds_xfer_send_conns(xfile, mode, conns, n, &job->opts,
                                                      &job->result, &job->err);
                if (rc == 0 && s->keep && job->result.kept) { /* for the next transfer */
                        memcpy(s->kept, conns, n * sizeof(*conns));
                        s->kept_n = n;
                        s->kept_prot_p = s->prot_p;
                } else {
                        ds_xconn_close_all(conns, n);
                }
                if (s->live)
                        ds_live_done(s->live);
                /* A size announced by ALLO and reached says the end itself. */
                if (rc == 0 && job->upload && mode == DS_XFER_STREAM && !allo_reached(s, job))
                        job->data_end_ns = ds_now_ns();
        }
        watch_end(s);
        budget_give(s, need);
        return rc;
}

/* Ends a transfer command: the file closed (an upload kept for REST when keep), the data
 * set-up forgotten. */
static void job_end(struct session *s, struct job *job, bool keep)
{
        ds_store_file_close(job->file, keep);
        xfer_reset(s);
}

void xfer_cmd_retr(struct session *s, const char *arg)
{
        char path[DS_STORE_PATH_MAX];
        struct job job = {.upload = false};
        uint64_t size = 0;

        int rc = ds_store_path(s->cwd, arg, path, sizeof(path));
        if (rc == 0)
                rc = ds_store_open_read(s->store, path, &job.file);
        struct ds_xfile *xfile = rc == 0 ? ds_store_xfile(job.file) : NULL;
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
                reply_done(s, "Transfer complete.");
        else if (job.connected)
                reply_cut(s, rc, job.err.text);
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
        struct ds_store_upload how = {.user = s->user, .offset = s->rest, .append = append};
        int rc = ds_store_create(s->store, path, &how, &job->file);

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
        job->opts.offset = ds_store_upload_start(job->file);
        /* ALLO gives the file's size when done; a start past it could never reach it. */
        if (s->allocate && s->allocate < job->opts.offset) {
                session_reply(s,
                              "552 The upload would start at byte %llu, past the %llu bytes "
                              "ALLO announced.",
                              (unsigned long long)job->opts.offset,
                              (unsigned long long)s->allocate);
                /* An APPE's copy of the file goes; a partial that REST named stays. */
                ds_store_file_close(job->file, !append);
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
        char path[DS_STORE_PATH_MAX];
        struct job job = {.upload = true};

        if (s->read_only || s->range_end) {
                session_reply(s, s->read_only ? "550 Permission denied: read-only."
                                              : "504 RANG applies to RETR and HASH.");
                xfer_reset(s);
                return;
        }
        int rc = ds_store_path(s->cwd, arg, path, sizeof(path));
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
        int commit_rc = whole ? ds_store_commit(job.file) : sync_rc;
        rc = rc == 0 ? commit_rc : rc;
        if (job.connected)
                log_transfer(s, append ? "APPE" : "STOR", path, &job.result, whole && rc == 0,
                             whole && rc == 0 ? "ok" : "kept partial");
        bool full = rc == -ENOSPC || rc == -EDQUOT || rc == -EFBIG;
        if (whole && rc == 0)
                reply_done(s, "Transfer complete.");
        else if (commit_rc < 0 && !full)
                session_reply(s, "451 Cannot complete the upload: %s.", strerror(-commit_rc));
        else if (job.connected && rc == 0 && !atomic_load(&s->aborted) &&
                 !atomic_load(&s->ctl_gone))
                session_reply(s, "451 Upload incomplete: %llu bytes of %llu announced; %s.",
                              (unsigned long long)(job.opts.offset + job.result.bytes),
                              (unsigned long long)s->allocate,
                              ds_store_width(s->config->store) > 1
                                  ? "discarded (a striped store keeps no partial upload)"
                                  : "kept for REST");
        else if (job.connected || full)
                reply_cut(s, rc, job.err.text);
        /* Kept for REST unless the disk is full or the data overran what was announced. */
        job_end(s, &job, !full);
}

/* A listing being written: to the data connection in chunks, or into a reply. */
struct lister {
        struct session *s;
        enum xftpd_verb verb;
        struct ds_xconn *conn; /* the data connection; NULL: the control one (STAT, MLST) */
        uint64_t ctl_deadline; /* fd -1: the whole reply's, so a client that reads a byte
                                * now and then cannot stretch it chunk by chunk */
        time_t now;
        int rc;
        size_t used;
        char buf[LIST_CHUNK + 4096];
};

static int lister_flush(struct lister *l)
{
        struct ds_data_opts opts = data_opts(l->s, &l->s->xfer_stop);
        struct ds_error err;

        if (l->rc == 0 && l->used > 0 && l->conn)
                l->rc = ds_data_write_all(l->conn, l->buf, l->used, &opts, &err);
        else if (l->rc == 0 && l->used > 0)
                l->rc = session_send(l->s, l->buf, l->used, l->ctl_deadline);
        l->used = 0;
        return l->rc;
}

/* "type=file;size=10;modify=20240101120000;perm=rw; " as RFC 3659 spells the facts. */
static int mlsx_facts(char *out, size_t len, const struct ds_store_stat *st, bool read_only)
{
        struct tm tm;
        time_t t = (time_t)st->mtime;
        const char *perm = st->dir ? (read_only ? "el" : "cdeflmp") : (read_only ? "r" : "adfrw");

        gmtime_r(&t, &tm);
        return snprintf(out, len, "type=%s;size=%llu;modify=%04d%02d%02d%02d%02d%02d;perm=%s; ",
                        st->dir ? "dir" : "file", (unsigned long long)st->size, tm.tm_year + 1900,
                        tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, perm);
}

/* "drwxr-xr-x 1 ftp ftp 4096 Jan  1 12:00 " as ls -l prints it, the form clients parse. */
static int ls_fields(char *out, size_t len, const struct ds_store_stat *st, time_t now)
{
        static const char rwx[] = "rwxrwxrwx";
        char mode[11], when[16];
        struct tm tm;
        time_t t = (time_t)st->mtime;

        mode[0] = st->dir ? 'd' : '-';
        for (int i = 0; i < 9; i++)
                mode[i + 1] = st->mode & (0400u >> i) ? rwx[i] : '-';
        mode[10] = '\0';
        gmtime_r(&t, &tm);
        bool recent = t <= now + 3600 && now - t < 180 * 86400;
        strftime(when, sizeof(when), recent ? "%b %e %H:%M" : "%b %e  %Y", &tm);
        return snprintf(out, len, "%s 1 ftp ftp %13llu %s ", mode, (unsigned long long)st->size,
                        when);
}

static int list_entry(const char *name, const struct ds_store_stat *st, void *ctx)
{
        struct lister *l = ctx;
        size_t room = sizeof(l->buf) - l->used;
        char *at = l->buf + l->used;
        int n = 0;

        /* A name no command could name (control bytes) would break the listing's lines. */
        for (const unsigned char *p = (const unsigned char *)name; *p; p++)
                if (*p < 0x20 || *p == 0x7f)
                        return 0;
        if (!l->conn) /* inside a multi-line reply: a space first, as MLST wants */
                at[n++] = ' ';
        if (l->verb == V_MLSD || l->verb == V_MLST)
                n += mlsx_facts(at + n, room - (size_t)n, st, l->s->read_only);
        else if (l->verb != V_NLST)
                n += ls_fields(at + n, room - (size_t)n, st, l->now);
        n += snprintf(at + n, room - (size_t)n, "%s\r\n", name);
        if ((size_t)n >= room)
                return -ENAMETOOLONG;
        l->used += (size_t)n;
        return l->used >= LIST_CHUNK ? lister_flush(l) : 0;
}

/* Lists path into l: a directory's entries, or a file's own line. */
static int list_path(struct lister *l, const char *path, const char *shown)
{
        struct ds_store_stat st;
        int rc = ds_store_stat(l->s->store, path, &st);

        if (rc < 0)
                return rc;
        if (!st.dir || l->verb == V_MLST)
                rc = list_entry(shown, &st, l);
        else
                rc = ds_store_list(l->s->store, path, list_entry, l);
        return rc < 0 ? rc : lister_flush(l);
}

/* LIST's argument without ls options ("-la", "-a dir"), which clients send and which
 * cannot name a file here. */
static const char *skip_ls_options(const char *arg)
{
        while (arg[0] == '-') {
                arg += strcspn(arg, " ");
                arg += strspn(arg, " ");
        }
        return arg;
}

void xfer_cmd_list(struct session *s, enum xftpd_verb verb, const char *arg)
{
        char path[DS_STORE_PATH_MAX];
        struct lister *l = calloc(1, sizeof(*l));
        struct ds_xconn conn;

        const char *name = verb == V_LIST || verb == V_NLST ? skip_ls_options(arg) : arg;
        int rc = l ? ds_store_path(s->cwd, name, path, sizeof(path)) : -ENOMEM;
        if (rc == 0)
                rc = ds_store_stat(s->store, path, &(struct ds_store_stat){0});
        if (rc < 0) {
                session_reply_errno(s, rc, name);
        } else if (watch_begin(s) == 0) {
                /* A listing is one plain stream on one connection, whatever MODE says. */
                bool reused;
                if (open_data(s, &conn, 1, false, &reused) == 0) {
                        struct ds_error err;
                        session_reply(s, "150 Here comes the listing.");
                        *l =
                            (struct lister){.s = s, .verb = verb, .conn = &conn, .now = time(NULL)};
                        rc = ftps_secure_data(s, &conn, 1, &err);
                        if (rc == 0)
                                rc = list_path(l, path, name);
                        ds_xconn_close(&conn);
                        if (rc == 0)
                                reply_done(s, "Listing sent.");
                        else
                                reply_cut(s, rc, strerror(-rc));
                }
                watch_end(s);
        }
        free(l);
        xfer_reset(s);
}

void xfer_cmd_stat_path(struct session *s, enum xftpd_verb verb, const char *arg)
{
        char path[DS_STORE_PATH_MAX];
        struct lister *l = calloc(1, sizeof(*l));
        int code = verb == V_MLST ? 250 : 213;

        int rc = l ? ds_store_path(s->cwd, arg, path, sizeof(path)) : -ENOMEM;
        if (rc == 0)
                rc = ds_store_stat(s->store, path, &(struct ds_store_stat){0});
        if (rc == 0) {
                *l = (struct lister){.s = s,
                                     .verb = verb,
                                     .ctl_deadline = session_reply_deadline(s),
                                     .now = time(NULL)};
                session_reply(s, "%d-Status of /%s:", code, path);
                rc = list_path(l, path, arg[0] ? arg : "/");
                session_reply(s, "%d End", code);
        } else {
                session_reply_errno(s, rc, arg);
        }
        free(l);
}

/* HASH's reply once the hash has ended (rc from ds_hash_file). */
static void reply_hash(struct session *s, int rc, const char *arg, uint64_t start, uint64_t end,
                       const char *hex, const struct ds_error *err)
{
        if (rc == 0) {
                session_reply(s, "213 %s %llu-%llu %s %s", ds_hash_name(s->hash_algo),
                              (unsigned long long)start, (unsigned long long)end, hex, arg);
                if (atomic_load(&s->aborted))
                        session_reply(s, "226 ABOR: the hash had ended.");
        } else if (atomic_load(&s->xfer_stop)) { /* ABOR, the client gone, or SIGTERM */
                reply_cut(s, rc, err->text);
        } else {
                session_reply(s, "451 Cannot hash %s: %s", arg, err->text);
        }
}

/* Hashes [start, stop) of xfile and replies. Hashing a large file takes long: the watcher
 * lets ABOR, a hang-up or SIGTERM end it. */
static void run_hash(struct session *s, struct ds_xfile *xfile, const char *arg, uint64_t start,
                     uint64_t stop)
{
        char hex[DS_HASH_HEX_MAX];
        struct ds_error err;
        uint64_t end = 0;

        if (watch_begin(s) < 0) {
                session_reply(s, "451 Cannot start the hash.");
                return;
        }
        int rc = ds_hash_file(xfile, s->hash_algo, start, stop, s->config->block, &s->xfer_stop,
                              hex, &end, &err);
        watch_end(s);
        reply_hash(s, rc, arg, start, end, hex, &err);
}

void xfer_cmd_hash(struct session *s, const char *arg)
{
        char path[DS_STORE_PATH_MAX];
        struct ds_store_file *file = NULL;
        uint64_t size = 0;

        int rc = ds_store_path(s->cwd, arg, path, sizeof(path));
        if (rc == 0)
                rc = ds_store_open_read(s->store, path, &file);
        struct ds_xfile *xfile = rc == 0 ? ds_store_xfile(file) : NULL;
        if (rc == 0)
                rc = xfile->ops->size(xfile, &size);
        uint64_t start = s->range_start, stop = s->range_end ? s->range_end : UINT64_MAX;
        if (rc == -EISDIR) {
                session_reply(s, "553 %s is a directory; HASH takes a file.", arg);
        } else if (rc < 0) {
                session_reply_errno(s, rc, arg);
        } else if (start > 0 && start >= size) {
                /* The draft's RANG: a range out of the file is refused by the command it
                 * applies to, as an invalid restart point is. */
                session_reply(s,
                              "554 RANG start %llu lies at or beyond the end of %s (%llu bytes).",
                              (unsigned long long)start, arg, (unsigned long long)size);
        } else if (budget_take(s, s->config->block)) { /* ds_hash_file's one buffer */
                run_hash(s, xfile, arg, start, stop);
                budget_give(s, s->config->block);
        }
        if (file)
                ds_store_file_close(file, false);
        xfer_reset(s);
}
