/* linkmatrix's results on rank 0: the printed table, the N x N CSV and JSON, and the
 * heat map drawn by gnuplot. Each file appears under its final name only when whole. */
#ifndef LINKMATRIX_MATRIX_OUT_H
#define LINKMATRIX_MATRIX_OUT_H

#include <stdbool.h>
#include <stdint.h>

#define PAIR_MAX_RANKS  256 /* tags carry ranks in 16 bits; heat maps stay readable */
#define PAIR_REASON_MAX 120

enum pair_status { PAIR_NOT_RUN = 0, PAIR_OK = 1, PAIR_FAILED = 2 };

/* One side's view of one ordered pair; rank 0 gathers them as raw bytes. */
struct pair_outcome {
        double MB_per_s; /* the receiver's figure, as the sender learned it */
        uint64_t lost;
        int32_t status; /* enum pair_status */
        char reason[PAIR_REASON_MAX];
};

struct matrix {
        int n;
        const char *link;
        uint32_t msg_size;
        double seconds;
        bool all_to_all;
        double slow; /* flag below this fraction of the median */
        bool interrupted;
        const char *const *hosts; /* n each */
        const char *const *addrs;
        const struct pair_outcome *sent; /* [from * n + to], the senders' outcomes */
        const struct pair_outcome *got;  /* [to * n + from], the receivers' outcomes */
};

/* Prints the matrix and writes PREFIX.csv, PREFIX.json and PREFIX.png (the last only
 * when gnuplot is installed; a warning otherwise). Returns the exit status: 0 when every
 * pair ran, 1 when one failed or a file could not be written. */
int matrix_report(const struct matrix *m, const char *prefix);

#endif
