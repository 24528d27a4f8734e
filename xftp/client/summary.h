/* What xftp says when a job is over: one line of text (for ls, the listing), or with
 * --json the result object every dragstrip tool writes (docs/result.schema.json), with
 * xftp's own fields beside the common ones and, for ls, the entries. */
#ifndef XFTP_SUMMARY_H
#define XFTP_SUMMARY_H

#include <stdbool.h>

#include <dragstrip/report.h>

#include "ftp.h"
#include "transfer.h"

struct summary {
        const char *op; /* get, put, ls, cp: the report's role */
        bool json;
        const struct job_opts *job;
        double rate_bps; /* -R, 0: unpaced */
        const struct ftp_tls_opts *tls;
        char **args; /* the command's arguments, URLs as typed (passwords are hidden) */
        int nargs;
        struct job_totals *totals;
        double wall_seconds; /* logins included */
        int rc;              /* the job's: 0 or a negative errno */
        const char *error;   /* what failed, when rc < 0 */
};

/* Prints the job's summary through report, bound to the job's live counters and started
 * before the job; its seconds and bytes are those the totals say. */
void summary_print(struct ds_report *report, struct summary *s);

#endif
