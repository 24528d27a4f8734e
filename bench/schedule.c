/* linkmatrix's rounds (schedule.h). */
#include "schedule.h"

int schedule_rounds(int n)
{
        int slots = n + (n & 1);
        return 2 * (slots - 1);
}

/* A round-robin tournament (the circle method) over slots = n rounded up to even: in
 * pairing round k, circle position 0 holds rank 0 and position p > 0 holds rank
 * (p - 1 + k) mod (slots - 1) + 1; position i meets position slots - 1 - i, so every two
 * ranks meet once. Each pairing runs twice, the lower rank sending in round 2k and the
 * higher in round 2k + 1. With odd n, the rank that meets the missing slot sits out. */
int schedule_peer(int rank, int n, int round, bool *sends)
{
        int slots = n + (n & 1), turn = slots - 1, k = round / 2;
        int pos = rank == 0 ? 0 : ((rank - 1 - k) % turn + turn) % turn + 1;
        int partner_pos = slots - 1 - pos;
        int partner = partner_pos == 0 ? 0 : (partner_pos - 1 + k) % turn + 1;
        if (partner >= n)
                return -1;
        *sends = (round % 2 == 0) == (rank < partner);
        return partner;
}
