/* The transfer pipeline over loopback TCP: MODE S (sendfile and pool buffers) and MODE E
 * over several connections give identical bytes; ranges resume; a receiver refuses blocks
 * it was not told of, sees a sender that vanishes, and stops on its flag or deadline; a
 * file with start_io/finish_io gets two pieces in flight, finished in order, and a write
 * that fails among them is reported, as the file's failure, with every piece waited for;
 * a resume point that cannot be made durable ends a receive there; a send cut short counts
 * only what the connection took, all of it, and one cut by sendfile's read error is the
 * file's failure; a paced transfer keeps
 * to its rate, sending or receiving, without tripping the idle deadline; a receiving
 * backend that lends its own buffers (as verbs lends its slots) gets every loan back,
 * each once, with the bytes whole; a sending one that lends its buffers sends each block
 * from where it was read and gets every buffer back. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <dragstrip/clock.h>
#include <dragstrip/error.h>
#include <dragstrip/pace.h>

#include "dataconn.h"
#include "hash.h"
#include "xconn.h"
#include "modee.h"
#include "xfer.h"

#define FILE_SIZE ((3u << 20) + 12345u) /* not a multiple of any block */

/* A file whose start_io only notes the piece and whose finish_io does it, through the
 * plain file beneath: the pipeline's window made visible. */
#define DEFERRED_MAX 16u
struct deferred {
        struct xftp_xfile xfile;
        struct xftp_xfile *plain;
        struct {
                bool write;
                void *buf;
                size_t len;
                uint64_t offset;
        } pieces[DEFERRED_MAX];
        unsigned started, finished, most_in_flight;
        unsigned fail_write; /* the nth write (from 1) fails with ENOSPC; 0: none */
        unsigned writes;
};

static int deferred_start(struct xftp_xfile *xfile, bool write, void *buf, size_t len,
                          uint64_t offset)
{
        struct deferred *d = xfile->impl;
        unsigned ticket = d->started % DEFERRED_MAX;

        assert_true(d->started - d->finished < DEFERRED_MAX);
        d->pieces[ticket].write = write;
        d->pieces[ticket].buf = buf;
        d->pieces[ticket].len = len;
        d->pieces[ticket].offset = offset;
        d->started++;
        if (d->started - d->finished > d->most_in_flight)
                d->most_in_flight = d->started - d->finished;
        return (int)ticket;
}

static ssize_t deferred_finish(struct xftp_xfile *xfile, int ticket)
{
        struct deferred *d = xfile->impl;

        assert_int_equal(ticket, d->finished % DEFERRED_MAX); /* in the order started */
        d->finished++;
        if (!d->pieces[ticket].write)
                return d->plain->ops->read_at(d->plain, d->pieces[ticket].buf,
                                              d->pieces[ticket].len, d->pieces[ticket].offset);
        if (++d->writes == d->fail_write)
                return -ENOSPC;
        return d->plain->ops->write_at(d->plain, d->pieces[ticket].buf, d->pieces[ticket].len,
                                       d->pieces[ticket].offset);
}

static ssize_t deferred_read_at(struct xftp_xfile *xfile, void *buf, size_t len, uint64_t offset)
{
        struct deferred *d = xfile->impl;
        return d->plain->ops->read_at(d->plain, buf, len, offset);
}

static int deferred_write_at(struct xftp_xfile *xfile, const void *buf, size_t len, uint64_t offset)
{
        struct deferred *d = xfile->impl;
        return d->plain->ops->write_at(d->plain, buf, len, offset);
}

static const struct xftp_xfile_ops deferred_ops = {.read_at = deferred_read_at,
                                                   .write_at = deferred_write_at,
                                                   .start_io = deferred_start,
                                                   .finish_io = deferred_finish};

/* Writes that take 100 ms each, one at a time, as a slow disk's. */
static int slow_write_at(struct xftp_xfile *xfile, const void *buf, size_t len, uint64_t offset)
{
        nanosleep(&(struct timespec){.tv_nsec = 100000000}, NULL);
        return deferred_write_at(xfile, buf, len, offset);
}

static const struct xftp_xfile_ops slow_ops = {.read_at = deferred_read_at,
                                               .write_at = slow_write_at};

/* The file the pipeline is given: plain itself, or d wrapped around it. */
static struct xftp_xfile *maybe_deferred(struct deferred *d, struct xftp_xfile *plain)
{
        if (!d)
                return plain;
        d->plain = plain;
        d->xfile = (struct xftp_xfile){.ops = &deferred_ops, .impl = d, .fd = -1, .direct_fd = -1};
        return &d->xfile;
}

struct fixture {
        char dir[64], src[96], dst[96];
        uint8_t *data;
        struct deferred *sent, *received; /* NULL: plain files */
        struct ds_pace *send_pace;        /* the sender's -R (the receiver's is in its opts) */
};

static int setup(void **state)
{
        struct fixture *fx = calloc(1, sizeof(*fx));
        assert_non_null(fx);
        strcpy(fx->dir, "/tmp/ds-xfer-XXXXXX");
        assert_non_null(mkdtemp(fx->dir));
        snprintf(fx->src, sizeof(fx->src), "%s/src", fx->dir);
        snprintf(fx->dst, sizeof(fx->dst), "%s/dst", fx->dir);
        fx->data = malloc(FILE_SIZE);
        assert_non_null(fx->data);
        uint64_t x = 0x9e3779b97f4a7c15ull;
        for (size_t i = 0; i < FILE_SIZE; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                fx->data[i] = (uint8_t)x;
        }
        int fd = open(fx->src, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, fx->data, FILE_SIZE), FILE_SIZE);
        assert_int_equal(close(fd), 0);
        *state = fx;
        return 0;
}

static int teardown(void **state)
{
        struct fixture *fx = *state;
        unlink(fx->src);
        unlink(fx->dst);
        rmdir(fx->dir);
        free(fx->data);
        free(fx);
        return 0;
}

