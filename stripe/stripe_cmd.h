/* The `stripe` command: options shared by its subcommands and the helpers they share. */
#ifndef DS_STRIPE_CMD_H
#define DS_STRIPE_CMD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <dragstrip/live.h>
#include <dragstrip/stop.h>
#include <dragstrip/stripe.h>

struct stripe_cmd {
        const char *name;  /* the subcommand, for messages */
        uint64_t unit;     /* -u, 0: default */
        uint64_t size;     /* bench -s */
        uint64_t mem;      /* -m: buffer memory budget, 0: the library's default */
        double interval_s; /* put, get -i: interval reports, 0: none */
        double rate_bps;   /* put, get -R: pace to this many bits/s, 0: flat out */
        bool force;        /* -f: put replaces */
        bool all;          /* ls -a: names starting with '.' too */
        bool json;
        bool data; /* verify --data */
        bool no_direct;
        bool no_checksum;
        char **args;
        int nargs;
};

int cmd_put(const struct stripe_cmd *cmd);
int cmd_get(const struct stripe_cmd *cmd);
int cmd_ls(const struct stripe_cmd *cmd);
int cmd_stat(const struct stripe_cmd *cmd);
int cmd_verify(const struct stripe_cmd *cmd);
int cmd_rm(const struct stripe_cmd *cmd);
int cmd_bench(const struct stripe_cmd *cmd);
int cmd_fsck(const struct stripe_cmd *cmd);
int cmd_mv(const struct stripe_cmd *cmd);

/* Splits DIRS or exits with a one-line error. Free the result with free(). */
char **cmd_dirs(const struct stripe_cmd *cmd, const char *list, unsigned *ndirs);
/* Checks NAME or exits 2 with a one-line error. */
void cmd_name(const struct stripe_cmd *cmd, const char *name);
/* The library options the command line asks for (flags, -m, the stop flag). */
struct ds_stripe_options cmd_options(const struct stripe_cmd *cmd);
/* The library flags --no-direct and --no-checksum ask for. */
unsigned cmd_flags(const struct stripe_cmd *cmd);
/* Says once per process, on stderr, that O_DIRECT was refused and where. */
void cmd_note_buffered(const struct ds_stripe *stripe, const char *const *dirs);
/* Set by the first SIGINT/SIGTERM (lib's one stop, stop.h) so a run can stop, report and
 * clean up; ds_stop_signal() names the signal and ds_stop_status() is the exit status (130,
 * 143). A second one ends the process at once. */
extern atomic_bool cmd_interrupted;

/* A progress line on stderr, drawn only when stderr is a terminal. */
struct progress {
        bool on;
        const char *label;
        uint64_t total; /* 0: unknown */
        uint64_t base;  /* the live byte count when this progress began */
        const struct ds_live_segment *live;
        uint64_t start_ns;
        uint64_t next_ns;
};
void progress_begin(struct progress *p, const char *label, uint64_t total,
                    const struct ds_live_segment *live);
void progress_tick(struct progress *p);
void progress_end(struct progress *p);

#endif
