/* ttcp over UDP. The classic sentinels frame a run: one datagram of 4 bytes before the
 * data, four after. With -s our datagrams also carry a sequence header, so our receiver
 * counts lost, duplicated and reordered datagrams, and a trailer with the sender's count
 * follows each end sentinel. A classic peer sees only sentinels and data. Our receiver
 * also ends a run after --timeout of silence, in case every end sentinel was lost. */
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <dragstrip/net.h>
#include <dragstrip/pace.h>
#include <dragstrip/seqtrack.h>

#include "ttcp.h"
#include "ttcp_supervise.h"

#define SENTINEL_LEN     4
#define END_SENTINELS    4
#define BATCH            32
#define DATA_MAGIC       0x44535454u /* "DSTT" */
#define TRAILER_MAGIC    0x44535445u /* "DSTE" */
#define WIRE_VERSION     1
#define TRAILER_WAIT_NS  200000000ull
#define RECV_BUFFER_WISH (8 << 20)

/* Both structures travel big-endian at the start of a datagram. */
struct data_header {
        uint32_t magic;
        uint8_t version;
        uint8_t reserved[3];
        uint64_t seq;
};
struct trailer {
        uint32_t magic;
        uint8_t version;
        uint8_t reserved[3];
        uint64_t datagrams;
        uint64_t bytes;
};
_Static_assert(sizeof(struct data_header) == 16, "data header is 16 bytes on the wire");
_Static_assert(sizeof(struct trailer) == 24, "trailer is 24 bytes on the wire");

enum datagram_kind { DGRAM_SENTINEL, DGRAM_SEQUENCED, DGRAM_TRAILER, DGRAM_PLAIN };

/* Classifies one received datagram, reading a field only after its bytes are known to
 * have arrived. */
static enum datagram_kind classify(const unsigned char *buf, size_t len, uint64_t *value)
{
        uint32_t magic;

        if (len <= SENTINEL_LEN)
                return DGRAM_SENTINEL;
        if (len < sizeof(struct data_header))
                return DGRAM_PLAIN;
        memcpy(&magic, buf, sizeof magic);
        if (buf[4] != WIRE_VERSION)
                return DGRAM_PLAIN;
        if (be32toh(magic) == DATA_MAGIC) {
                memcpy(value, buf + 8, sizeof *value);
                *value = be64toh(*value);
                return DGRAM_SEQUENCED;
        }
        if (be32toh(magic) == TRAILER_MAGIC && len == sizeof(struct trailer)) {
                memcpy(value, buf + 8, sizeof *value);
                *value = be64toh(*value);
                return DGRAM_TRAILER;
        }
        return DGRAM_PLAIN;
}

struct udp_run {
        const struct ttcp_options *opt;
        struct ds_live_segment *live;
        struct ttcp_outcome *out;
        int fd;
        struct ttcp_buffers bufs;
        int rc;
        struct ds_error err;
};

/* ---- transmitter ---- */

static int send_failed(struct udp_run *run, int neg_errno)
{
        if (neg_errno == -ECONNREFUSED)
                return ds_fail(&run->err, neg_errno, "nobody is receiving on %s port %u",
                               run->opt->host, run->opt->port);
        return ds_fail(&run->err, neg_errno, "send to %s", run->opt->host);
}

/* The framing datagrams: lost or refused ones are not errors, since a classic receiver
 * leaves after the first end sentinel and the port then answers with ICMP. */
static void send_sentinels(struct udp_run *run, unsigned count, bool with_trailer)
{
        struct trailer tr = {.magic = htobe32(TRAILER_MAGIC),
                             .version = WIRE_VERSION,
                             .datagrams = htobe64(run->out->io_calls),
                             .bytes = htobe64(run->out->bytes)};

        for (unsigned i = 0; i < count; i++) {
                (void)!send(run->fd, run->bufs.buf[0], SENTINEL_LEN, 0);
                if (with_trailer)
                        (void)!send(run->fd, &tr, sizeof tr, 0);
                if (i + 1 < count)
                        nanosleep(&(struct timespec){.tv_nsec = 2000000}, NULL);
        }
}

/* How many datagrams to hand the kernel per call: all of a batch unpaced, else as many as
 * fill about 100 us, so the pacing sleeps stay long enough to be accurate. */
