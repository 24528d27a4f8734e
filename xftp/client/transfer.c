/* get, put, ls and cp over a logged-in control connection.
 *
 * A download lands in ".NAME.xftp-part" beside its destination (part.c) and is renamed
 * into place after fsync. */
#include "transfer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dragstrip/clock.h>
#include <dragstrip/error.h>

#include "ftptime.h"
#include "listing.h"
#include "part.h"
#include "modee.h"
#include "xfer.h"

#define PATH_ROOM 4096
/* Digits of a server's HASH digest a mismatch shows: more than any of ours has, and room
 * in the one error line (struct ds_error) for ours beside it. */
#define HASH_SHOWN_MAX 96

/* The transfer's mode and connection count for this server and a file of size bytes
 * (UINT64_MAX: not known): no more connections than the file has blocks, so that a small
 * file of a tree costs one connection, not -P of them. */
static unsigned streams_for(const struct ftp *ftp, const struct job_opts *o, uint64_t size)
{
        unsigned n = o->streams > 1 && ftp->feat.parallel ? o->streams : 1;
        if (size != UINT64_MAX && size / o->block < n)
                n = (unsigned)(size / o->block) + 1;
        return n;
}

/* Whether a file of size bytes goes in MODE E over one connection kept across files: a
 * small file of many (o->reuse), to a server that keeps them. The per-file PASV, connect,
 * accept and close, and a server's wait to tell a MODE S end from a death, all go. */
static bool kept_blocks(const struct ftp *ftp, const struct job_opts *o, uint64_t size)
{
        return o->reuse && ftp->feat.keep && size < o->block;
}

/* -x verbs with a server that does not offer the channel: one line, nothing written. */
static int no_verbs(const struct ftp *ftp, const char *missing, const char *op,
                    struct ds_error *err)
{
        return ds_fail(err, 0,
                       "%s offers no verbs data channel (no %s in FEAT): -x verbs cannot %s",
                       ftp->host, missing, op),
               -EPROTONOSUPPORT;
}

static struct xftp_data_opts data_opts(const struct job_opts *o)
{
        /* Socket buffers of one block: the sender can keep a whole block in flight. */
        return (struct xftp_data_opts){
            .sockbuf = (int)o->block, .timeout_ms = o->timeout_ms, .stop = o->stop};
}

static struct xftp_xfer_opts xfer_opts(const struct job_opts *o, uint64_t offset, uint64_t limit)
{
        return (struct xftp_xfer_opts){.block = o->block,
                                       .offset = offset,
                                       .length = UINT64_MAX,
                                       .limit = limit,
                                       .idle_ms = o->timeout_ms,
                                       .stop = o->stop,
                                       .live = o->live,
                                       .pool = o->pool,
                                       .pace = o->pace,
                                       .flags = o->no_sendfile ? XFTP_XFER_NO_SENDFILE : 0};
}

/* Reads the reply that follows a 1xx, which must be 2xx; only briefly when the data
 * already failed for a quiet server. */
static int final_reply(struct ftp *ftp, const char *what, bool brief, struct ds_error *err)
{
        int rc = brief ? ftp_reply_brief(ftp, err) : ftp_reply(ftp, err);
        if (rc >= 0 && (rc < 200 || rc > 299))
                return ds_fail(err, 0, "%s: %s", what, ftp->reply), -EIO;
        return rc < 0 ? rc : 0;
}

/* A transfer command (RETR, STOR, LIST...) that must be answered 125 or 150. */
static int start_transfer(struct ftp *ftp, const char *verb, const char *path, struct ds_error *err)
{
        int rc = path[0] ? ftp_cmd(ftp, err, "%s %s", verb, path) : ftp_cmd(ftp, err, "%s", verb);
        if (rc >= 0 && rc != 125 && rc != 150)
                return ds_fail(err, 0, "%s %s: %s", verb, path, ftp->reply),
                       rc == 550 ? -ENOENT : -EIO;
        return rc < 0 ? rc : 0;
}

static int rest(struct ftp *ftp, uint64_t offset, struct ds_error *err)
{
        if (offset == 0)
                return 0;
        int rc = ftp_cmd(ftp, err, "REST %llu", (unsigned long long)offset);
        if (rc >= 0 && rc != 350)
                return ds_fail(err, 0, "REST %llu: %s", (unsigned long long)offset, ftp->reply),
                       -ENOTSUP;
        return rc < 0 ? rc : 0;
}

/* -x verbs: RPRT or RPSV, REST, the transfer command, then the links (the server opens or
 * takes its end after its 150). When the links fail after the 150, the server's 425 is
 * read, so the control connection stays in step. */
