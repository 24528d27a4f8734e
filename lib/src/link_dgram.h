/* What the datagram links (udp, raw) share: turning received frames into messages
 * (whole in place, trains reassembled, control copied out) and cutting messages into
 * frames. Private to lib/: no ds_ prefix, which only the installed API carries. */
#ifndef DRAGSTRIP_LINK_DGRAM_H
#define DRAGSTRIP_LINK_DGRAM_H

#include "link_priv.h"

#include <stdint.h>
#include <stddef.h>

struct ds_pool;
struct ds_error;

struct dgram {
        struct ds_link *link; /* whose stats are counted */
        uint32_t session;     /* frames of any other session are rejected */
        uint32_t msg_size;    /* negotiated; 0 until prepare (data is then refused) */
        struct ctl_ring ctl;
        /* reassembly of one train at a time (frames of a stream arrive in order) */
        struct ds_pool *train_pool;
        uint8_t *train_buf;
        uint64_t train_seq;
        uint32_t train_next; /* offset the next fragment must have */
        bool train_active;   /* train_buf holds the first train_next bytes of train_seq */
        bool train_skip;     /* train_seq lost a fragment: its rest is ignored */
};

enum dgram_verdict {
        DGRAM_INPLACE, /* msg points into the frame: hold the frame until release */
        DGRAM_OWNED,   /* msg is a control copy or a reassembled train: frame is free */
        DGRAM_NONE,    /* consumed (a fragment, or rejected and counted): frame is free */
        DGRAM_FULL,    /* no room for it yet: keep the frame and stop the batch */
};

/* Makes the reassembly pool for messages of msg_size. Returns 0 or a negative errno. */
int dgram_prepare(struct dgram *d, uint32_t msg_size, struct ds_error *err);
void dgram_free(struct dgram *d);

/* Parses one received frame (len bytes, starting at the wire header). */
enum dgram_verdict dgram_take(struct dgram *d, const uint8_t *frame, size_t len,
                              struct ds_msg *msg);

/* Gives back a message that dgram_take returned as DGRAM_OWNED. */
void dgram_release(struct dgram *d, const struct ds_msg *msg);

#define DGRAM_BATCH_MAX 64

/* How a datagram link's frames go out: each is the prefix (raw: the Ethernet header;
 * none for udp), a wire header and its payload, sent by sendmmsg() on fd. */
struct dgram_tx {
        int fd;
        const uint8_t *prefix;
        size_t prefix_len;
        uint32_t frag_max; /* payload bytes per frame */
        unsigned batch;    /* frames per sendmmsg(), 1 to DGRAM_BATCH_MAX */
        /* What sendmmsg()'s errno means for this link: 0 to try again (having waited if
         * need be), or a negative errno with err filled (-EPIPE: the peer is gone). */
        int (*send_failed)(struct ds_link *link, int errnum, struct ds_error *err);
};

/* Sends n data messages as frames, a message longer than frag_max as a train, in batches
 * of tx->batch. Returns n, or a negative errno from tx->send_failed. */
int dgram_send(struct dgram *d, const struct dgram_tx *tx, const struct ds_msg *msgs, unsigned n,
               struct ds_error *err);

/* Sends one control frame of len payload bytes (a payload of ds_wire_ctl_encode). */
int dgram_send_ctl(struct dgram *d, const struct dgram_tx *tx, uint8_t type, const void *payload,
                   size_t len, struct ds_error *err);

/* A random session number for a new sending link. */
uint32_t dgram_session(void);

#endif