static unsigned batch_size(const struct ttcp_options *opt, double ns_per_dgram)
{
        if (opt->rate_bps <= 0)
                return BATCH;
        double fit = 100000.0 / ns_per_dgram;
        return fit < 1 ? 1 : fit > BATCH ? BATCH : (unsigned)fit;
}

static int transmit_batches(struct udp_run *run)
{
        const struct ttcp_options *opt = run->opt;
        struct data_header headers[BATCH];
        struct iovec iov[BATCH][2];
        struct mmsghdr msgs[BATCH];
        double ns_per_dgram = opt->rate_bps > 0 ? opt->buf_len * 8 / opt->rate_bps * 1e9 : 0;
        unsigned batch = batch_size(opt, ns_per_dgram);
        uint64_t seq = 0;
        struct ds_pace pace;

        if (opt->rate_bps > 0)
                ds_pace_init(&pace, opt->rate_bps);

        for (unsigned i = 0; i < BATCH; i++) {
                headers[i] =
                    (struct data_header){.magic = htobe32(DATA_MAGIC), .version = WIRE_VERSION};
                iov[i][0] = (struct iovec){&headers[i], sizeof headers[i]};
                iov[i][1] = (struct iovec){run->bufs.buf[0] + sizeof headers[i],
                                           opt->buf_len - sizeof headers[i]};
                msgs[i] = (struct mmsghdr){.msg_hdr = {.msg_iov = iov[i], .msg_iovlen = 2}};
        }
        while (!atomic_load_explicit(&ttcp_stop, memory_order_relaxed)) {
                unsigned n = batch;

                if (opt->duration_s <= 0) {
                        if (seq >= opt->nbuf)
                                break;
                        if (opt->nbuf - seq < n)
                                n = (unsigned)(opt->nbuf - seq);
                }
                for (unsigned i = 0; i < n; i++)
                        headers[i].seq = htobe64(seq + i);
                int sent = sendmmsg(run->fd, msgs, n, 0);
                if (sent < 0 && (errno == EINTR || errno == ENOBUFS))
                        continue; /* a full device queue: offer the batch again */
                if (sent < 0)
                        return send_failed(run, -errno);
                seq += (unsigned)sent;
                run->out->io_calls += (unsigned)sent;
                run->out->bytes += (uint64_t)sent * opt->buf_len;
                ds_live_add(run->live, (unsigned)sent, (uint64_t)sent * opt->buf_len);
                if (opt->rate_bps > 0)
                        ds_pace_wait(&pace, (uint64_t)sent * opt->buf_len); /* a stop ends it */
        }
        return 0;
}

/* stdin to datagrams, one read each, without headers: what arrives is the file. */
static int transmit_stdin(struct udp_run *run)
{
        for (;;) {
                ssize_t got = read(STDIN_FILENO, run->bufs.buf[0], run->opt->buf_len);

                if (got < 0 && errno == EINTR && !atomic_load(&ttcp_stop))
                        continue;
                if (got < 0)
                        return ds_fail(&run->err, -errno, "reading stdin");
                if (got == 0 || atomic_load(&ttcp_stop))
                        return 0;
                if (got <= SENTINEL_LEN)
                        return ds_fail(&run->err, -EINVAL,
                                       "a datagram of %zd bytes would read as an end sentinel; "
                                       "the input ends in a short piece",
                                       got);
                if (send(run->fd, run->bufs.buf[0], (size_t)got, 0) < 0)
                        return send_failed(run, -errno);
                run->out->io_calls++;
                run->out->bytes += (uint64_t)got;
                ds_live_add(run->live, 1, (uint64_t)got);
        }
}

static void *transmit_thread(void *arg)
{
        struct udp_run *run = arg;

        run->rc = run->opt->sink_mode ? transmit_batches(run) : transmit_stdin(run);
        run->out->end_ns = ds_now_ns();
        send_sentinels(run, END_SENTINELS, run->opt->sink_mode);
        supervise_worker_done();
        return NULL;
}

/* ---- receiver ---- */

struct receive_state {
        struct ds_seqtrack seq;
        bool going;
        bool ending; /* an end sentinel came; waiting briefly for the trailer */
        uint64_t ending_since;
        uint64_t last_data_ns;
        uint64_t expected; /* from the trailer, 0 until one arrives */
};

