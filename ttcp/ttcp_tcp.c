/* ttcp over TCP: a plain byte stream, as classic ttcp wrote it, so nc, socat and a
 * classic ttcp are peers. One thread per stream; the calling thread supervises (interval
 * reports, -w, Ctrl-C) and, on the receiver, accepts the further streams of -P. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <dragstrip/net.h>
#include <dragstrip/stop.h>

#include "ttcp.h"
#include "ttcp_supervise.h"

#ifndef SO_EE_ORIGIN_ZEROCOPY
#define SO_EE_ORIGIN_ZEROCOPY 5
#endif
#ifndef SO_EE_CODE_ZEROCOPY_COPIED
#define SO_EE_CODE_ZEROCOPY_COPIED 1
#endif

/* With --zerocopy from stdin a buffer is reused only once the kernel has released it;
 * this many in flight keep the socket busy meanwhile. */
#define ZEROCOPY_BUFFERS 8

struct tcp_stream {
        const struct ttcp_options *opt;
        struct ds_live_segment *live;
        struct ds_live_slot *slot; /* this stream's published counters, or NULL */
        int fd;
        struct ttcp_buffers bufs;
        char peer[96];
        uint64_t bytes;
        uint64_t calls;
        uint64_t end_ns;
        uint64_t touch_sum;
        uint64_t zc_sent;   /* MSG_ZEROCOPY sends that returned bytes: the notification ids */
        uint64_t zc_done;   /* ids the kernel has released */
        uint64_t zc_copied; /* of those, ids the kernel copied after all */
        bool zc_active;     /* still asking for MSG_ZEROCOPY */
        int rc;
        struct ds_error err;
        pthread_t thread;
};

static int set_int_option(int fd, int level, int name, int value, const char *what,
                          struct ds_error *err)
{
        if (setsockopt(fd, level, name, &value, sizeof value) != 0)
                return ds_fail(err, -errno, "setsockopt %s", what);
        return 0;
}

static int set_timeout_option(int fd, int name, double seconds, struct ds_error *err)
{
        struct timeval tv = {.tv_sec = (time_t)seconds,
                             .tv_usec = (suseconds_t)((seconds - (time_t)seconds) * 1e6)};

        if (setsockopt(fd, SOL_SOCKET, name, &tv, sizeof tv) != 0)
                return ds_fail(err, -errno, "setsockopt %s",
                               name == SO_SNDTIMEO ? "SO_SNDTIMEO" : "SO_RCVTIMEO");
        return 0;
}

/* The per-connection options of both ends: -b, -D, -d, -R, --zerocopy and the timeout
 * that turns a silent peer into an error instead of a wait (none: 0 blocks forever). */
static int tune_socket(int fd, const struct ttcp_options *opt, struct ds_error *err)
{
        int rc = 0;

        if (opt->sockbuf)
                rc = ds_net_set_buffers(fd, opt->sockbuf, err);
        if (rc == 0 && opt->nodelay)
                rc = set_int_option(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY", err);
        if (rc == 0 && opt->so_debug && set_int_option(fd, SOL_SOCKET, SO_DEBUG, 1, "", NULL))
                fprintf(stderr, "ttcp: SO_DEBUG refused (it needs CAP_NET_ADMIN); going on\n");
        if (rc == 0 && opt->rate_bps > 0) {
                unsigned long long per_stream = opt->rate_bps / 8 / opt->streams;
                unsigned int capped = per_stream > UINT32_MAX ? UINT32_MAX : (unsigned)per_stream;

                if (setsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &capped, sizeof capped) != 0)
                        rc = ds_fail(err, -errno, "setsockopt SO_MAX_PACING_RATE");
        }
        if (rc == 0 && opt->zerocopy &&
            set_int_option(fd, SOL_SOCKET, SO_ZEROCOPY, 1, "SO_ZEROCOPY", NULL) != 0)
                rc = ds_fail(err, -errno, "--zerocopy: this kernel refuses SO_ZEROCOPY");
        /* Wake a sink once per full buffer, not per segment: on loopback this took 1 MiB
         * reads from 38 to about 50 Gbit/s and cut the receiver's CPU by a third. Less
         * than a buffer still arrives at EOF or when --timeout passes. A receiver writing
         * stdout hands bytes on as they come, as classic ttcp did. */
        if (rc == 0 && !opt->transmit && opt->sink_mode)
                rc = set_int_option(fd, SOL_SOCKET, SO_RCVLOWAT,
                                    opt->buf_len > INT_MAX ? INT_MAX : (int)opt->buf_len,
                                    "SO_RCVLOWAT", err);
        if (rc == 0)
                rc = set_timeout_option(fd, opt->transmit ? SO_SNDTIMEO : SO_RCVTIMEO,
                                        opt->timeout_s, err);
        return rc;
}