/* n connected pairs on loopback: send[i] talks to recv[i]. */
static void connect_pairs(int *send_fds, int *recv_fds, unsigned n)
{
        struct xftp_addr local;
        struct xftp_data_opts opts = {.sockbuf = 0, .timeout_ms = 5000};
        struct ds_error err;

        assert_int_equal(xftp_parse_port("127,0,0,1,0,1", &local), 0);
        int lfd = xftp_data_listen(&local, &opts, &err);
        assert_true(lfd >= 0);
        assert_int_equal(xftp_addr_local(lfd, &local), 0);
        assert_int_equal(xftp_data_connect(&local, NULL, send_fds, n, &opts, &err), 0);
        assert_int_equal(xftp_data_accept(lfd, &local, recv_fds, n, &opts, NULL, &err), 0);
        assert_int_equal(close(lfd), 0);
}

struct sender {
        pthread_t thread;
        const char *path;
        enum xftp_xfer_mode mode;
        int *fds;
        unsigned n;
        struct xftp_xfer_opts opts;
        struct xftp_xfer_result result;
        struct deferred *deferred;
        int rc;
};

static void *send_main(void *arg)
{
        struct sender *s = arg;
        struct xftp_xfile file;
        struct ds_error err;
        int fd = open(s->path, O_RDONLY);
        s->rc = fd < 0 ? -errno : xftp_xfile_plain(&file, fd, XFTP_XFILE_DIRECT, &err);
        if (s->rc == 0) {
                s->rc = xftp_xfer_send(maybe_deferred(s->deferred, &file), s->mode, s->fds, s->n,
                                       &s->opts, &s->result, &err);
                xftp_xfile_plain_close(&file);
        }
        if (fd >= 0)
                close(fd);
        xftp_data_close(s->fds, s->n); /* MODE S: the close is the end of the data */
        return NULL;
}

/* The receiving end in a thread of its own: plain sockets into the file at path. */
struct receiver {
        pthread_t thread;
        const char *path;
        int *fds;
        unsigned n;
        struct xftp_xfer_opts opts;
        struct xftp_xfer_result result;
        int rc;
};

static void *receive_main(void *arg)
{
        struct receiver *r = arg;
        struct xftp_xfile file;
        struct ds_error err;
        int fd = open(r->path, O_WRONLY | O_CREAT, 0600);
        r->rc = fd < 0 ? -errno : xftp_xfile_plain(&file, fd, 0, &err);
        if (r->rc == 0) {
                r->rc = xftp_xfer_recv(&file, XFTP_XFER_BLOCKS, r->fds, r->n, &r->opts, &r->result,
                                       &err);
                xftp_xfile_plain_close(&file);
        }
        if (fd >= 0)
                close(fd);
        xftp_data_close(r->fds, r->n);
        return NULL;
}

static void check_dst(const struct fixture *fx, uint64_t from, uint64_t to)
{
        int fd = open(fx->dst, O_RDONLY);
        assert_true(fd >= 0);
        struct stat st;
        assert_int_equal(fstat(fd, &st), 0);
        assert_int_equal(st.st_size, to);
        uint8_t *got = malloc(to - from);
        assert_non_null(got);
        assert_int_equal(pread(fd, got, to - from, (off_t)from), (ssize_t)(to - from));
        assert_memory_equal(got, fx->data + from, to - from);
        free(got);
        assert_int_equal(close(fd), 0);
}

/* Sends src over n connections into dst and returns the receiver's result code. */
static int copy(struct fixture *fx, enum xftp_xfer_mode mode, unsigned n,
                const struct xftp_xfer_opts *opts, struct xftp_xfer_result *result)
{
        int send_fds[XFTP_MODEE_MAX_STREAMS], recv_fds[XFTP_MODEE_MAX_STREAMS];
        struct sender s = {.path = fx->src,
                           .mode = mode,
                           .fds = send_fds,
                           .n = n,
                           .opts = *opts,
                           .deferred = fx->sent};
        s.opts.pace = fx->send_pace;
        struct xftp_xfile file;
        struct ds_error err = {{0}};

        connect_pairs(send_fds, recv_fds, n);
        assert_int_equal(pthread_create(&s.thread, NULL, send_main, &s), 0);
        int fd = open(fx->dst, O_WRONLY | O_CREAT, 0600);
        assert_true(fd >= 0);
        assert_int_equal(xftp_xfile_plain(&file, fd, XFTP_XFILE_DIRECT, &err), 0);
        int rc = xftp_xfer_recv(maybe_deferred(fx->received, &file), mode, recv_fds, n, opts,
                                result, &err);
        xftp_xfile_plain_close(&file);
        assert_int_equal(close(fd), 0);
        xftp_data_close(recv_fds, n);
        assert_int_equal(pthread_join(s.thread, NULL), 0);
        if (rc == 0) {
                assert_int_equal(s.rc, 0);
                assert_int_equal(s.result.bytes, result->bytes);
        }
        return rc;
}

static void test_stream_by_sendfile_gives_identical_bytes(void **state)
{
        struct fixture *fx = *state;
        struct xftp_xfer_opts opts = {
            .block = 256 << 10, .length = UINT64_MAX, .limit = UINT64_MAX};
        struct xftp_xfer_result result;

        assert_int_equal(copy(fx, XFTP_XFER_STREAM, 1, &opts, &result), 0);
        assert_int_equal(result.bytes, FILE_SIZE);
        assert_int_equal(result.prefix_end, FILE_SIZE);
        check_dst(fx, 0, FILE_SIZE);
}

static void test_stream_through_pool_buffers_gives_identical_bytes(void **state)
{
        struct fixture *fx = *state;
        struct xftp_xfer_opts opts = {.block = 64 << 10,
                                      .depth = 3,
                                      .length = UINT64_MAX,
                                      .limit = UINT64_MAX,
                                      .flags = XFTP_XFER_NO_SENDFILE};
        struct xftp_xfer_result result;

        assert_int_equal(copy(fx, XFTP_XFER_STREAM, 1, &opts, &result), 0);
        assert_int_equal(result.bytes, FILE_SIZE);
        check_dst(fx, 0, FILE_SIZE);
}

/* A stream of unknown size that ends within its first piece (a small file from a
 * standard client) is received and written in the caller's thread: the same bytes. */
