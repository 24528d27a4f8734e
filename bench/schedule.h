/* linkmatrix's rounds: which rank tests with which, so that no rank is in two tests at
 * once and every ordered pair is tested exactly once. */
#ifndef LINKMATRIX_SCHEDULE_H
#define LINKMATRIX_SCHEDULE_H

#include <stdbool.h>

/* How many rounds n ranks take: 2(n - 1), or 2n for odd n (n >= 2). */
int schedule_rounds(int n);

/* This rank's peer in round (0 <= round < schedule_rounds(n)), or -1 when it sits the
 * round out; *sends says whether it sends or receives. */
int schedule_peer(int rank, int n, int round, bool *sends);

#endif