/* Takes one datagram; returns true when the run is over. */
static bool receive_one(struct udp_run *run, struct receive_state *st, const unsigned char *buf,
                        size_t len, uint64_t now)
{
        uint64_t value = 0;
        enum datagram_kind kind = classify(buf, len, &value);

        if (kind == DGRAM_SENTINEL) {
                if (!st->going) {
                        st->going = true;
                        ttcp_mark_start(run->out, now);
                } else if (run->out->udp_datagrams > 0 && !st->ending) {
                        st->ending = true;
                        st->ending_since = now;
                        run->out->end_ns = now;
                        return !run->opt->sink_mode; /* only our -s sender sends a trailer */
                }
                return false;
        }
        if (kind == DGRAM_TRAILER) {
                st->expected = value;
                return st->going;
        }
        if (st->ending)
                return false; /* a straggler after the end: the run is already timed */
        if (!st->going) {     /* the start sentinel was lost */
                st->going = true;
                ttcp_mark_start(run->out, now);
        }
        run->out->udp_datagrams++;
        run->out->bytes += len;
        st->last_data_ns = now;
        ds_live_add(run->live, 1, len);
        if (kind == DGRAM_SEQUENCED) {
                run->out->udp_sequenced = true;
                switch (ds_seqtrack_add(&st->seq, value)) {
                case DS_SEQ_DUP:
                        ds_live_fault(run->live, DS_FAULT_DUP, 1);
                        break;
                case DS_SEQ_LATE:
                        ds_live_fault(run->live, DS_FAULT_REORDERED, 1);
                        break;
                default:
                        break;
                }
        }
        if (run->opt->touch)
                for (size_t i = 0; i < len; i++)
                        run->out->touch_sum += buf[i];
        if (!run->opt->sink_mode) {
                for (size_t done = 0; done < len;) {
                        ssize_t n = write(STDOUT_FILENO, buf + done, len - done);
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n < 0) {
                                run->rc = ds_fail(&run->err, -errno, "writing stdout");
                                return true;
                        }
                        done += (size_t)n;
                }
        }
        return false;
}

/* How long poll() may sleep: forever before the first datagram (and throughout without
 * --timeout), else until the silence that ends a run, or the end of the wait for a
 * trailer. Forever is a second at a time, to notice Ctrl-C. */
static int receive_wait_ms(const struct udp_run *run, const struct receive_state *st, uint64_t now)
{
        uint64_t until;

        if (!st->going || (!st->ending && run->opt->timeout_s <= 0))
                return 1000;
        until = st->ending ? st->ending_since + TRAILER_WAIT_NS
                           : (st->last_data_ns ? st->last_data_ns : run->out->start_ns) +
                                 (uint64_t)(run->opt->timeout_s * 1e9);
        return until <= now ? 0 : (int)((until - now) / 1000000) + 1;
}

static int receive_loop(struct udp_run *run, struct receive_state *st)
{
        struct iovec iov[BATCH];
        struct mmsghdr msgs[BATCH];
        struct sockaddr_storage first_from; /* who sent a batch's first datagram */

        for (unsigned i = 0; i < BATCH; i++) {
                iov[i] = (struct iovec){run->bufs.buf[i], TTCP_UDP_MAX_DGRAM};
                msgs[i] = (struct mmsghdr){.msg_hdr = {.msg_iov = &iov[i], .msg_iovlen = 1}};
        }
        msgs[0].msg_hdr.msg_name = &first_from;
        while (!atomic_load(&ttcp_stop)) {
                msgs[0].msg_hdr.msg_namelen = sizeof first_from;
                int got = recvmmsg(run->fd, msgs, BATCH, MSG_DONTWAIT, NULL);
                uint64_t now = ds_now_ns();

                if (got < 0 && errno != EAGAIN && errno != EINTR)
                        return ds_fail(&run->err, -errno, "receive");
                if (got > 0 && !run->out->peer[0]) /* the peer, named as TCP's are */
                        ds_net_format((struct sockaddr *)&first_from, msgs[0].msg_hdr.msg_namelen,
                                      run->out->peer, sizeof run->out->peer);
                if (got > 0)
                        run->out->io_calls++; /* one recvmmsg, up to BATCH datagrams */
                for (int i = 0; i < got; i++)
                        if (receive_one(run, st, run->bufs.buf[i], msgs[i].msg_len, now))
                                return run->rc;
                if (got > 0)
                        continue;
                int wait_ms = receive_wait_ms(run, st, now);
                if (st->going && wait_ms == 0) {
                        if (!st->ending) {
                                run->out->udp_ended_by_silence = true;
                                run->out->end_ns = st->last_data_ns;
                        }
                        return 0;
                }
                struct pollfd pfd = {.fd = run->fd, .events = POLLIN};
                if (poll(&pfd, 1, wait_ms) < 0 && errno != EINTR)
                        return ds_fail(&run->err, -errno, "poll");
        }
        return 0;
}