static void test_stream_within_one_piece_of_unknown_size_gives_identical_bytes(void **state)
{
        struct fixture *fx = *state;
        struct xftp_xfer_opts opts = {.block = 2 * FILE_SIZE,
                                      .length = UINT64_MAX,
                                      .limit = UINT64_MAX,
                                      .flags = XFTP_XFER_NO_SENDFILE};
        struct xftp_xfer_result result;

        assert_int_equal(copy(fx, XFTP_XFER_STREAM, 1, &opts, &result), 0);
        assert_int_equal(result.bytes, FILE_SIZE);
        assert_int_equal(result.prefix_end, FILE_SIZE);
        check_dst(fx, 0, FILE_SIZE);
}

static void test_blocks_over_four_connections_give_identical_bytes(void **state)
{
        struct fixture *fx = *state;
        struct xftp_xfer_opts opts = {.block = 64 << 10, .length = UINT64_MAX, .limit = FILE_SIZE};
        struct xftp_xfer_result result;

        assert_int_equal(copy(fx, XFTP_XFER_BLOCKS, 4, &opts, &result), 0);
        assert_int_equal(result.bytes, FILE_SIZE);
        assert_int_equal(result.prefix_end, FILE_SIZE);
        check_dst(fx, 0, FILE_SIZE);
}

static void test_a_range_resumes_where_the_file_ends(void **state)
{
        struct fixture *fx = *state;
        const uint64_t half = FILE_SIZE / 2 + 7;
        int fd = open(fx->dst, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, fx->data, half), (ssize_t)half);
        assert_int_equal(close(fd), 0);

        struct xftp_xfer_opts opts = {
            .block = 128 << 10, .offset = half, .length = UINT64_MAX, .limit = FILE_SIZE};
        struct xftp_xfer_result result;
        assert_int_equal(copy(fx, XFTP_XFER_BLOCKS, 2, &opts, &result), 0);
        assert_int_equal(result.bytes, FILE_SIZE - half);
        assert_int_equal(result.prefix_end, FILE_SIZE);
        check_dst(fx, 0, FILE_SIZE);
}

static void test_stream_longer_than_announced_is_refused(void **state)
{
        struct fixture *fx = *state;
        struct xftp_xfer_opts opts = {.block = 64 << 10, .length = UINT64_MAX, .limit = 100000};
        struct xftp_xfer_result result;

        assert_int_equal(copy(fx, XFTP_XFER_STREAM, 1, &opts, &result), -EFBIG);
        assert_true(result.bytes <= 100000);
}

static void test_two_pieces_in_flight_give_identical_bytes(void **state)
{
        struct fixture *fx = *state;
        struct deferred sent = {0}, received = {0};
        struct xftp_xfer_opts opts = {.block = 64 << 10, .length = UINT64_MAX, .limit = FILE_SIZE};
        struct xftp_xfer_result result;

        fx->sent = &sent;
        fx->received = &received;
        for (enum xftp_xfer_mode mode = XFTP_XFER_STREAM; mode <= XFTP_XFER_BLOCKS; mode++) {
                sent = (struct deferred){0};
                received = (struct deferred){0};
                assert_int_equal(copy(fx, mode, mode == XFTP_XFER_STREAM ? 1 : 3, &opts, &result),
                                 0);
                assert_int_equal(result.bytes, FILE_SIZE);
                assert_int_equal(result.prefix_end, FILE_SIZE);
                check_dst(fx, 0, FILE_SIZE);
                assert_int_equal(sent.most_in_flight, 2);
                assert_true(received.most_in_flight >= 1 && received.most_in_flight <= 2);
                assert_int_equal(sent.started, sent.finished);
                assert_int_equal(received.started, received.finished);
                assert_int_equal(unlink(fx->dst), 0);
        }
        fx->sent = fx->received = NULL;
}

static void test_a_failed_write_in_flight_is_reported_and_waited_for(void **state)
{
        struct fixture *fx = *state;
        struct deferred received = {.fail_write = 5};
        struct xftp_xfer_opts opts = {.block = 64 << 10, .length = UINT64_MAX, .limit = FILE_SIZE};
        struct xftp_xfer_result result;

        fx->received = &received;
        assert_int_equal(copy(fx, XFTP_XFER_BLOCKS, 2, &opts, &result), -ENOSPC);
        fx->received = NULL;
        assert_true(result.file_failed); /* the disk's failure, not the network's */
        assert_int_equal(received.started, received.finished);
        /* The prefix covers the four pieces written before the failure, no more. */
        assert_true(result.prefix_end <= 4u * (64u << 10));
}

/* A resume point's sync that fails with EIO, the first time it is asked for. */
static int failing_prefix(uint64_t prefix_end, void *ctx)
{
        uint64_t *asked_at = ctx;
        *asked_at = prefix_end;
        return -EIO;
}

static void test_a_failed_resume_point_ends_the_receive_as_the_files_failure(void **state)
{
        struct fixture *fx = *state;
        uint64_t asked_at = 0;
        struct xftp_xfer_opts opts = {.block = 64 << 10,
                                      .length = UINT64_MAX,
                                      .limit = FILE_SIZE,
                                      .on_prefix = failing_prefix,
                                      .prefix_ctx = &asked_at};
        struct xftp_xfer_result result;

        assert_int_equal(copy(fx, XFTP_XFER_BLOCKS, 1, &opts, &result), -EIO);
        assert_true(result.file_failed);
        assert_true(asked_at > 0);
        assert_true(result.bytes < FILE_SIZE); /* it ended there, not at the end */
}

/* A connection that takes the first `budget` bytes whole and then breaks (-EPIPE), as a
 * peer that goes away in the middle of a file; or, with stop, sets *stop as it takes the
 * last of them, as a stop that comes while a block's last bytes go. */
struct breaking {
        size_t budget, taken;
        atomic_bool *stop;
};

static ssize_t breaking_sendv(struct xftp_conn *c, const struct iovec *iov, int cnt, int flags)
{
        struct breaking *b = c->impl;
        size_t total = 0;
        (void)flags;
        for (int i = 0; i < cnt; i++)
                total += iov[i].iov_len;
        if (b->taken + total > b->budget)
                return -EPIPE;
        b->taken += total;
        if (b->stop && b->taken == b->budget)
                atomic_store(b->stop, true);
        return (ssize_t)total;
}