static int open_verbs(struct ftp *ftp, const char *verb, const char *remote, uint64_t offset,
                      struct xftp_conn *conns, unsigned n, const struct xftp_data_opts *dopts,
                      struct ds_error *err)
{
        struct ftp_verbs v = {0};
        /* Under TLS the data was to be TLS too: verbs carries it in the clear (PROT C), as
         * the user asked by -x verbs. */
        int rc = ftp_data_clear(ftp, err);
        if (rc == 0)
                rc = ftp_verbs_ask(ftp, strcmp(verb, "RETR") == 0, &v, err);
        if (rc == 0)
                rc = rest(ftp, offset, err);
        if (rc == 0)
                rc = start_transfer(ftp, verb, remote, err);
        bool started = rc == 0;
        if (rc == 0)
                rc = ftp_verbs_open(ftp, &v, conns, n, dopts, err);
        ftp_verbs_end(&v);
        if (rc < 0 && started) {
                struct ds_error ignored;
                final_reply(ftp, verb, rc == -ETIMEDOUT, &ignored);
        }
        return rc;
}

/* Data connections (those kept from the last transfer, else new ones), then REST (right
 * before the transfer command, as RFC 959 wants it) and RETR or STOR. On failure the
 * connections are closed, or kept again when a refusal left them untouched. A server that
 * found the kept connections gone (425: closed by a firewall's idle timer, say) dropped
 * them: new ones are asked for, once. */
static int open_transfer(struct ftp *ftp, const char *verb, const char *remote, uint64_t offset,
                         struct xftp_conn *conns, unsigned n, const struct xftp_data_opts *dopts,
                         bool verbs, struct ds_error *err)
{
        if (verbs)
                return open_verbs(ftp, verb, remote, offset, conns, n, dopts, err);
        for (;;) {
                bool reused;
                int rc = ftp_data_open(ftp, conns, n, dopts, &reused, err);
                if (rc < 0)
                        return rc;
                rc = rest(ftp, offset, err);
                if (rc == 0)
                        rc = start_transfer(ftp, verb, remote, err);
                if (rc == 0 && !reused)
                        rc = ftp_secure_data(ftp, conns, n, err);
                if (rc == 0)
                        return 0;
                bool lost = reused && !ftp->broken && ftp->code == 425;
                ftp_data_done(ftp, conns, n, reused && !lost && !ftp->broken && ftp->code >= 400);
                if (!lost)
                        return rc;
        }
}

/* HASH on the server and the same hash here; 0 when they match. When they do not, -EIO:
 * a download (differs non-NULL) gets *differs set, as its partial is not to be trusted;
 * an upload is already under its name on the server, and the message says so. */
static int verify(struct ftp *ftp, const char *remote, struct xftp_xfile *file, uint64_t size,
                  const struct job_opts *o, struct job_totals *t, bool *differs,
                  struct ds_error *err)
{
        int rc = ftp_cmd(ftp, err, "HASH %s", remote);
        if (rc < 0)
                return rc;
        char name[32], range[64];
        int hex_at = -1; /* the digest is read where it lies: a lying server's may be long */
        enum xftp_hash_algo algo;
        if (rc != 213 || sscanf(ftp->reply + 4, "%31s %63s %n", name, range, &hex_at) != 2 ||
            hex_at < 0 || !ftp->reply[4 + hex_at] || xftp_hash_parse(name, &algo) < 0)
                return ds_fail(err, 0, "HASH %s: %.100s", remote, ftp->reply), -EPROTO;
        const char *hex = ftp->reply + 4 + hex_at;
        size_t hex_len = strcspn(hex, " \t\n");
        char mine[XFTP_HASH_HEX_MAX];
        rc = xftp_hash_file(file, algo, 0, size, o->block, o->stop, mine, NULL, err);
        if (rc < 0)
                return rc;
        if (hex_len != strlen(mine) || strncasecmp(mine, hex, hex_len) != 0) {
                if (differs)
                        *differs = true;
                char longer[48] = ""; /* what a digest past HASH_SHOWN_MAX digits leaves out */
                if (hex_len > HASH_SHOWN_MAX)
                        snprintf(longer, sizeof(longer), "... (%zu digits)", hex_len);
                return ds_fail(err, 0, "%s: %s differs: server %.*s%s, here %s (%s)", remote, name,
                               (int)(hex_len > HASH_SHOWN_MAX ? HASH_SHOWN_MAX : hex_len), hex,
                               longer, mine,
                               differs ? "nothing kept here" : "the server keeps what it took"),
                       -EIO;
        }
        t->verified++;
        t->last_algo = algo;
        snprintf(t->last_hash, sizeof(t->last_hash), "%s", mine);
        return 0;
}

