/* The transfer pipeline: moves a file's bytes between a file and one or more data
 * connections, MODE S (the plain stream, one connection, the end of the data is the
 * connection's close) or MODE E (blocks with offsets over 1..16 connections, modee.h).
 *
 * Sending, a disk thread reads the file into pool buffers (page-aligned, block bytes each)
 * and hands them by reference through a queue to the sending threads (one per
 * connection), which hand them back when sent: the disk and the network overlap and
 * nothing copies the data in user space. Where the file is a plain
 * descriptor and MODE S sends, sendfile() may replace the read and the send (it measured
 * faster: see xfer.c). Receiving is the mirror: receiving threads fill pool buffers, a
 * disk thread writes each at its offset. Socket buffers are the caller's (xftp_data_opts).
 *
 * The file is reached through a small table of operations so that a store can supply its
 * own (stripe/'s striped files); xftp_xfile_plain() wraps an ordinary descriptor. */
#ifndef XFTP_XFER_H
#define XFTP_XFER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct ds_pace;
struct ds_pool;

struct ds_error;
struct ds_live_segment;
struct xftp_xfile;
struct xftp_conn;

#define XFTP_XFER_BLOCK (4u << 20) /* default bytes per buffer and per MODE E block */

/* How often a receiver records its resume point (xftpd's upload mark, xftp's partial's
 * user.xftp.whole), each time after an fdatasync of the bytes below it, so that after a
 * crash of the machine the point never names bytes the disk did not keep (they would read
 * back as zeros, and a resumed transfer would go on past them to a whole-looking file). A
 * killed receiver loses at most this much, sent again when the transfer resumes. The first
 * point comes this long into a transfer: a tree's small file makes none. */
#define XFTP_RESUME_POINT_EVERY_NS 1000000000ull

/* What the pipeline needs of a file. The pipeline calls one file's operations from one
 * thread at a time (its disk thread); buffers are page-aligned and, but for the last piece
 * of a file, lengths and offsets are multiples of the block size. */
struct xftp_xfile_ops {
        /* Reads up to len bytes at offset into buf. Returns the bytes read, fewer than len
         * only at the end of the file (0 at or past it), or a negative errno. */
        ssize_t (*read_at)(struct xftp_xfile *file, void *buf, size_t len, uint64_t offset);
        /* Writes all len bytes at offset. Returns 0 or a negative errno (-ENOSPC: disk full). */
        int (*write_at)(struct xftp_xfile *file, const void *buf, size_t len, uint64_t offset);
        /* The file's size now. Returns 0 or a negative errno. */
        int (*size)(struct xftp_xfile *file, uint64_t *size);
        /* Makes what was written durable (fsync). Returns 0 or a negative errno. */
        int (*sync)(struct xftp_xfile *file);
        /* Optional, both or neither: start_io starts what read_at (write false) or
         * write_at would do and returns a ticket, or a negative errno; finish_io waits for
         * that ticket and returns what read_at or write_at would have. With them the
         * pipeline keeps several pieces in flight, so a striped file's disks stay busy
         * while the last piece is checked and handed on; tickets finish in the order they
         * started. */
        int (*start_io)(struct xftp_xfile *file, bool write, void *buf, size_t len,
                        uint64_t offset);
        ssize_t (*finish_io)(struct xftp_xfile *file, int ticket);
};

/* A file as the pipeline sees it. A store fills ops and impl; fd is a plain descriptor of
 * the same bytes when there is one (then sendfile can serve), else -1. */
struct xftp_xfile {
        const struct xftp_xfile_ops *ops;
        void *impl;
        int fd;
        int direct_fd; /* plain files: an O_DIRECT twin of fd, -1, or not opened yet (private
                        * to xfile.c) */
};

enum xftp_xfile_flags {
        /* Read and write aligned pieces with O_DIRECT where the file system takes it (a
         * second descriptor; the tail goes through fd). It paid for writes and not for
         * reads: the kernel's readahead beat 4 MiB O_DIRECT reads one at a time (xfile.c). */
        XFTP_XFILE_DIRECT = 1u << 0,
};

/* Wraps the plain descriptor fd (the caller keeps owning it: opened with the access it
 * needs, O_RDONLY to send, O_WRONLY or O_RDWR to receive). With XFTP_XFILE_DIRECT it also
 * opens an O_DIRECT descriptor of the same file, at the first piece that can go through
 * it, silently doing without where refused (tmpfs). Returns 0 or a negative errno with err
 * filled. */
int xftp_xfile_plain(struct xftp_xfile *file, int fd, unsigned flags, struct ds_error *err);
/* Closes what xftp_xfile_plain opened (not fd). */
void xftp_xfile_plain_close(struct xftp_xfile *file);

enum xftp_xfer_mode {
        XFTP_XFER_STREAM, /* MODE S: exactly one connection */
        XFTP_XFER_BLOCKS, /* MODE E: 1..XFTP_MODEE_MAX_STREAMS connections */
};

enum xftp_xfer_flags {
        XFTP_XFER_NO_SENDFILE = 1u << 0, /* always read into pool buffers and send() them */
        XFTP_XFER_KEEP = 1u << 1,        /* MODE E, sending: the connections stay open after this
                                          * transfer (EOD without the CLOSE bit), for the next one */
};