static int breaking_close(struct xftp_conn *c)
{
        (void)c;
        return 0;
}

/* Sends src over the one connection conn: the pipeline's result. */
static int send_over(const struct fixture *fx, enum xftp_xfer_mode mode, struct xftp_conn *conn,
                     const struct xftp_xfer_opts *opts, struct xftp_xfer_result *result,
                     struct ds_error *err)
{
        struct xftp_xfile src;
        int fd = open(fx->src, O_RDONLY);
        assert_true(fd >= 0);
        assert_int_equal(xftp_xfile_plain(&src, fd, 0, err), 0);
        int rc = xftp_xfer_send_conns(&src, mode, conn, 1, opts, result, err);
        xftp_xfile_plain_close(&src);
        assert_int_equal(close(fd), 0);
        return rc;
}

/* Two blocks sent, then the connection breaks or the transfer is stopped as the second
 * one's last bytes go: the bytes the connection took are counted, all of them, and none
 * read ahead of it. */
static void check_cut_send_counts(struct fixture *fx, atomic_bool *stop, int want)
{
        static const struct xftp_conn_ops breaking_ops = {
            .name = "breaking", .sendv = breaking_sendv, .close = breaking_close};
        struct xftp_xfer_opts opts = {
            .block = 64 << 10, .length = FILE_SIZE, .limit = UINT64_MAX, .idle_ms = 5000};
        struct breaking b = {.budget = 2 * (XFTP_MODEE_HEADER + (64 << 10)), .stop = stop};
        struct xftp_conn conn = {.ops = &breaking_ops, .fd = -1, .impl = &b};
        struct xftp_xfer_result result;
        struct ds_error err = {{0}};

        opts.stop = stop;
        assert_int_equal(send_over(fx, XFTP_XFER_BLOCKS, &conn, &opts, &result, &err), want);
        assert_false(result.file_failed);
        assert_int_equal(result.bytes, 2u * (64u << 10));
        assert_int_equal(result.blocks, 2);
}

static void test_a_cut_send_counts_only_the_bytes_sent(void **state)
{
        check_cut_send_counts(*state, NULL, -EPIPE);
}

/* The stop is seen right after the second block was taken whole: it counts all the same. */
static void test_a_block_sent_as_the_transfer_stops_is_counted(void **state)
{
        atomic_bool stop = false;
        check_cut_send_counts(*state, &stop, -EINTR);
}

/* A connection whose sendfile fails at once with the errno impl points to. */
static ssize_t failing_sendfile(struct xftp_conn *c, int file_fd, off_t *offset, size_t len)
{
        (void)file_fd;
        (void)offset;
        (void)len;
        return -*(const int *)c->impl;
}

/* sendfile reads the file as it sends: its read errors are the file's failure, as a read
 * into buffers is (xftpd answers 451 Local error, not 426), and its socket errors still
 * the connection's. */
static void test_a_sendfile_read_error_is_the_files_failure(void **state)
{
        struct fixture *fx = *state;
        static const struct xftp_conn_ops failing_ops = {
            .name = "failing", .sendfile = failing_sendfile, .close = breaking_close};
        const struct {
                int errnum;
                bool files;
        } cases[] = {{EIO, true}, {EOVERFLOW, true}, {ECONNRESET, false}, {EPIPE, false}};

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct xftp_conn conn = {
                    .ops = &failing_ops, .fd = -1, .impl = (void *)&cases[i].errnum};
                struct xftp_xfer_opts opts = {
                    .length = FILE_SIZE, .limit = UINT64_MAX, .idle_ms = 5000};
                struct xftp_xfer_result result;
                struct ds_error err = {{0}};
                assert_int_equal(send_over(fx, XFTP_XFER_STREAM, &conn, &opts, &result, &err),
                                 -cases[i].errnum);
                assert_true(result.sendfile);
                if (result.file_failed != cases[i].files)
                        fail_msg("errno %d: file_failed %d (%s)", cases[i].errnum,
                                 result.file_failed, err.text);
                if (cases[i].files)
                        assert_non_null(strstr(err.text, "read at 0"));
        }
}

/* A hand-made sender: writes raw bytes on one connection, then closes it. */
static int receive_raw(const void *wire, size_t len, uint64_t limit,
                       struct xftp_xfer_result *result, struct ds_error *err, const char *dst)
{
        int send_fd, recv_fd;
        struct xftp_xfile file;

        connect_pairs(&send_fd, &recv_fd, 1);
        assert_int_equal(write(send_fd, wire, len), (ssize_t)len);
        assert_int_equal(close(send_fd), 0);
        int fd = open(dst, O_WRONLY | O_CREAT, 0600);
        assert_true(fd >= 0);
        assert_int_equal(xftp_xfile_plain(&file, fd, 0, err), 0);
        struct xftp_xfer_opts opts = {.length = UINT64_MAX, .limit = limit};
        int rc = xftp_xfer_recv(&file, XFTP_XFER_BLOCKS, &recv_fd, 1, &opts, result, err);
        xftp_xfile_plain_close(&file);
        assert_int_equal(close(fd), 0);
        assert_int_equal(close(recv_fd), 0);
        return rc;
}

static void test_block_beyond_the_limit_writes_nothing(void **state)
{
        struct fixture *fx = *state;
        uint8_t wire[XFTP_MODEE_HEADER + 8];
        struct xftp_modee_block block = {.count = 8, .offset = 1ull << 40};
        struct xftp_xfer_result result;
        struct ds_error err;

        xftp_modee_encode(&block, wire);
        memset(wire + XFTP_MODEE_HEADER, 'x', 8);
        assert_int_equal(receive_raw(wire, sizeof(wire), 1 << 20, &result, &err, fx->dst), -EFBIG);
        assert_int_equal(result.bytes, 0);
        struct stat st;
        assert_int_equal(stat(fx->dst, &st), 0);
        assert_int_equal(st.st_size, 0);
}