/* Reads the kernel's zero-copy notifications; with wait, blocks until one arrives (or
 * the timeout passes). Each notification releases a range of send ids. */
static int reap_zerocopy(struct tcp_stream *s, bool wait)
{
        char control[256];

        for (;;) {
                struct msghdr msg = {.msg_control = control, .msg_controllen = sizeof control};
                struct pollfd pfd = {.fd = s->fd, .events = 0};
                struct cmsghdr *cm;

                if (recvmsg(s->fd, &msg, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) {
                        if (errno != EAGAIN && errno != EINTR)
                                return ds_fail(&s->err, -errno, "reading zero-copy completions");
                        if (!wait)
                                return 0;
                        int ready = poll(&pfd, 1, ttcp_timeout_ms(s->opt));
                        if (ready == 0)
                                return ds_fail(&s->err, -ETIMEDOUT,
                                               "the kernel held zero-copy buffers for %.0f s",
                                               s->opt->timeout_s);
                        if (ready < 0 && errno != EINTR)
                                return ds_fail(&s->err, -errno, "poll");
                        continue;
                }
                for (cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
                        struct sock_extended_err ee;

                        memcpy(&ee, CMSG_DATA(cm), sizeof ee);
                        if (ee.ee_origin != SO_EE_ORIGIN_ZEROCOPY)
                                continue;
                        /* TCP reports ranges in order, so a running total is enough. */
                        uint64_t released = (uint64_t)(ee.ee_data - ee.ee_info) + 1;
                        s->zc_done += released;
                        /* The kernel copied anyway (loopback and veth always do): as
                         * its documentation advises, stop asking, since the pinning and
                         * the notifications then only cost. */
                        if (ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED) {
                                s->zc_copied += released;
                                s->zc_active = false;
                        }
                }
                wait = false;
        }
}

/* Sends all of buf, however many send() calls it takes. */
static int send_all(struct tcp_stream *s, const unsigned char *buf, size_t len)
{
        int flags = s->zc_active ? MSG_ZEROCOPY : 0;

        while (len > 0) {
                ssize_t n = send(s->fd, buf, len, flags);

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (ds_stopping()) /* a signal shut the stream: what went is the report */
                                return 0;
                        if (errno == ENOBUFS && flags) {
                                /* Too many pages pinned: wait for the kernel to let go. */
                                int rc = reap_zerocopy(s, true);
                                if (rc != 0)
                                        return rc;
                                continue;
                        }
                        if (errno == EAGAIN)
                                return ds_fail(&s->err, -ETIMEDOUT, "%s stopped reading for %.0f s",
                                               s->peer, s->opt->timeout_s);
                        if (errno == EPIPE || errno == ECONNRESET)
                                return ds_fail(&s->err, -errno,
                                               "%s closed the connection after %llu bytes", s->peer,
                                               (unsigned long long)s->bytes);
                        return ds_fail(&s->err, -errno, "send to %s", s->peer);
                }
                s->zc_sent += flags ? 1 : 0;
                s->calls++;
                s->bytes += (uint64_t)n;
                ds_live_stream_add(s->live, s->slot, 1, (uint64_t)n);
                buf += n;
                len -= (size_t)n;
        }
        return 0;
}

static bool transmit_more(const struct tcp_stream *s, uint64_t buffers_sent)
{
        if (atomic_load_explicit(&ttcp_stop, memory_order_relaxed))
                return false;
        return s->opt->duration_s > 0 || buffers_sent < s->opt->nbuf;
}

/* -s: the same pattern buffer again and again. The pattern never changes, so with
 * --zerocopy the pages may stay in flight while the next send goes out. */
static int transmit_pattern(struct tcp_stream *s)
{
        uint64_t sent = 0;

        while (transmit_more(s, sent)) {
                int rc = send_all(s, s->bufs.buf[0], s->opt->buf_len);
                if (rc == 0 && s->zc_active && (sent & 15) == 0)
                        rc = reap_zerocopy(s, false);
                if (rc != 0)
                        return rc;
                sent++;
        }
        return 0;
}

