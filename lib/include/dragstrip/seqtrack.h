/* Sequence accounting for receivers: which numbered messages arrived, which twice, which
 * late, and so how many were lost. Shared by sink --verify and ttcp -u. */
#ifndef DRAGSTRIP_SEQTRACK_H
#define DRAGSTRIP_SEQTRACK_H

#include <stdbool.h>
#include <stdint.h>

/* How far behind the highest number a duplicate can still be told from a late arrival. */
#define DS_SEQ_WINDOW 65536

enum ds_seq_verdict {
        DS_SEQ_IN_ORDER, /* the next number expected */
        DS_SEQ_GAP,      /* new and higher than expected: those between are missing so far */
        DS_SEQ_LATE,     /* new but lower than the highest seen: reordered */
        DS_SEQ_DUP,      /* seen before */
};

struct ds_seqtrack {
        bool any;
        uint64_t highest;
        uint64_t unique; /* distinct numbers seen */
        uint64_t dup;
        uint64_t reordered;
        uint64_t
            seen[DS_SEQ_WINDOW / 64]; /* bit (seq % WINDOW) for seq in (highest-WINDOW, highest] */
};

void ds_seqtrack_init(struct ds_seqtrack *track);

/* Records one arrival. Numbers start at 0. A number more than DS_SEQ_WINDOW behind the
 * highest counts as reordered, since whether it is a duplicate can no longer be known. */
enum ds_seq_verdict ds_seqtrack_add(struct ds_seqtrack *track, uint64_t seq);

/* Messages missing out of expected_total sent (0: assume the sender stopped at the highest
 * number seen, which cannot see losses at the tail). */
uint64_t ds_seqtrack_lost(const struct ds_seqtrack *track, uint64_t expected_total);

#endif