/* A block at 2^63 or one that ends past the largest off_t, with no limit to refuse it: the
 * sender's error (-EPROTO), not the disk's (pwrite's EINVAL), and nothing is written. */
static void test_a_block_past_the_largest_offset_is_the_senders_error(void **state)
{
        struct fixture *fx = *state;
        const struct xftp_modee_block blocks[] = {{.count = 8, .offset = 1ull << 63},
                                                  {.count = 8, .offset = INT64_MAX - 4}};
        uint8_t wire[XFTP_MODEE_HEADER + 8];

        for (size_t i = 0; i < sizeof(blocks) / sizeof(blocks[0]); i++) {
                struct xftp_xfer_result result;
                struct ds_error err = {{0}};
                xftp_modee_encode(&blocks[i], wire);
                memset(wire + XFTP_MODEE_HEADER, 'x', 8);
                assert_int_equal(
                    receive_raw(wire, sizeof(wire), UINT64_MAX, &result, &err, fx->dst), -EPROTO);
                assert_false(result.file_failed);
                assert_int_equal(result.bytes, 0);
                assert_non_null(strstr(err.text, "ends past the largest file offset"));
        }
        struct stat st;
        assert_int_equal(stat(fx->dst, &st), 0);
        assert_int_equal(st.st_size, 0);
}

/* Blocks [0,100) and [1000,1100), then EOF and EOD: the sender ended well, yet the
 * file has a hole, so the receive fails with the gap named and the prefix at 100. */
static void test_blocks_with_a_gap_are_not_a_whole_file(void **state)
{
        struct fixture *fx = *state;
        uint8_t wire[4 * XFTP_MODEE_HEADER + 200], *at = wire;
        const struct xftp_modee_block blocks[] = {
            {.count = 100, .offset = 0},
            {.count = 100, .offset = 1000},
            {.desc = XFTP_MODEE_EOF, .offset = 1},
            {.desc = XFTP_MODEE_EOD},
        };
        struct xftp_xfer_result result;
        struct ds_error err;

        for (size_t i = 0; i < sizeof(blocks) / sizeof(blocks[0]); i++) {
                xftp_modee_encode(&blocks[i], at);
                at += XFTP_MODEE_HEADER;
                memset(at, 'g', blocks[i].count);
                at += blocks[i].count;
        }
        assert_int_equal(receive_raw(wire, sizeof(wire), UINT64_MAX, &result, &err, fx->dst),
                         -EPROTO);
        assert_int_equal(result.prefix_end, 100);
        assert_non_null(strstr(err.text, "100 to 1000"));
}

/* Writes len bytes on fd after delay_ms, while the receiver runs. */
struct late_writer {
        pthread_t thread;
        int fd;
        const uint8_t *bytes;
        size_t len;
        long delay_ms;
};

static void *write_late(void *arg)
{
        struct late_writer *w = arg;
        nanosleep(&(struct timespec){.tv_nsec = w->delay_ms * 1000000}, NULL);
        assert_int_equal(write(w->fd, w->bytes, w->len), (ssize_t)w->len);
        return NULL;
}

/* While the disk side writes block A (slowly), connection 1 takes a buffer for block B
 * and has half its data when connection 0's bad header fails the pipeline; B's rest comes
 * after. B is not queued, so its buffer goes back once: queued and handed back both, it
 * was written after the failure and given back twice, past the end of the free stack. */
static void test_a_block_finished_after_a_failure_is_freed_once(void **state)
{
        struct fixture *fx = *state;
        int send_fds[2], recv_fds[2];
        struct xftp_xfile file;
        struct ds_error err;
        struct xftp_xfer_result result;
        enum { BLOCK = 64 << 10, PIECE = XFTP_MODEE_HEADER + BLOCK };
        static uint8_t wire[2 * PIECE], bad[XFTP_MODEE_HEADER];

        connect_pairs(send_fds, recv_fds, 2);
        for (int i = 0; i < 2; i++) {
                xftp_modee_encode(&(struct xftp_modee_block){.count = BLOCK, .offset = i * BLOCK},
                                  wire + i * PIECE);
                memset(wire + i * PIECE + XFTP_MODEE_HEADER, 'a' + i, BLOCK);
        }
        xftp_modee_encode(&(struct xftp_modee_block){.count = 8, .offset = 1ull << 40}, bad);
        size_t first = PIECE + XFTP_MODEE_HEADER + BLOCK / 2; /* A, and half of B */
        assert_int_equal(write(send_fds[1], wire, first), (ssize_t)first);
        struct late_writer failing = {
            .fd = send_fds[0], .bytes = bad, .len = sizeof(bad), .delay_ms = 30};
        struct late_writer rest = {
            .fd = send_fds[1], .bytes = wire + first, .len = sizeof(wire) - first, .delay_ms = 60};
        assert_int_equal(pthread_create(&failing.thread, NULL, write_late, &failing), 0);
        assert_int_equal(pthread_create(&rest.thread, NULL, write_late, &rest), 0);
        int fd = open(fx->dst, O_WRONLY | O_CREAT, 0600);
        assert_true(fd >= 0);
        assert_int_equal(xftp_xfile_plain(&file, fd, 0, &err), 0);
        struct deferred slow = {.plain = &file};
        slow.xfile =
            (struct xftp_xfile){.ops = &slow_ops, .impl = &slow, .fd = -1, .direct_fd = -1};
        struct xftp_xfer_opts opts = {.block = BLOCK, .length = UINT64_MAX, .limit = 1 << 20};
        int rc = xftp_xfer_recv(&slow.xfile, XFTP_XFER_BLOCKS, recv_fds, 2, &opts, &result, &err);
        assert_int_equal(pthread_join(failing.thread, NULL), 0);
        assert_int_equal(pthread_join(rest.thread, NULL), 0);
        assert_int_equal(rc, -EFBIG);
        assert_int_equal(result.bytes, BLOCK); /* A, written before the failure; not B */
        xftp_xfile_plain_close(&file);
        assert_int_equal(close(fd), 0);
        xftp_data_close(recv_fds, 2);
        xftp_data_close(send_fds, 2);
}