/* stdin to the network. With --zerocopy a buffer is refilled only after the kernel has
 * released the send that last used it. */
static int transmit_stdin(struct tcp_stream *s)
{
        uint64_t sent = 0;
        uint64_t buffer_last_id[ZEROCOPY_BUFFERS] = {0};

        while (transmit_more(s, 0)) {
                unsigned slot = (unsigned)(sent % s->bufs.count);
                unsigned char *buf = s->bufs.buf[slot];
                ssize_t got;

                while (s->opt->zerocopy && s->zc_done < buffer_last_id[slot]) {
                        int rc = reap_zerocopy(s, true);
                        if (rc != 0)
                                return rc;
                }
                got = read(STDIN_FILENO, buf, s->opt->buf_len);
                if (got < 0 && errno == EINTR)
                        continue;
                if (got < 0)
                        return ds_fail(&s->err, -errno, "reading stdin");
                if (got == 0)
                        return 0;
                int rc = send_all(s, buf, (size_t)got);
                if (rc != 0)
                        return rc;
                buffer_last_id[slot] = s->zc_sent;
                sent++;
        }
        return 0;
}

static void *transmit_thread(void *arg)
{
        struct tcp_stream *s = arg;

        s->rc = s->opt->sink_mode ? transmit_pattern(s) : transmit_stdin(s);
        s->end_ns = ds_now_ns();
        if (s->rc == 0 && s->opt->zerocopy)
                while (s->rc == 0 && s->zc_done < s->zc_sent)
                        s->rc = reap_zerocopy(s, true);
        supervise_worker_done();
        return NULL;
}

