/* One timed transfer between two ranks of linkmatrix over dragstrip's own links: the
 * sender connects and sends fixed-length messages for a while under the session's credit
 * flow control, the receiver counts and answers with its final counts. Every wait has a
 * deadline, so a dead or refusing peer fails the pair instead of hanging the matrix. */
#ifndef LINKMATRIX_PAIRTEST_H
#define LINKMATRIX_PAIRTEST_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <dragstrip/link.h>
#include <dragstrip/session.h>

struct ds_error;

struct pair_options {
        const struct ds_link_ops *link;
        uint32_t msg_size;
        double seconds; /* sending time */
        int timeout_ms; /* connect, hello and final each; and a silent sender */
        const atomic_bool *stop;
};

/* The receiver's count of one transfer. */
struct pair_result {
        uint64_t bytes;
        uint64_t lost;
        double seconds; /* first to last data message, on the receiver's clock */
        double MB_per_s;
};

/* Sender: connects to where, identifies itself by tag (the receiver checks it) and sends
 * for o->seconds. Fills result from the receiver's final counts. Returns 0 or a negative
 * errno with err saying which step failed. */
int pair_send(const struct pair_options *o, const struct ds_link_config *where, uint64_t tag,
              struct pair_result *result, struct ds_error *err);

/* An accepted link whose sender has said hello. */
struct pair_link {
        struct ds_link *link;
        struct ds_session session;
};

/* Receiver: takes the next link from listener whose hello carries one of the ntags tags
 * not yet marked in taken (others are refused and closed), within o->timeout_ms. Returns
 * the index of its tag (and marks it taken), or a negative errno with err filled. */
int pair_accept(const struct pair_options *o, struct ds_link_listener *listener,
                const uint64_t *tags, bool *taken, unsigned ntags, struct pair_link *out,
                struct ds_error *err);

/* Receiver: receives on an accepted link until the sender ends, answers with the final
 * counts and closes the link. Returns 0 with result filled, or a negative errno. */
int pair_receive(const struct pair_options *o, struct pair_link *pl, struct pair_result *result,
                 struct ds_error *err);

#endif