static void count_file(struct job_totals *t, uint64_t resumed, unsigned streams)
{
        t->files++;
        t->resumed_bytes += resumed;
        if (streams > t->streams_used)
                t->streams_used = streams;
}

/* Moves one file's data over the connections just opened: receive into file, or send it. */
static int move_data(struct ftp *ftp, struct xftp_xfile *file, bool receive,
                     struct xftp_conn *conns, unsigned n, const struct xftp_xfer_opts *xo,
                     struct xftp_xfer_result *result, struct ds_error *err)
{
        enum xftp_xfer_mode mode = ftp->mode == 'E' ? XFTP_XFER_BLOCKS : XFTP_XFER_STREAM;
        struct xftp_xfer_opts sending = *xo;
        if (mode == XFTP_XFER_BLOCKS && ftp->keep && conns[0].fd >= 0)
                sending.flags |= XFTP_XFER_KEEP; /* the server keeps them after our EOD */
        int rc = receive ? xftp_xfer_recv_conns(file, mode, conns, n, xo, result, err)
                         : xftp_xfer_send_conns(file, mode, conns, n, &sending, result, err);
        /* MODE S: this close is the end of the data. MODE E kept: EOD was. Only sockets
         * are kept: the server looks at them with poll() before it reuses them. */
        bool keep = rc == 0 && result->kept && conns[0].fd >= 0;
        ftp_data_done(ftp, conns, n, keep);
        struct ds_error reply_err;
        /* After data that stopped moving for the whole timeout, the reply is awaited only
         * briefly: a server that went quiet seldom speaks, and --timeout is the user's. */
        int reply = final_reply(ftp, receive ? "RETR" : "STOR", rc == -ETIMEDOUT,
                                rc < 0 ? &reply_err : err);
        if (keep && reply < 0)
                ftp_drop_kept(ftp); /* the server ended badly: it closes them */
        if (!receive && reply == 0)
                ftp->stored = true;
        /* Data the server cut off for a failure of its own (its disk failed or is full, the
         * file outgrew ALLO): its reply says why, where the broken connection would not.
         * A 426 is the server's view of the same cut, which a tree retries. */
        bool server_failed =
            reply == -EIO && (ftp->code == 451 || ftp->code == 452 || ftp->code == 552);
        if ((rc == -EPIPE || rc == -ECONNRESET) && server_failed) {
                *err = reply_err;
                return reply;
        }
        return rc < 0 ? rc : reply;
}

/* The size of remote: SIZE, else the size fact of MLST. 0 and *size, -ENOENT with err
 * filled, *size UINT64_MAX when the server says neither, or another negative errno. */
static int remote_size(struct ftp *ftp, const char *remote, uint64_t *size, struct ds_error *err)
{
        int rc = ftp_size(ftp, "SIZE", remote, size, err);
        if (rc == -ENOTSUP && ftp->feat.mlst)
                rc = ftp_mlst_size(ftp, remote, size, err);
        if (rc == -ENOENT)
                return ds_fail(err, 0, "%s: no such file on %s", remote, ftp->host), -ENOENT;
        if (rc == -ENOTSUP) {
                *size = UINT64_MAX;
                return 0;
        }
        return rc;
}

/* The words a failed last sync (last_sync, a negative errno) adds to a failure's line into
 * out; "" when none failed. */
static void last_sync_words(int last_sync, char *out, size_t room)
{
        out[0] = '\0';
        if (last_sync < 0)
                snprintf(out, room, "; its last fdatasync failed: %s", strerror(-last_sync));
}

/* Says why a download failed where the pipeline's own words would mislead, and whether
 * the partial is kept: only when some of it is kept whole (whole_kept, part_whole_kept:
 * from the offset resumed from on), else get_file removes it. A failed sync is why less
 * is kept, and the disk's error: sync_failed is any the download met (w->failed),
 * last_sync one part_whole_final met. The pipeline's own words tell one it met, but a
 * stop or a refused size replaces them, and one met after it ended nobody else tells. */