static void test_sender_gone_before_eod_is_epipe_with_the_whole_prefix(void **state)
{
        struct fixture *fx = *state;
        uint8_t wire[2 * XFTP_MODEE_HEADER + 200];
        struct xftp_modee_block first = {.count = 100, .offset = 0};
        struct xftp_modee_block gap = {.count = 50, .offset = 300};
        struct xftp_xfer_result result;
        struct ds_error err;

        xftp_modee_encode(&first, wire);
        memset(wire + XFTP_MODEE_HEADER, 'a', 100);
        xftp_modee_encode(&gap, wire + XFTP_MODEE_HEADER + 100);
        memset(wire + 2 * XFTP_MODEE_HEADER + 100, 'b', 50);
        size_t len = 2 * XFTP_MODEE_HEADER + 150;
        assert_int_equal(receive_raw(wire, len, 1 << 20, &result, &err, fx->dst), -EPIPE);
        assert_int_equal(result.bytes, 150);
        assert_int_equal(result.prefix_end, 100); /* 100..300 never came */
}

static void test_stop_flag_ends_a_silent_receive(void **state)
{
        struct fixture *fx = *state;
        int send_fd, recv_fd;
        struct xftp_xfile file;
        struct ds_error err;
        struct xftp_xfer_result result;
        atomic_bool stop = true;

        connect_pairs(&send_fd, &recv_fd, 1);
        int fd = open(fx->dst, O_WRONLY | O_CREAT, 0600);
        assert_true(fd >= 0);
        assert_int_equal(xftp_xfile_plain(&file, fd, 0, &err), 0);
        struct xftp_xfer_opts opts = {.length = UINT64_MAX, .limit = UINT64_MAX, .stop = &stop};
        uint64_t start = ds_now_ns();
        assert_int_equal(xftp_xfer_recv(&file, XFTP_XFER_STREAM, &recv_fd, 1, &opts, &result, &err),
                         -EINTR);
        opts.stop = NULL;
        opts.idle_ms = 300;
        assert_int_equal(xftp_xfer_recv(&file, XFTP_XFER_STREAM, &recv_fd, 1, &opts, &result, &err),
                         -ETIMEDOUT);
        assert_true(ds_now_ns() - start < 5000000000ull);
        xftp_xfile_plain_close(&file);
        assert_int_equal(close(fd), 0);
        assert_int_equal(close(recv_fd), 0);
        assert_int_equal(close(send_fd), 0);
}

/* At 4 MB/s the file takes about 0.8 s, each 2 MiB block half a second: longer than the
 * idle deadline, which neither a deliberate wait nor the peer waiting for its bytes may
 * trip. */
static void check_paced(struct fixture *fx, enum xftp_xfer_mode mode, unsigned n, bool receiver)
{
        struct ds_pace pace;
        struct xftp_xfer_opts opts = {.block = 2 << 20,
                                      .length = UINT64_MAX,
                                      .limit = FILE_SIZE,
                                      .idle_ms = 400,
                                      .pace = receiver ? &pace : NULL};
        struct xftp_xfer_result result;

        ds_pace_init(&pace, 32e6);
        fx->send_pace = receiver ? NULL : &pace;
        uint64_t start = ds_now_ns();
        assert_int_equal(copy(fx, mode, n, &opts, &result), 0);
        uint64_t took = ds_now_ns() - start;
        assert_true(took >= (uint64_t)FILE_SIZE * 250); /* 4 MB/s: 250 ns a byte */
        assert_true(took < 5000000000ull);
        check_dst(fx, 0, FILE_SIZE);
}

static void test_a_paced_receive_over_two_connections_keeps_to_the_rate(void **state)
{
        check_paced(*state, XFTP_XFER_BLOCKS, 2, true);
}

static void test_a_paced_sendfile_keeps_to_the_rate(void **state)
{
        check_paced(*state, XFTP_XFER_STREAM, 1, false);
}

/* A receiving backend that lends: the tcp backend's bytes, but a payload of a page or more
 * is read into one of the lender's own buffers and lent, as verbs lends a receive slot. It
 * notes any misuse: a ticket given back twice or never lent, a buffer wanted while out. */
#define LOANS      8u
#define LOAN_BYTES (1u << 20)
struct lender {
        uint8_t *bufs[LOANS];
        bool out[LOANS];
        uint64_t lent, returned;
        unsigned most_out, misuse;
        pthread_mutex_t lock;
};

static ssize_t lender_recv(struct xftp_conn *c, void *buf, size_t len, int flags)
{
        return xftp_conn_tcp.recv(c, buf, len, flags);
}

static void *lender_lend(struct xftp_conn *c, size_t len, uint64_t *ticket)
{
        struct lender *l = c->impl;
        unsigned slot = (unsigned)(l->lent % LOANS), out = 0;
        if (len < 4096 || len > LOAN_BYTES)
                return NULL;
        pthread_mutex_lock(&l->lock);
        bool busy = l->out[slot];
        l->misuse += busy;
        pthread_mutex_unlock(&l->lock);
        for (size_t done = 0; !busy && done < len;) {
                ssize_t got = xftp_conn_tcp.recv(c, l->bufs[slot] + done, len - done, MSG_WAITALL);
                if (got <= 0 && got != -EAGAIN)
                        return NULL; /* the stream is broken: the transfer fails */
                done += got > 0 ? (size_t)got : 0;
        }
        if (busy)
                return NULL;
        pthread_mutex_lock(&l->lock);
        l->out[slot] = true;
        *ticket = l->lent++;
        for (unsigned i = 0; i < LOANS; i++)
                out += l->out[i];
        l->most_out = out > l->most_out ? out : l->most_out;
        pthread_mutex_unlock(&l->lock);
        return l->bufs[slot];
}

static void lender_give_back(struct xftp_conn *c, uint64_t ticket)
{
        struct lender *l = c->impl;
        pthread_mutex_lock(&l->lock);
        unsigned slot = (unsigned)(ticket % LOANS);
        if (ticket >= l->lent || !l->out[slot])
                l->misuse++;
        l->out[slot] = false;
        l->returned++;
        pthread_mutex_unlock(&l->lock);
}