struct xftp_xfer_opts {
        size_t block;      /* bytes per buffer and per MODE E block; 0: XFTP_XFER_BLOCK */
        unsigned depth;    /* buffers in flight between disk and network; 0: 4 */
        uint64_t offset;   /* first byte of the file to move (REST, RANG's start) */
        uint64_t length;   /* bytes to move from offset; UINT64_MAX: sending, to the end of the
                            * file; receiving, until the sender ends */
        uint64_t limit;    /* receiving: no byte at or beyond this offset is accepted (the size
                            * announced, a size limit); UINT64_MAX: none */
        int idle_ms;       /* a transfer that moves nothing for this long fails with
                            * -ETIMEDOUT; 0: no deadline */
        unsigned flags;    /* enum xftp_xfer_flags */
        atomic_bool *stop; /* may be NULL; when set the transfer ends with -EINTR */
        struct ds_live_segment *live; /* may be NULL; bytes and blocks are added as the network
                                       * moves them, to the totals and to a slot per data
                                       * connection (named after its peer) */
        /* May be NULL (then pacing costs nothing): each buffer or block the network moves is
         * booked on this schedule, shared with every transfer that paces against it, and
         * its thread waits until the bytes are due (-R). */
        struct ds_pace *pace;
        /* Receiving, may be NULL: called from the disk thread each time the contiguous range
         * written from offset grows, with its new end, so a caller can record how far a
         * MODE E file is whole (the resume point) before the transfer ends. A negative errno
         * returned (the bytes could not be made durable) ends the transfer with it, a
         * failure of the file's. */
        int (*on_prefix)(uint64_t prefix_end, void *ctx);
        void *prefix_ctx;
        /* May be NULL: buffers lent for this transfer, used when they are as many as its
         * depth and as large as its block, else it maps its own. A caller moving many small
         * files lends one pool to them all instead of mapping and touching one per file. */
        struct ds_pool *pool;
        /* May be NULL: called after each slice of a wait and each socket call that moved
         * bytes, in the caller's own thread (never in the pipeline's others), for a caller
         * that watches something meanwhile with no thread of its own (xftpd, its control
         * connection for an ABOR); it may set *stop. */
        void (*on_slice)(void *ctx);
        void *slice_ctx;
};

struct xftp_xfer_result {
        uint64_t bytes;      /* file bytes moved (MODE E headers not counted): sending, those
                              * handed to the connections, not those read ahead of them */
        uint64_t prefix_end; /* receiving: end of the contiguous range written from offset */
        uint64_t blocks;     /* buffers (MODE S) or blocks (MODE E) moved */
        double seconds;      /* from the first byte's wait to the last write or send */
        double mb_per_s;     /* bytes / seconds / 10^6 */
        bool sendfile;       /* the data went by sendfile() */
        bool file_failed;    /* the transfer failed first on the file (a read, a write, or
                              * making the bytes durable), not on the network */
        bool kept;           /* MODE E, ended well, and no EOD said CLOSE (receiving) or
                              * XFTP_XFER_KEEP was asked (sending): the connections may carry
                              * the next transfer, GridFTP's cached data channels */
};

/* The buffer bytes xftp_xfer_send (sending) or xftp_xfer_recv would map and touch for file
 * over n connections with opts: what a server takes from its memory budget before the
 * transfer (0 where sendfile moves the data). */
uint64_t xftp_xfer_buffer_bytes(const struct xftp_xfile *file, enum xftp_xfer_mode mode, unsigned n,
                                const struct xftp_xfer_opts *opts, bool sending);

/* Sends the file's range over socks[0..n-1]. MODE S: n is 1 and the caller closes the
 * socket afterwards (that close is the end of the data). MODE E: the blocks are spread over
 * the connections in offset order, each connection ends with EOD and the first also
 * carries the EOF naming n. Returns 0, or a negative errno with err filled (-EINTR on stop,
 * -ETIMEDOUT idle, -EPIPE/-ECONNRESET the peer went away, a read error of the file); result
 * is filled either way. */
int xftp_xfer_send(struct xftp_xfile *file, enum xftp_xfer_mode mode, const int *socks, unsigned n,
                   const struct xftp_xfer_opts *opts, struct xftp_xfer_result *result,
                   struct ds_error *err);

/* Receives into the file from socks[0..n-1], writing at opts->offset onward (MODE S) or at
 * each block's offset (MODE E, every block checked against [offset, limit) before a byte of
 * it is written). MODE S ends when the peer closes; MODE E when the EOF and every EOD have
 * come, and a connection closing before its EOD is -EPIPE. The file is not synced: the
 * caller syncs and commits. Returns 0 or a negative errno with err filled (-EPROTO a
 * malformed block, -EFBIG data beyond limit, -ENOSPC disk full); result is filled either
 * way, prefix_end saying how much of the file is whole. */
int xftp_xfer_recv(struct xftp_xfile *file, enum xftp_xfer_mode mode, const int *socks, unsigned n,
                   const struct xftp_xfer_opts *opts, struct xftp_xfer_result *result,
                   struct ds_error *err);

/* The same over connections of any backend (xconn.h), which stay the caller's to close.
 * sendfile serves only where the connection's backend has it. xftp_xfer_send and
 * xftp_xfer_recv are these over plain sockets. */
int xftp_xfer_send_conns(struct xftp_xfile *file, enum xftp_xfer_mode mode, struct xftp_conn *conns,
                         unsigned n, const struct xftp_xfer_opts *opts,
                         struct xftp_xfer_result *result, struct ds_error *err);
int xftp_xfer_recv_conns(struct xftp_xfile *file, enum xftp_xfer_mode mode, struct xftp_conn *conns,
                         unsigned n, const struct xftp_xfer_opts *opts,
                         struct xftp_xfer_result *result, struct ds_error *err);

#endif