static int write_all(int fd, const unsigned char *buf, size_t len, struct ds_error *err)
{
        while (len > 0) {
                ssize_t n = write(fd, buf, len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return ds_fail(err, -errno, "writing stdout");
                buf += n;
                len -= (size_t)n;
        }
        return 0;
}

static int receive_failed(struct tcp_stream *s, int neg_errno)
{
        /* Stopped by a signal: the shutdown that woke this read (a reset, with data still
         * unread) ends the stream as the peer's close would; what came is the report. */
        if (atomic_load(&ttcp_stop))
                return 0;
        if (neg_errno == -EAGAIN)
                return ds_fail(&s->err, -ETIMEDOUT, "no data from %s for %.0f s", s->peer,
                               s->opt->timeout_s);
        return ds_fail(&s->err, neg_errno, "receiving from %s", s->peer);
}

static int receive_read(struct tcp_stream *s)
{
        unsigned char *buf = s->bufs.buf[0];

        for (;;) {
                ssize_t n = read(s->fd, buf, s->opt->buf_len);

                if (n < 0 && errno == EINTR && !atomic_load(&ttcp_stop))
                        continue;
                if (n < 0)
                        return receive_failed(s, -errno);
                s->calls++;
                if (n == 0)
                        return 0;
                s->bytes += (uint64_t)n;
                ds_live_stream_add(s->live, s->slot, 1, (uint64_t)n);
                if (s->opt->touch)
                        for (ssize_t i = 0; i < n; i++)
                                s->touch_sum += buf[i];
                if (!s->opt->sink_mode) {
                        int rc = write_all(STDOUT_FILENO, buf, (size_t)n, &s->err);
                        if (rc != 0)
                                return rc;
                }
        }
}

/* Socket to a pipe to the destination: the payload never enters user space. */
static int receive_splice(struct tcp_stream *s)
{
        int pipe_fd[2], out_fd, rc = 0;

        if (pipe2(pipe_fd, O_CLOEXEC) != 0)
                return ds_fail(&s->err, -errno, "pipe");
        /* A pipe as big as one read keeps the splice calls as few as the reads would be. */
        (void)fcntl(pipe_fd[1], F_SETPIPE_SZ, (int)s->opt->buf_len);
        out_fd = s->opt->sink_mode ? open("/dev/null", O_WRONLY | O_CLOEXEC) : STDOUT_FILENO;
        if (out_fd < 0) {
                rc = ds_fail(&s->err, -errno, "open /dev/null");
                goto out;
        }
        for (;;) {
                ssize_t n = splice(s->fd, NULL, pipe_fd[1], NULL, s->opt->buf_len,
                                   SPLICE_F_MOVE | SPLICE_F_MORE);
                if (n < 0 && errno == EINTR && !atomic_load(&ttcp_stop))
                        continue;
                if (n < 0) {
                        rc = receive_failed(s, -errno);
                        break;
                }
                s->calls++;
                if (n == 0)
                        break;
                s->bytes += (uint64_t)n;
                ds_live_stream_add(s->live, s->slot, 1, (uint64_t)n);
                while (n > 0) {
                        ssize_t moved = splice(pipe_fd[0], NULL, out_fd, NULL, (size_t)n,
                                               SPLICE_F_MOVE | SPLICE_F_MORE);
                        if (moved < 0 && errno == EINTR)
                                continue;
                        if (moved <= 0) {
                                rc = ds_fail(&s->err, moved < 0 ? -errno : -EIO, "splicing to %s",
                                             s->opt->sink_mode ? "/dev/null" : "stdout");
                                goto out;
                        }
                        n -= moved;
                }
        }
out:
        if (out_fd >= 0 && out_fd != STDOUT_FILENO)
                close(out_fd);
        close(pipe_fd[0]);
        close(pipe_fd[1]);
        return rc;
}

static void *receive_thread(void *arg)
{
        struct tcp_stream *s = arg;

        s->rc = s->opt->splice ? receive_splice(s) : receive_read(s);
        s->end_ns = ds_now_ns();
        supervise_worker_done();
        return NULL;
}

static struct tcp_stream *stream_new(const struct ttcp_options *opt, struct ds_live_segment *live,
                                     int fd, struct ds_error *err)
{
        struct tcp_stream *s = calloc(1, sizeof *s);
        unsigned nbufs = opt->zerocopy && !opt->sink_mode ? ZEROCOPY_BUFFERS : 1;

        if (!s) {
                ds_fail(err, -ENOMEM, "out of memory");
                return NULL;
        }
        s->opt = opt;
        s->live = live;
        s->fd = fd;
        s->zc_active = opt->zerocopy;
        if (tune_socket(fd, opt, err) != 0 ||
            ttcp_buffers_create(&s->bufs, opt, nbufs, opt->buf_len, err) != 0) {
                free(s);
                return NULL;
        }
        return s;
}

static void stream_free(struct tcp_stream *s)
{
        ds_live_slot_close(s->slot);
        if (close(s->fd) != 0 && s->rc == 0)
                s->rc = ds_fail(&s->err, -errno, "close");
        ttcp_buffers_destroy(&s->bufs);
        free(s);
}

static int stream_start(struct tcp_stream *s, void *(*body)(void *), struct ds_error *err)
{
        int rc = supervise_spawn(&s->thread, body, s);

        if (rc != 0)
                return ds_fail(err, rc, "pthread_create");
        return 0;
}

struct stream_set {
        struct tcp_stream **streams;
        unsigned count;
};

/* A receiver stopped by Ctrl-C ends its streams as if the peer had finished. */
static void shut_streams(void *ctx)
{
        struct stream_set *set = ctx;

        for (unsigned i = 0; i < set->count; i++)
                shutdown(set->streams[i]->fd, SHUT_RDWR);
}

/* A transmitter stopped by a signal (not by -w) may be blocked in send() to a receiver
 * that stopped reading: shutting the streams wakes it. */
static void shut_on_signal(void *ctx)
{
        if (ds_stopping())
                shut_streams(ctx);
}

/* Joins every stream, sums them into out, and returns the first failure. */
static int streams_finish(struct tcp_stream **streams, unsigned count, struct ttcp_outcome *out,
                          struct ds_error *err)
{
        int rc = 0;

        for (unsigned i = 0; i < count; i++) {
                struct tcp_stream *s = streams[i];

                pthread_join(s->thread, NULL);
                out->bytes += s->bytes;
                out->io_calls += s->calls;
                out->touch_sum += s->touch_sum;
                out->zc_completions += s->zc_done;
                out->zc_copied += s->zc_copied;
                if (!out->buf_addr)
                        out->buf_addr = (uintptr_t)s->bufs.buf[0];
                if (s->end_ns > out->end_ns)
                        out->end_ns = s->end_ns;
                if (rc == 0 && s->rc != 0) {
                        *err = s->err;
                        rc = s->rc;
                }
                stream_free(s);
        }
        out->streams = count;
        return rc;
}

int ttcp_tcp_transmit(const struct ttcp_options *opt, struct ds_live_segment *live,
                      struct ttcp_outcome *out, struct ds_error *err)
{
        struct tcp_stream *streams[TTCP_MAX_STREAMS];
        unsigned count = 0;
        int connect_ms = opt->timeout_s > 0 ? ttcp_timeout_ms(opt) : TTCP_CONNECT_TIMEOUT_S * 1000;
        int rc = 0;

        ttcp_say(opt, "socket");
        /* Every stream is connected before any sends, so the receiver sees them all. */
        for (; count < opt->streams; count++) {
                int fd = ds_net_connect(opt->host, opt->port, SOCK_STREAM, connect_ms, err);
                if (fd < 0) {
                        rc = fd;
                        break;
                }
                streams[count] = stream_new(opt, live, fd, err);
                if (!streams[count]) {
                        close(fd);
                        rc = -EIO;
                        break;
                }
                snprintf(streams[count]->peer, sizeof streams[count]->peer, "%s", opt->host);
                streams[count]->slot = ds_live_slot_open(live, DS_SLOT_STREAM, count, opt->host);
        }
        if (rc != 0) {
                while (count > 0)
                        stream_free(streams[--count]);
                return rc;
        }
        ttcp_say(opt, "connect");
        ds_net_peer_name(streams[0]->fd, out->peer, sizeof out->peer);
        ttcp_mark_start(out, ds_now_ns());
        struct stream_set set = {.streams = streams, .count = count};
        supervise_begin(out->start_ns, opt->duration_s, shut_on_signal, &set);
        for (unsigned i = 0; i < count && rc == 0; i++)
                rc = stream_start(streams[i], transmit_thread, err);
        if (rc != 0)
                atomic_store(&ttcp_stop, true);
        supervise_until_done(-1);
        int joined = streams_finish(streams, count, out, err);
        return rc != 0 ? rc : joined;
}

int ttcp_tcp_receive(const struct ttcp_options *opt, struct ds_live_segment *live,
                     struct ttcp_outcome *out, struct ds_error *err)
{
        struct tcp_stream *streams[TTCP_MAX_STREAMS];
        struct stream_set set = {.streams = streams};
        unsigned count = 0;
        int listen_fd, rc = 0;

        listen_fd = ds_net_listen(NULL, opt->port, SOCK_STREAM, err);
        if (listen_fd < 0)
                return listen_fd;
        ttcp_say(opt, "socket");
        /* Only -s takes more than one stream: stdout is a single ordered stream. */
        unsigned most = opt->sink_mode ? TTCP_MAX_STREAMS : 1;
        int listen_for_more = listen_fd;

        do {
                char peer[96];
                int fd = ds_net_accept(listen_fd, count == 0 ? -1 : 0, peer, sizeof peer, err);

                if (fd == -ETIMEDOUT)
                        break;
                if (fd < 0) {
                        rc = fd;
                        break;
                }
                struct tcp_stream *s = stream_new(opt, live, fd, err);
                if (!s) {
                        close(fd);
                        rc = -EIO;
                        break;
                }
                snprintf(s->peer, sizeof s->peer, "%s", peer);
                s->slot = ds_live_slot_open(live, DS_SLOT_STREAM, count, peer);
                if (count == 0) {
                        ttcp_say(opt, "accept from %s", peer);
                        snprintf(out->peer, sizeof out->peer, "%s", peer);
                        ttcp_mark_start(out, ds_now_ns());
                        supervise_begin(out->start_ns, 0, shut_streams, &set);
                }
                streams[count++] = s;
                set.count = count;
                rc = stream_start(s, receive_thread, err);
                if (rc != 0)
                        break;
                if (count == most)
                        listen_for_more = -1;
                /* Streams that arrive while others still run join this run. */
        } while (supervise_until_done(listen_for_more) && count < most);
        if (rc != 0) {
                atomic_store(&ttcp_stop, true);
                shut_streams(&set);
        }
        supervise_until_done(-1);
        if (close(listen_fd) != 0 && rc == 0)
                rc = ds_fail(err, -errno, "close");
        int joined = streams_finish(streams, count, out, err);
        if (rc == 0 && joined == 0 && out->bytes == 0)
                return ds_fail(err, 0,
                               atomic_load(&ttcp_stop)
                                   ? "stopped before %s sent any data"
                                   : "%s connected and closed without sending data",
                               out->peer),
                       -ENODATA;
        return rc != 0 ? rc : joined;
}