static void explain_get(int rc, const char *remote, const char *part, uint64_t size, uint64_t bound,
                        uint64_t whole_kept, int sync_failed, int last_sync,
                        const struct job_opts *o, struct ds_error *err)
{
        unsigned long long kept = (unsigned long long)whole_kept;
        bool stopped = rc == -EINTR && o->stop && atomic_load(o->stop);
        int untold = last_sync;
        if (untold == 0 && (stopped || rc == -EFBIG))
                untold = sync_failed;
        char synced[96];
        last_sync_words(untold, synced, sizeof(synced));
        if (stopped) {
                if (kept > 0)
                        ds_fail(err, 0, "stopped: %s keeps %llu bytes of %s (--resume continues%s)",
                                part, kept, remote, synced);
                else
                        ds_fail(err, 0,
                                "stopped before any of %s was written whole (nothing kept%s)",
                                remote, synced);
        } else if (rc == -EFBIG && size != UINT64_MAX) {
                ds_fail(err, 0,
                        "%s: the server sent more than the %llu bytes it announced (%s kept%s)",
                        remote, (unsigned long long)size, kept > 0 ? part : "nothing", synced);
        } else if (rc == -EFBIG) {
                ds_fail(err, 0,
                        "%s: the server named no size and sent more than the %llu bytes "
                        "the destination can spare (%s kept%s)",
                        remote, (unsigned long long)bound, kept > 0 ? part : "nothing", synced);
        } else if (rc < 0) { /* the pipeline's words name neither the file nor the partial */
                char why[sizeof(err->text)];
                snprintf(why, sizeof(why), "%s", err->text);
                if (kept > 0)
                        ds_fail(err, 0, "%s: %s (%s keeps %llu bytes%s: --resume continues)",
                                remote, why, part, kept, synced);
                else
                        ds_fail(err, 0, "%s: %s (nothing kept%s)", remote, why, synced);
        }
}

/* What remote is: its size and, where the server names it, its time; from what a listing
 * said (known) or else by asking. 0, or a negative errno with err filled. */
static int learn_origin(struct ftp *ftp, const char *remote, const struct listing_facts *known,
                        struct part_origin *origin, struct ds_error *err)
{
        *origin = (struct part_origin){.size = UINT64_MAX};
        if (known) {
                snprintf(origin->modified, sizeof(origin->modified), "%s", known->modified);
                if (known->size != UINT64_MAX) {
                        origin->size = known->size;
                        return 0;
                }
                return remote_size(ftp, remote, &origin->size, err);
        }
        int rc = remote_size(ftp, remote, &origin->size, err);
        if (rc == 0)
                rc = ftp_modified(ftp, remote, origin->modified, sizeof(origin->modified), err);
        return rc == -ENOTSUP ? 0 : rc;
}

/* Whether a remote file of size bytes, modified as the server says it, and the local file
 * st are the same for --update: one size, and one time to the second (exact), or else the
 * remote one no older. A size or time the server does not name says they are not. */
static bool same_file(uint64_t size, const char *modified, const struct stat *st, bool exact)
{
        struct timespec when;
        if (size == UINT64_MAX || size != (uint64_t)st->st_size || !modified[0] ||
            xftp_time_parse(modified, &when) < 0)
                return false;
        return exact ? when.tv_sec == st->st_mtim.tv_sec : when.tv_sec >= st->st_mtim.tv_sec;
}

/* Whether local already is what origin names (--update): a regular file of its size and,
 * to the second, its time. */
static bool same_as_origin(const char *local, const struct part_origin *origin)
{
        struct stat st;
        return lstat(local, &st) == 0 && S_ISREG(st.st_mode) &&
               same_file(origin->size, origin->modified, &st, true);
}