static int lender_close(struct xftp_conn *c)
{
        return close(c->fd) < 0 ? -errno : 0;
}

/* A lender over the socket fd, as connection c. */
static void lender_init(struct lender *l, struct xftp_conn *c, const struct xftp_conn_ops *ops,
                        int fd)
{
        *l = (struct lender){.lent = 0};
        pthread_mutex_init(&l->lock, NULL);
        for (unsigned j = 0; j < LOANS; j++)
                assert_non_null(l->bufs[j] = malloc(LOAN_BYTES));
        *c = (struct xftp_conn){.ops = ops, .fd = fd, .impl = l};
}

/* Checks every loan came back once, closes c; returns the loans made. */
static uint64_t lender_finish(struct lender *l, struct xftp_conn *c)
{
        uint64_t lent = l->lent;
        assert_int_equal(l->misuse, 0);
        assert_int_equal(l->returned, l->lent);
        xftp_conn_close(c);
        for (unsigned j = 0; j < LOANS; j++)
                free(l->bufs[j]);
        pthread_mutex_destroy(&l->lock);
        return lent;
}

static const struct xftp_conn_ops lender_ops = {.name = "lender",
                                                .recv = lender_recv,
                                                .lend = lender_lend,
                                                .give_back = lender_give_back,
                                                .close = lender_close};

/* MODE E over two lending connections into a file written by start_io: the bytes
 * are whole, every loan came back once, and no buffer was wanted while out. */
static void test_a_lending_backend_gets_every_loan_back(void **state)
{
        struct fixture *fx = *state;
        int send_fds[2], recv_fds[2];
        struct lender lenders[2];
        struct xftp_conn conns[2];
        struct deferred received = {0};
        struct xftp_xfer_opts opts = {
            .block = LOAN_BYTES / 2, .length = UINT64_MAX, .limit = UINT64_MAX, .idle_ms = 5000};
        struct sender s = {
            .path = fx->src, .mode = XFTP_XFER_BLOCKS, .fds = send_fds, .n = 2, .opts = opts};
        struct xftp_xfer_result result;
        struct xftp_xfile file;
        struct ds_error err = {{0}};

        connect_pairs(send_fds, recv_fds, 2);
        for (unsigned i = 0; i < 2; i++)
                lender_init(&lenders[i], &conns[i], &lender_ops, recv_fds[i]);
        assert_int_equal(pthread_create(&s.thread, NULL, send_main, &s), 0);
        int fd = open(fx->dst, O_WRONLY | O_CREAT, 0600);
        assert_true(fd >= 0);
        assert_int_equal(xftp_xfile_plain(&file, fd, 0, &err), 0);
        int rc = xftp_xfer_recv_conns(maybe_deferred(&received, &file), XFTP_XFER_BLOCKS, conns, 2,
                                      &opts, &result, &err);
        assert_int_equal(pthread_join(s.thread, NULL), 0);
        assert_int_equal(rc, 0);
        assert_int_equal(s.rc, 0);
        xftp_xfile_plain_close(&file);
        assert_int_equal(close(fd), 0);
        check_dst(fx, 0, FILE_SIZE);
        assert_true(received.finished > 0);
        uint64_t lent = 0;
        for (unsigned i = 0; i < 2; i++) {
                assert_true(lenders[i].most_out <= LOANS);
                lent += lender_finish(&lenders[i], &conns[i]);
        }
        /* every block was lent, none copied */
        assert_int_equal(lent, (FILE_SIZE + opts.block - 1) / opts.block);
        assert_int_equal(lent, result.blocks);
}

/* The sending side of a lending backend: take_buf hands out the lender's buffers; a sendv
 * of a header and one of them sends both whole and takes the buffer back; anything else
 * goes as the tcp backend sends it. */
static int lender_take_buf(struct xftp_conn *c, size_t len, int wait_ms, void **buf)
{
        struct lender *l = c->impl;
        (void)wait_ms;
        if (len > LOAN_BYTES)
                return -EMSGSIZE;
        int rc = -EAGAIN;
        pthread_mutex_lock(&l->lock);
        for (unsigned i = 0; i < LOANS && rc != 0; i++) {
                if (!l->out[i]) {
                        l->out[i] = true;
                        *buf = l->bufs[i];
                        l->lent++;
                        rc = 0;
                }
        }
        pthread_mutex_unlock(&l->lock);
        return rc;
}

/* Which of the lender's buffers p starts, or -1. */
static int lender_buf_index(const struct lender *l, const void *p)
{
        for (unsigned i = 0; i < LOANS; i++)
                if (l->bufs[i] == p)
                        return (int)i;
        return -1;
}

static void lender_put_buf(struct xftp_conn *c, void *buf)
{
        struct lender *l = c->impl;
        int i = lender_buf_index(l, buf);
        pthread_mutex_lock(&l->lock);
        if (i < 0 || !l->out[i])
                l->misuse++;
        else
                l->out[i] = false, l->returned++;
        pthread_mutex_unlock(&l->lock);
}

static ssize_t lender_sendv(struct xftp_conn *c, const struct iovec *iov, int cnt, int flags)
{
        struct lender *l = c->impl;
        int i = cnt == 2 ? lender_buf_index(l, iov[1].iov_base) : -1;
        if (i < 0)
                return xftp_conn_tcp.sendv(c, iov, cnt, flags);
        size_t total = iov[0].iov_len + iov[1].iov_len, done = 0;
        while (done < total) { /* all or nothing, as a lent buffer goes */
                struct iovec rest[2];
                int parts = 0;
                for (int k = 0, skip = (int)done; k < 2; k++) {
                        size_t len = iov[k].iov_len;
                        if ((size_t)skip >= len) {
                                skip -= (int)len;
                                continue;
                        }
                        rest[parts++] = (struct iovec){(char *)iov[k].iov_base + skip, len - skip};
                        skip = 0;
                }
                ssize_t n = xftp_conn_tcp.sendv(c, rest, parts, 0);
                if (n < 0 && n != -EAGAIN)
                        return n;
                done += n > 0 ? (size_t)n : 0;
        }
        lender_put_buf(c, iov[1].iov_base);
        return (ssize_t)total;
}

