/* What every tool's command line shares: one wording for a bad value and one exit status
 * (2) for it, and the signals that ask a run to stop. Only main() calls these: they exit.
 * They live in the tools' own library (ds::cli), not in libdragstrip, which never prints
 * or exits; this header is not installed. */
#ifndef DRAGSTRIP_CLI_H
#define DRAGSTRIP_CLI_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct ds_link_ops;

/* The size arg given to option opt (as the user typed it: "-l", "--window") within
 * [min, max]; otherwise one line on stderr, naming the range when that was the fault, and
 * exit(2). */
uint64_t ds_cli_size(const char *opt, const char *arg, uint64_t min, uint64_t max);
/* A count given to option opt (connections, sessions), from 1 to max in decimal, or one
 * line naming the range and exit(2). */
unsigned ds_cli_count(const char *opt, const char *arg, unsigned max);
/* A duration in seconds (10, 0.5, 200ms), or one line and exit(2). */
double ds_cli_seconds(const char *opt, const char *arg);
/* The same as milliseconds for a timeout, through ds_duration_ms (saturating, never
 * wrapping). */
int ds_cli_ms(const char *opt, const char *arg);
/* A rate in bits per second as -R takes it (ds_rate_parse: 2G, 500M, 1.5G), or one line
 * and exit(2). */
double ds_cli_rate(const char *opt, const char *arg);
/* A port (1 to 65535) or a rate unit letter (k K m M g G a) given to option opt, or one
 * line and exit(2). */
uint16_t ds_cli_port(const char *opt, const char *arg);
char ds_cli_rate_unit(const char *opt, const char *arg);
/* The link named by -x (raw also needs -d, iface), or one line and exit(2). */
const struct ds_link_ops *ds_cli_link(const char *name, const char *iface);
/* For getopt_long's '?' and ':' (the option string starting with ':', opterr = 0): one
 * line naming the unknown option, or the one missing its value, and exit(2). */
_Noreturn void ds_cli_bad_option(const char *tool, char **argv, int getopt_result);
/* SIGINT and SIGTERM set *stop, which the tool's run polls, and the library's own stop
 * (stop.h: every wait ends on it; a second signal exits at once); SIGPIPE is ignored, so
 * a vanished peer shows up as EPIPE, not as a dead process. main() exits with
 * ds_stop_status() (130, 143) when a signal stopped the run. */
void ds_cli_catch_stop(atomic_bool *stop);

#endif