static void *receive_thread(void *arg)
{
        struct udp_run *run = arg;
        struct receive_state *st = calloc(1, sizeof *st);

        if (!st) {
                run->rc = ds_fail(&run->err, -ENOMEM, "out of memory");
        } else {
                ds_seqtrack_init(&st->seq);
                run->rc = receive_loop(run, st);
                if (run->out->end_ns == 0)
                        run->out->end_ns = st->last_data_ns ? st->last_data_ns : ds_now_ns();
                run->out->udp_expected = st->expected;
                if (run->rc == 0 && run->out->udp_datagrams == 0) {
                        ds_fail(&run->err, 0, "%s",
                                st->going ? "the run ended without any data"
                                          : "stopped before any data arrived");
                        run->rc = -ENODATA;
                }
                ds_live_fault(run->live, DS_FAULT_LOST, ds_seqtrack_lost(&st->seq, st->expected));
                free(st);
        }
        supervise_worker_done();
        return NULL;
}

/* ---- both ---- */

static int run_thread(struct udp_run *run, void *(*body)(void *), struct ds_error *err)
{
        pthread_t thread;
        int rc = supervise_spawn(&thread, body, run);

        if (rc != 0)
                return ds_fail(err, rc, "pthread_create");
        supervise_until_done(-1);
        pthread_join(thread, NULL);
        run->out->buf_addr = (uintptr_t)run->bufs.buf[0];
        ttcp_buffers_destroy(&run->bufs);
        if (close(run->fd) != 0 && run->rc == 0)
                run->rc = ds_fail(&run->err, -errno, "close");
        if (run->rc != 0)
                *err = run->err;
        return run->rc;
}

int ttcp_udp_transmit(const struct ttcp_options *opt, struct ds_live_segment *live,
                      struct ttcp_outcome *out, struct ds_error *err)
{
        struct udp_run run = {.opt = opt, .live = live, .out = out};
        int rc;

        run.fd = ds_net_connect(opt->host, opt->port, SOCK_DGRAM, 0, err);
        if (run.fd < 0)
                return run.fd;
        ttcp_say(opt, "socket");
        rc = opt->sockbuf ? ds_net_set_buffers(run.fd, opt->sockbuf, err) : 0;
        if (rc == 0)
                rc = ttcp_buffers_create(&run.bufs, opt, 1, opt->buf_len, err);
        if (rc != 0) {
                close(run.fd);
                return rc;
        }
        ds_net_peer_name(run.fd, out->peer, sizeof out->peer);
        out->streams = 1;
        send_sentinels(&run, 1, false);
        ttcp_mark_start(out, ds_now_ns());
        supervise_begin(out->start_ns, opt->duration_s, NULL, NULL);
        return run_thread(&run, transmit_thread, err);
}

int ttcp_udp_receive(const struct ttcp_options *opt, struct ds_live_segment *live,
                     struct ttcp_outcome *out, struct ds_error *err)
{
        struct udp_run run = {.opt = opt, .live = live, .out = out};
        int wish = opt->sockbuf ? opt->sockbuf : RECV_BUFFER_WISH;
        int rc;

        run.fd = ds_net_listen(NULL, opt->port, SOCK_DGRAM, err);
        if (run.fd < 0)
                return run.fd;
        ttcp_say(opt, "socket");
        /* A deep queue absorbs the sender's bursts; as root, past net.core.rmem_max. */
        if (setsockopt(run.fd, SOL_SOCKET, SO_RCVBUFFORCE, &wish, sizeof wish) != 0)
                (void)setsockopt(run.fd, SOL_SOCKET, SO_RCVBUF, &wish, sizeof wish);
        rc = ttcp_buffers_create(&run.bufs, opt, BATCH, TTCP_UDP_MAX_DGRAM, err);
        if (rc != 0) {
                close(run.fd);
                return rc;
        }
        out->streams = 1;
        supervise_begin(ds_now_ns(), 0, NULL, NULL);
        return run_thread(&run, receive_thread, err);
}