/* One line on stderr that may name a server's files: shown printable. */
static void say_printable(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say_printable(const char *fmt, ...)
{
        char line[PATH_ROOM + 512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        listing_show(stderr, line, strlen(line), false);
        fputc('\n', stderr);
}

/* Opens the partial file beside local for the remote file origin describes (part_open),
 * saying unless quiet why a partial of a file that changed since is started over. Returns
 * the descriptor or a negative errno. */
static int open_download(const char *remote, const char *local, const struct part_origin *origin,
                         char *part, const struct job_opts *o, uint64_t *offset, bool *marks,
                         uint64_t *theirs, struct ds_error *err)
{
        char why[160];

        if (part_name(local, part, PATH_ROOM) < 0)
                return ds_fail(err, -ENAMETOOLONG, "no room for the partial file's path of %s",
                               local);
        int fd = part_open(part, o->resume, origin, offset, marks, theirs, why, sizeof(why), err);
        if (fd < 0)
                return fd;
        if (why[0] && !o->quiet)
                say_printable("xftp: %s changed on the server since %s was begun (%s): "
                              "starting over",
                              remote, part, why);
        if (*offset > origin->size && origin->size != UINT64_MAX) {
                close(fd);
                return ds_fail(err, 0, "%s holds more than the %llu bytes of %s: remove it", part,
                               (unsigned long long)origin->size, remote),
                       -EINVAL;
        }
        return fd;
}

/* Whether the destination's file system has room for the bytes to come: from offset to
 * the size announced, checked before the transfer so that a server's word cannot fill the
 * disk. When the server names no size, *bound gets what the download may take: the space
 * free when it starts less a sixteenth kept for everyone else (a server that never stops
 * cannot fill the disk either); else the size. 0, or -ENOSPC with err filled. */
static int room_for(int fd, const char *remote, uint64_t size, uint64_t offset, uint64_t *bound,
                    struct ds_error *err)
{
        uint64_t free_bytes = part_free_space(fd);
        if (size == UINT64_MAX) {
                *bound = free_bytes == UINT64_MAX ? free_bytes : free_bytes - free_bytes / 16;
                return 0;
        }
        *bound = size;
        if (free_bytes != UINT64_MAX && size - offset > free_bytes)
                return ds_fail(err, -ENOSPC, "%s: needs %llu bytes, %llu free here", remote,
                               (unsigned long long)(size - offset), (unsigned long long)free_bytes);
        return 0;
}

int transfer_get_file(struct ftp *ftp, const char *remote, const char *local,
                      const struct listing_facts *known, struct part_batch *batch,
                      const struct job_opts *o, struct job_totals *t, struct ds_error *err)
{
        if (o->verify && !ftp->feat.hash)
                return ds_fail(err, 0, "%s has no HASH command: cannot --verify", ftp->host),
                       -ENOTSUP;
        if (o->verbs && !ftp->feat.rprt)
                return no_verbs(ftp, "RPRT", "get", err);
        char part[PATH_ROOM];
        uint64_t offset;
        bool marks = false;
        struct xftp_conn conns[XFTP_MODEE_MAX_STREAMS];
        struct part_origin origin;

        int rc = learn_origin(ftp, remote, known, &origin, err);
        if (rc < 0)
                return rc;
        if (o->update && same_as_origin(local, &origin)) {
                t->skipped++;
                return 0;
        }
        uint64_t size = origin.size;
        struct timespec when;
        bool timed = origin.modified[0] && xftp_time_parse(origin.modified, &when) >= 0;
        unsigned n = streams_for(ftp, o, size);
        uint64_t theirs = 0;
        int fd = open_download(remote, local, &origin, part, o, &offset, &marks, &theirs, err);
        if (fd < 0)
                return fd;
        /* Bytes xftp has no record of writing are checked as a whole file, where they can be:
         * else a foreign partial's first bytes would be taken for the server's. */
        bool check = o->verify || (theirs && ftp->feat.hash);
        if (theirs && !check && !o->quiet)
                say_printable("xftp: %s: continuing after %llu bytes xftp did not write, "
                              "unchecked (%s has no HASH)",
                              part, (unsigned long long)theirs, ftp->host);
        if (!marks)
                n = 1; /* out-of-order blocks need the whole-mark to be resumable */
        uint64_t bound;
        rc = room_for(fd, remote, size, offset, &bound, err);
        if (rc < 0) {
                if (offset == 0)
                        unlink(part); /* ours, and nothing came */
                close(fd);
                return rc;
        }
        uint64_t limit = size != UINT64_MAX || bound > UINT64_MAX - offset ? bound : offset + bound;
        struct xftp_xfile file;
        struct xftp_xfer_result result = {.prefix_end = offset};
        /* O_DIRECT for a file of a block or more; a smaller one is written through the cache,
         * where one wait for the disk per file would cost more than the copy it saves, and
         * a batch's syncfs writes it back with the others. */
        rc = xftp_xfile_plain(&file, fd, size < o->block ? 0 : XFTP_XFILE_DIRECT, err);
        struct xftp_data_opts dopts = data_opts(o);
        if (rc == 0)
                rc = ftp_prepare(ftp, n, o->verbs || kept_blocks(ftp, o, size), err);
        uint64_t start_ns = ds_now_ns();
        /* the first record a second into the transfer: a tree's small file makes none */
        struct part_whole whole = {
            .fd = fd, .marks = marks, .whole = offset, .recorded = offset, .recorded_ns = start_ns};
        if (rc == 0)
                rc = open_transfer(ftp, "RETR", remote, offset, conns, n, &dopts, o->verbs, err);
        if (rc == 0) {
                struct xftp_xfer_opts xo = xfer_opts(o, offset, limit);
                xo.on_prefix = part_record_whole;
                xo.prefix_ctx = &whole;
                rc = move_data(ftp, &file, true, conns, n, &xo, &result, err);
                t->bytes += result.bytes;
                int last_sync = 0; /* before the words that say what it keeps */
                if (rc < 0 && result.prefix_end > 0)
                        last_sync = part_whole_final(&whole);
                explain_get(rc, remote, part, size, bound,
                            part_whole_kept(&whole, result.prefix_end), whole.failed, last_sync, o,
                            err);
        }
        if (rc == 0 && size != UINT64_MAX && result.prefix_end != size)
                rc = (ds_fail(err, 0, "%s: %llu of %llu bytes came", remote,
                              (unsigned long long)result.prefix_end, (unsigned long long)size),
                      -EIO);
        bool differs = false;
        if (rc == 0 && check) /* before the rename: a mismatch never takes the name */
                rc = verify(ftp, remote, &file, result.prefix_end, o, t, &differs, err);
        bool give_back = differs && theirs;
        if (give_back) { /* someone else's bytes: given back as they were, not removed */
                part_give_back(fd, theirs);
                ds_fail(err, 0,
                        "%s: the %llu bytes %s held before xftp are not the server's: it is "
                        "left as it was",
                        remote, (unsigned long long)theirs, part);
        } else if (differs) { /* which bytes are wrong is unknown: none of them is resumable */
                result.prefix_end = 0;
        }
        if (rc < 0 && result.prefix_end > 0 && !give_back) { /* left for --resume */
                char synced[96];
                last_sync_words(part_whole_final(&whole), synced, sizeof(synced));
                if (synced[0]) { /* the failure's words were said before it */
                        char said[sizeof(err->text)];
                        snprintf(said, sizeof(said), "%s", err->text);
                        ds_fail(err, 0, "%s%s", said, synced);
                }
        }
        if (rc == 0 && batch)
                rc = part_commit_later(batch, fd, part, local, result.prefix_end,
                                       timed ? &when : NULL, err);
        else if (rc == 0)
                rc = part_commit(fd, part, local, result.prefix_end, timed ? &when : NULL, err);
        t->seconds += ds_seconds_between(start_ns, ds_now_ns());
        /* Nothing kept whole, as explain_get said: no part to resume, and it was ours; removed
         * while it is still locked. */
        if (rc < 0 && part_whole_kept(&whole, result.prefix_end) == 0)
                unlink(part);
        xftp_xfile_plain_close(&file);
        close(fd);
        if (rc == 0)
                count_file(t, offset, n);
        return rc;
}

/* Whether remote already is what the local file st describes (--update): of its size,
 * and of its time to the second where the server can set times (MFMT), else no older
 * than it. there is what a listing said (size UINT64_MAX: not there), or NULL to ask. */
static bool remote_same(struct ftp *ftp, const char *remote, const struct listing_facts *there,
                        const struct stat *st)
{
        struct listing_facts asked = {.size = UINT64_MAX};
        struct ds_error ignored;
        if (!there) {
                there = &asked;
                if (remote_size(ftp, remote, &asked.size, &ignored) < 0 ||
                    ftp_modified(ftp, remote, asked.modified, sizeof(asked.modified), &ignored) < 0)
                        return false;
        }
        return same_file(there->size, there->modified, st, ftp->feat.mfmt);
}

void transfer_settle(struct ftp *ftp, const struct job_opts *o)
{
        struct ds_error ignored;
        ftp_settle(ftp, &ignored);
        if (ftp->refused_ahead[0] && !o->quiet) { /* the data is there whole: a note */
                fputs("xftp: refused: ", stderr);
                listing_show(stderr, ftp->refused_ahead, strlen(ftp->refused_ahead), false);
                fputc('\n', stderr);
        }
        ftp->refused_ahead[0] = '\0';
}

int transfer_put_file(struct ftp *ftp, const char *local, const char *remote,
                      const struct listing_facts *there, const struct job_opts *o,
                      struct job_totals *t, struct ds_error *err)
{
        struct xftp_conn conns[XFTP_MODEE_MAX_STREAMS];
        uint64_t offset = 0;
        struct stat st;

        if (o->verify && !ftp->feat.hash)
                return ds_fail(err, 0, "%s has no HASH command: cannot --verify", ftp->host),
                       -ENOTSUP;
        if (o->verbs && !ftp->feat.rpsv)
                return no_verbs(ftp, "RPSV", "put", err);
        int fd = open(local, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return ds_fail(err, -errno, "%s", local);
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                close(fd);
                return ds_fail(err, 0, "%s: not a regular file", local), -EINVAL;
        }
        if (o->update && remote_same(ftp, remote, there, &st)) {
                close(fd);
                t->skipped++;
                return 0;
        }
        unsigned n = streams_for(ftp, o, (uint64_t)st.st_size);
        int rc = 0;
        if (o->resume) {
                /* xftpd keeps an interrupted upload apart and names its size by PSIZ; other
                 * servers write in place, so the file's SIZE is what they have. */
                rc = ftp_size(ftp, ftp->feat.psiz ? "PSIZ" : "SIZE", remote, &offset, err);
                if (rc == -ENOENT || rc == -ENOTSUP)
                        rc = 0, offset = 0;
                if (rc == 0 && offset > (uint64_t)st.st_size)
                        rc = (ds_fail(err, 0, "%s: the server has %llu bytes, more than %s", remote,
                                      (unsigned long long)offset, local),
                              -EINVAL);
        }
        struct xftp_xfile file;
        struct xftp_xfer_result result = {0};
        struct xftp_data_opts dopts = data_opts(o);
        if (rc == 0) /* read through the cache: readahead beat O_DIRECT (xfile.c) */
                rc = xftp_xfile_plain(&file, fd, 0, err);
        if (rc == 0) {
                rc =
                    ftp_prepare(ftp, n, o->verbs || kept_blocks(ftp, o, (uint64_t)st.st_size), err);
                /* The size: in MODE S where the end is, in both the buffers it needs. Sent
                 * ahead of STOR, for no round trip of its own. */
                struct ds_error ignored;
                if (rc == 0 && offset == 0)
                        ftp_send_ahead(ftp, false, &ignored, "ALLO %llu",
                                       (unsigned long long)st.st_size);
                uint64_t start_ns = ds_now_ns();
                if (rc == 0)
                        rc = open_transfer(ftp, "STOR", remote, offset, conns, n, &dopts, o->verbs,
                                           err);
                if (rc == 0) {
                        struct xftp_xfer_opts xo = xfer_opts(o, offset, UINT64_MAX);
                        xo.length = (uint64_t)st.st_size - offset;
                        rc = move_data(ftp, &file, false, conns, n, &xo, &result, err);
                        t->bytes += result.bytes;
                        if (rc == -EINTR && o->stop && atomic_load(o->stop))
                                ds_fail(err, 0, "stopped: %s keeps what came (--resume continues)",
                                        remote);
                }
                t->seconds += ds_seconds_between(start_ns, ds_now_ns());
                if (rc == 0 && o->verify)
                        rc = verify(ftp, remote, &file, (uint64_t)st.st_size, o, t, NULL, err);
                if (rc == 0) /* sent ahead: its reply comes before the next one's */
                        ftp_set_modified(ftp, remote, &st.st_mtim, &ignored);
                if (rc == 0 && !o->reuse)
                        transfer_settle(ftp, o); /* a file alone: its refusal said now */
                xftp_xfile_plain_close(&file);
        }
        close(fd);
        if (rc == 0)
                count_file(t, offset, n);
        return rc;
}

/* Lines of a listing, each an entry or a line to skip. */
static size_t count_lines(const char *text)
{
        size_t lines = 0;
        for (const char *p = text; (p = strchr(p, '\n')); p++)
                lines++;
        return lines;
}

int transfer_listing(struct ftp *ftp, const char *verb, const char *path, size_t max,
                     const struct job_opts *o, char **text, size_t *len, size_t *lines,
                     struct ds_error *err)
{
        struct xftp_data_opts dopts = data_opts(o);
        struct xftp_conn conn;

        dopts.sockbuf = 0;
        int rc = ftp_prepare(ftp, 1, false, err);
        if (rc == 0)
                rc = ftp_passive(ftp, &conn, 1, &dopts, err);
        if (rc < 0)
                return rc;
        rc = start_transfer(ftp, verb, path, err);
        if (rc == 0)
                rc = ftp_secure_data(ftp, &conn, 1, err);
        if (rc < 0) {
                xftp_conn_close(&conn);
                return rc;
        }
        long got = xftp_data_read_all(&conn, text, max, &dopts, err);
        xftp_conn_close(&conn);
        struct ds_error reply_err;
        rc = final_reply(ftp, verb, got == -ETIMEDOUT, got < 0 ? &reply_err : err);
        if (got == -EFBIG)
                return ds_fail(err, 0, "%s %s: listing over %zu bytes", verb, path, max), -EFBIG;
        if (got < 0)
                return (int)got;
        *lines = rc == 0 ? count_lines(*text) : 0;
        if (rc == 0 && *lines > LISTING_ENTRIES_MAX)
                rc = (ds_fail(err, 0, "%s %s: listing over %u entries", verb, path,
                              LISTING_ENTRIES_MAX),
                      -EFBIG);
        if (rc < 0) {
                free(*text);
                *text = NULL;
        }
        *len = (size_t)got;
        return rc;
}

int job_ls(struct ftp *ftp, const char *remote, bool facts, const struct job_opts *o,
           struct job_totals *t, struct ds_error *err)
{
        size_t lines;
        uint64_t start_ns = ds_now_ns();
        bool mlsd = facts && ftp->feat.mlst;
        int rc = transfer_listing(ftp, mlsd ? "MLSD" : "LIST", remote, LISTING_MAX, o, &t->listing,
                                  &t->listing_len, &lines, err);
        if (rc < 0)
                return rc;
        t->listing_facts = mlsd;
        t->bytes = t->listing_len;
        t->seconds = ds_seconds_between(start_ns, ds_now_ns());
        return 0;
}

int job_cp(struct ftp *src, const char *src_path, struct ftp *dst, const char *dst_path,
           const struct job_opts *o, struct job_totals *t, struct ds_error *err)
{
        uint64_t size = 0;
        struct xftp_addr addr;

        if (o->verbs && !src->feat.rprt)
                return no_verbs(src, "RPRT", "cp", err);
        if (o->verbs && !dst->feat.rpsv)
                return no_verbs(dst, "RPSV", "cp", err);
        int rc = ftp_size(src, "SIZE", src_path, &size, err);
        unsigned n = streams_for(src, o, rc == 0 ? size : UINT64_MAX);
        if (streams_for(dst, o, rc == 0 ? size : UINT64_MAX) < n)
                n = streams_for(dst, o, rc == 0 ? size : UINT64_MAX);
        if (rc == -ENOENT)
                return ds_fail(err, 0, "%s: no such file on %s", src_path, src->host), -ENOENT;
        /* Server to server under TLS would need one of them to be the TLS client (SSCN,
         * which few servers have): the data goes in the clear where the servers allow it. */
        if (rc == 0)
                rc = ftp_data_clear(src, err);
        if (rc == 0)
                rc = ftp_data_clear(dst, err);
        if (rc == 0)
                rc = ftp_prepare(src, n, o->verbs, err);
        if (rc == 0)
                rc = ftp_prepare(dst, n, o->verbs, err);
        /* Over verbs the source's links go to where the destination's RPSV listens. */
        if (rc == 0)
                rc = o->verbs ? ftp_verbs_passive(dst, &addr, err)
                              : ftp_passive_addr(dst, &addr, err);
        if (rc == 0)
                rc = o->verbs ? ftp_verbs_port(src, &addr, err) : ftp_port(src, &addr, err);
        /* The destination waits for the source's connection before its 150, so both
         * commands go out before either reply is read. */
        uint64_t start_ns = ds_now_ns();
        if (rc == 0)
                rc = ftp_send(dst, err, "STOR %s", dst_path);
        if (rc == 0)
                rc = ftp_send(src, err, "RETR %s", src_path);
        int src_code = rc == 0 ? ftp_reply(src, err) : rc;
        if (src_code >= 0 && src_code != 125 && src_code != 150)
                return ds_fail(err, 0, "RETR %s: %s", src_path, src->reply), -EIO;
        int dst_code = src_code >= 0 ? ftp_reply(dst, err) : src_code;
        if (dst_code >= 0 && dst_code != 125 && dst_code != 150)
                return ds_fail(err, 0, "STOR %s: %s", dst_path, dst->reply), -EIO;
        if (dst_code < 0)
                return dst_code;
        /* The data may take long and never passes here: only a stop ends the wait. */
        int src_timeout = src->timeout_ms, dst_timeout = dst->timeout_ms;
        src->timeout_ms = dst->timeout_ms = -1;
        rc = final_reply(src, "RETR", false, err);
        if (rc == 0)
                rc = final_reply(dst, "STOR", false, err);
        dst->stored |= rc == 0;
        src->timeout_ms = src_timeout;
        dst->timeout_ms = dst_timeout;
        t->seconds += ds_seconds_between(start_ns, ds_now_ns());
        if (rc == 0) {
                t->files++;
                t->bytes += size;
                t->streams_used = n;
        }
        return rc;
}
