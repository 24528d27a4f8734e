/* The control exchange every link shares: hello with the run's options, credits, end and
 * final counts (docs/wire.md). Backends only carry the frames; this is the one place that
 * decides what they mean, so blast and sink behave the same over every link.
 *
 * Credits are cumulative limits: "you may have sent N messages in all". A lost or
 * repeated credit frame therefore does no harm, and the receiver repeats its last grant
 * when it hears nothing, so a lost one cannot stall the sender for good. Over links whose
 * control frames may be lost (DS_LINK_CTL_UNRELIABLE) the sender repeats HELLO and END
 * until answered; the receiver answers repeats with the same ACK or FINAL. */
#ifndef DRAGSTRIP_SESSION_H
#define DRAGSTRIP_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include <dragstrip/link.h>
#include <dragstrip/wire.h>

struct ds_error;
struct ds_pool;

struct ds_session {
        struct ds_link *link;
        struct ds_wire_hello hello; /* the run's options, as negotiated */
        bool credits;               /* credit flow control in force */
        bool ctl_retry;             /* control frames may be lost: repeat them */
        bool receiver;              /* the sink's side (frames a sender sends are expected) */
        int timeout_ms;             /* how long a peer may stay silent */
        uint32_t window;            /* messages the receiver holds unreleased */
        /* sender */
        uint64_t limit; /* may send while sent < limit */
        bool final_seen;
        struct ds_wire_final final;
        /* receiver */
        uint64_t released;
        uint64_t granted; /* the last limit sent */
        bool idle_bumped; /* a silence added one message to the grant; none since */
        bool ended;
        struct ds_wire_end end;
        struct ds_wire_hello_ack ack; /* kept to answer a repeated hello */
        struct ds_pool *recv_pool;    /* receiver: admit may lend the link its receive
                                       * buffers (ds_link_params.recv_pool) */
};

/* Sender: prepares the link for hello's options (send_pool holds every buffer that will
 * be sent), says hello and waits for the answer. Returns 0, -ETIMEDOUT when nobody
 * answers within timeout_ms, -ECANCELED on a stop (stop.h), -EPROTO when the peer
 * echoed the hello back, or a negative errno with err saying why the sink refused. */
int ds_session_open(struct ds_session *session, struct ds_link *link,
                    const struct ds_wire_hello *hello, struct ds_pool *send_pool, int timeout_ms,
                    struct ds_error *err);

/* Sender: how many more messages may go now that sent have gone, waiting up to the
 * session's timeout for a credit when none are left (wait false: only what has already
 * arrived). Returns > 0, 0 (no wait asked and none available), -ETIMEDOUT, -ECANCELED on
 * a stop, or an error. */
int64_t ds_session_credit(struct ds_session *session, uint64_t sent, bool wait,
                          struct ds_error *err);

/* Sender: says what was sent and waits for the receiver's counts (after a stop, for at
 * most a second). Returns 0 with final filled, -ETIMEDOUT, -EPROTO when the counts claim
 * more than was sent (more messages, losses or bytes), or a negative errno. */
int ds_session_close(struct ds_session *session, uint64_t messages, uint64_t bytes,
                     struct ds_wire_final *final, struct ds_error *err);

/* Decides whether a receiver takes the run session->hello asks for, once the link's own
 * checks passed: returns DS_ACK_OK (having taken what the run needs) or the enum
 * ds_ack_status to answer, and may lower session->ack.max_msg to the limit it applies. */
typedef uint32_t (*ds_session_admit_fn)(struct ds_session *session, void *ctx);

/* Receiver: waits up to timeout_ms for the first control frame of a new link, which must
 * be a HELLO, checks and adopts its options (admit, if non-NULL, may refuse the run),
 * prepares the link and answers. Returns 0, or a negative errno (-EPROTO: the hello was
 * refused, err says why). */
int ds_session_accept(struct ds_session *session, struct ds_link *link, ds_session_admit_fn admit,
                      void *ctx, int timeout_ms, struct ds_error *err);

/* Either side: acts on a control message recv() returned (credit, end, final, a repeated
 * hello). Counts what makes no sense as malformed on the link. Returns 0 or an error
 * from answering. */
int ds_session_handle(struct ds_session *session, const struct ds_msg *msg, struct ds_error *err);

/* Receiver: n more messages were released; grants credit when a quarter window is due. */
int ds_session_released(struct ds_session *session, uint64_t n, struct ds_error *err);

/* Receiver: nothing arrived for a while: repeats its grant (a lost grant cannot stall the
 * sender) and widens it by one message once per silence (nor can a lost tail), so that
 * at most window + 1 messages are ever out beyond what the receiver has taken. */
int ds_session_idle(struct ds_session *session, struct ds_error *err);

/* Receiver: sends the final counts (after END, or when giving up on a silent sender). */
int ds_session_finish(struct ds_session *session, const struct ds_wire_final *final,
                      struct ds_error *err);

#endif
