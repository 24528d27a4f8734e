#include <string.h>

#include <dragstrip/seqtrack.h>

static bool test_bit(const struct ds_seqtrack *t, uint64_t seq)
{
        uint64_t slot = seq % DS_SEQ_WINDOW;

        return (t->seen[slot / 64] >> (slot % 64)) & 1;
}

static void set_bit(struct ds_seqtrack *t, uint64_t seq)
{
        uint64_t slot = seq % DS_SEQ_WINDOW;

        t->seen[slot / 64] |= 1ULL << (slot % 64);
}

/* Slides the window forward to end at new_highest: the slots it reuses start clear. */
static void advance(struct ds_seqtrack *t, uint64_t new_highest)
{
        uint64_t step = new_highest - t->highest;

        if (step >= DS_SEQ_WINDOW) {
                memset(t->seen, 0, sizeof t->seen);
        } else {
                for (uint64_t seq = t->highest + 1; seq <= new_highest; seq++) {
                        uint64_t slot = seq % DS_SEQ_WINDOW;
                        t->seen[slot / 64] &= ~(1ULL << (slot % 64));
                }
        }
        t->highest = new_highest;
}

void ds_seqtrack_init(struct ds_seqtrack *track)
{
        memset(track, 0, sizeof *track);
}

enum ds_seq_verdict ds_seqtrack_add(struct ds_seqtrack *t, uint64_t seq)
{
        if (!t->any) {
                t->any = true;
                t->highest = seq;
                set_bit(t, seq);
                t->unique = 1;
                return seq == 0 ? DS_SEQ_IN_ORDER : DS_SEQ_GAP;
        }
        if (seq > t->highest) {
                bool next = seq == t->highest + 1;

                advance(t, seq);
                set_bit(t, seq);
                t->unique++;
                return next ? DS_SEQ_IN_ORDER : DS_SEQ_GAP;
        }
        if (t->highest - seq < DS_SEQ_WINDOW && test_bit(t, seq)) {
                t->dup++;
                return DS_SEQ_DUP;
        }
        if (t->highest - seq < DS_SEQ_WINDOW)
                set_bit(t, seq);
        t->unique++;
        t->reordered++;
        return DS_SEQ_LATE;
}

uint64_t ds_seqtrack_lost(const struct ds_seqtrack *t, uint64_t expected_total)
{
        uint64_t expected = expected_total;

        if (expected == 0)
                expected = t->any ? t->highest + 1 : 0;
        return expected > t->unique ? expected - t->unique : 0;
}