/* MODE E from two lending connections: each block is read into a buffer its connection
 * lends and sent from there; the bytes arrive whole and every buffer came back once. */
static void test_a_lending_sender_sends_in_place_and_gets_every_buffer_back(void **state)
{
        struct fixture *fx = *state;
        int send_fds[2], recv_fds[2];
        struct lender lenders[2];
        struct xftp_conn conns[2];
        struct xftp_xfer_opts opts = {
            .block = LOAN_BYTES / 2, .length = UINT64_MAX, .limit = UINT64_MAX, .idle_ms = 5000};
        struct xftp_xfer_result sent;
        struct xftp_xfile src;
        struct ds_error err = {{0}};
        static const struct xftp_conn_ops sender_ops = {.name = "lender",
                                                        .sendv = lender_sendv,
                                                        .take_buf = lender_take_buf,
                                                        .put_buf = lender_put_buf,
                                                        .close = lender_close};

        connect_pairs(send_fds, recv_fds, 2);
        for (unsigned i = 0; i < 2; i++)
                lender_init(&lenders[i], &conns[i], &sender_ops, send_fds[i]);
        struct receiver r = {.fds = recv_fds, .n = 2, .opts = opts, .path = fx->dst};
        assert_int_equal(pthread_create(&r.thread, NULL, receive_main, &r), 0);
        int fd = open(fx->src, O_RDONLY);
        assert_true(fd >= 0);
        assert_int_equal(xftp_xfile_plain(&src, fd, 0, &err), 0);
        int rc = xftp_xfer_send_conns(&src, XFTP_XFER_BLOCKS, conns, 2, &opts, &sent, &err);
        xftp_xfile_plain_close(&src);
        assert_int_equal(close(fd), 0);
        for (unsigned i = 0; i < 2; i++)
                xftp_conn_close(&conns[i]);
        assert_int_equal(pthread_join(r.thread, NULL), 0);
        assert_int_equal(rc, 0);
        assert_int_equal(r.rc, 0);
        check_dst(fx, 0, FILE_SIZE);
        uint64_t lent = 0;
        for (unsigned i = 0; i < 2; i++)
                lent += lender_finish(&lenders[i], &conns[i]);
        assert_int_equal(lent, (FILE_SIZE + opts.block - 1) / opts.block);
}

static void test_hash_of_a_range_matches_memory(void **state)
{
        struct fixture *fx = *state;
        struct xftp_xfile file;
        struct ds_error err;
        char got[XFTP_HASH_HEX_MAX], want[XFTP_HASH_HEX_MAX];
        uint64_t end = 0;
        struct xftp_hash hash;

        int fd = open(fx->src, O_RDONLY);
        assert_true(fd >= 0);
        assert_int_equal(xftp_xfile_plain(&file, fd, XFTP_XFILE_DIRECT, &err), 0);
        for (int algo = 0; algo < XFTP_HASH_COUNT; algo++) {
                assert_int_equal(
                    xftp_hash_file(&file, algo, 4096, 1000000, 64 << 10, NULL, got, &end, &err), 0);
                assert_int_equal(end, 1000000);
                assert_int_equal(xftp_hash_begin(&hash, algo), 0);
                xftp_hash_update(&hash, fx->data + 4096, 1000000 - 4096);
                xftp_hash_end(&hash, want);
                assert_string_equal(got, want);
                /* past the end: the hash stops at the file's end and says so */
                assert_int_equal(
                    xftp_hash_file(&file, algo, 100, UINT64_MAX, 0, NULL, got, &end, &err), 0);
                assert_int_equal(end, FILE_SIZE);
                assert_int_equal(xftp_hash_begin(&hash, algo), 0);
                xftp_hash_update(&hash, fx->data + 100, FILE_SIZE - 100);
                xftp_hash_end(&hash, want);
                assert_string_equal(got, want);
        }
        xftp_xfile_plain_close(&file);
        assert_int_equal(close(fd), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_stream_by_sendfile_gives_identical_bytes, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_stream_through_pool_buffers_gives_identical_bytes,
                                            setup, teardown),
            cmocka_unit_test_setup_teardown(
                test_stream_within_one_piece_of_unknown_size_gives_identical_bytes, setup,
                teardown),
            cmocka_unit_test_setup_teardown(test_blocks_over_four_connections_give_identical_bytes,
                                            setup, teardown),
            cmocka_unit_test_setup_teardown(test_a_range_resumes_where_the_file_ends, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_stream_longer_than_announced_is_refused, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(
                test_a_failed_resume_point_ends_the_receive_as_the_files_failure, setup, teardown),
            cmocka_unit_test_setup_teardown(test_a_cut_send_counts_only_the_bytes_sent, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_a_block_sent_as_the_transfer_stops_is_counted,
                                            setup, teardown),
            cmocka_unit_test_setup_teardown(test_a_sendfile_read_error_is_the_files_failure, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_block_beyond_the_limit_writes_nothing, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(
                test_a_block_past_the_largest_offset_is_the_senders_error, setup, teardown),
            cmocka_unit_test_setup_teardown(test_blocks_with_a_gap_are_not_a_whole_file, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(
                test_sender_gone_before_eod_is_epipe_with_the_whole_prefix, setup, teardown),
            cmocka_unit_test_setup_teardown(test_a_block_finished_after_a_failure_is_freed_once,
                                            setup, teardown),
            cmocka_unit_test_setup_teardown(test_two_pieces_in_flight_give_identical_bytes, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(
                test_a_failed_write_in_flight_is_reported_and_waited_for, setup, teardown),
            cmocka_unit_test_setup_teardown(test_stop_flag_ends_a_silent_receive, setup, teardown),
            cmocka_unit_test_setup_teardown(
                test_a_paced_receive_over_two_connections_keeps_to_the_rate, setup, teardown),
            cmocka_unit_test_setup_teardown(test_a_paced_sendfile_keeps_to_the_rate, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_hash_of_a_range_matches_memory, setup, teardown),
            cmocka_unit_test_setup_teardown(test_a_lending_backend_gets_every_loan_back, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(
                test_a_lending_sender_sends_in_place_and_gets_every_buffer_back, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
