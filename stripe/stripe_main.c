/* stripe: put, get, list, check and benchmark files striped across directories. */
#include <err.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dragstrip/cli.h>
#include <dragstrip/error.h>
#include <dragstrip/live.h>
#include <dragstrip/size.h>

#include "crc32c_int.h"
#include "stripe_cmd.h"

atomic_bool cmd_interrupted;

static void usage(FILE *out)
{
        fputs(
            "usage: stripe put [-f] [-u UNIT] SRC DIRS [NAME]   store SRC (- for stdin)\n"
            "       stripe get DIRS NAME DEST                 read back (DEST - for stdout)\n"
            "       stripe ls [-a] DIRS                       list striped files and their state\n"
            "       stripe stat DIRS NAME                     layout and members\n"
            "       stripe verify [--data] DIRS NAME          check headers (and data)\n"
            "       stripe rm DIRS NAME                       remove\n"
            "       stripe mv [-f] DIRS NAME NEWNAME          rename\n"
            "       stripe fsck DIRS                          finish or undo puts cut short\n"
            "       stripe bench [-s SIZE] [-u UNIT] DIRS     sequential rates per disk, striped\n"
            "DIRS is a comma-separated list of directories, one per disk. Options may come\n"
            "anywhere after the subcommand; -- ends them.\n"
            "options: --json  one JSON object per result; --no-direct  no O_DIRECT;\n"
            "         --no-checksum  no data checksums (store none, check none);\n"
            "         -u UNIT stripe unit (default 1M); -s SIZE bench file size (default 256M);\n"
            "         -m SIZE buffer memory (default a sixteenth of RAM, at most 256M);\n"
            "         -i SEC  put, get: a report every SEC seconds (a JSON line with --json);\n"
            "         -R RATE put, get: pace to RATE bits/s (500M, 2G);\n"
            "         --no-stats  publish no live counters for tach\n",
            out);
}

struct subcommand {
        const char *name;
        int (*run)(const struct stripe_cmd *cmd);
        int min_args, max_args;
        const char *allowed; /* option letters it takes beyond --json, --no-direct */
};

static const struct subcommand subcommands[] = {
    {"put", cmd_put, 2, 3, "fumiR"},    {"get", cmd_get, 3, 3, "miR"},
    {"ls", cmd_ls, 1, 1, "a"},          {"stat", cmd_stat, 2, 2, ""},
    {"verify", cmd_verify, 2, 2, "dm"}, {"rm", cmd_rm, 2, 2, ""},
    {"bench", cmd_bench, 1, 1, "sum"},  {"fsck", cmd_fsck, 1, 1, ""},
    {"mv", cmd_mv, 3, 3, "f"},
};

/* DS_CRC32C forces a CRC-32C implementation (tests, benches); a name this CPU cannot run
 * is a mistake to report, not one to measure around quietly. */
static void check_crc_choice(void)
{
        const char *name = getenv("DS_CRC32C");
        unsigned count;
        const struct crc32c_impl *impls = crc32c_impls(&count);
        char known[64] = "";
        size_t used = 0;

        if (!name || crc32c_find(name))
                return;
        for (unsigned i = 0; i < count && used < sizeof(known); i++)
                used += (size_t)snprintf(known + used, sizeof(known) - used, "%s%s", i ? ", " : "",
                                         impls[i].name);
        errx(2, "DS_CRC32C: '%s' is not a CRC-32C implementation this CPU runs (try %s)", name,
             known);
}

int main(int argc, char **argv)
{
        static const struct option longopts[] = {
            {"json", no_argument, NULL, 'j'},         {"no-checksum", no_argument, NULL, 'c'},
            {"no-direct", no_argument, NULL, 'n'},    {"data", no_argument, NULL, 'd'},
            {"unit", required_argument, NULL, 'u'},   {"size", required_argument, NULL, 's'},
            {"force", no_argument, NULL, 'f'},        {"help", no_argument, NULL, 'h'},
            {"memory", required_argument, NULL, 'm'}, {"all", no_argument, NULL, 'a'},
            {"version", no_argument, NULL, 'V'},      {"interval", required_argument, NULL, 'i'},
            {"rate", required_argument, NULL, 'R'},   {NULL, 0, NULL, 0}};
        static const char shortopts[] = ":fu:s:m:ai:R:h";
        struct stripe_cmd cmd = {.size = 256ull << 20};
        const struct subcommand *sub = NULL;
        int opt;

        argc = ds_live_take_option(argc, argv, shortopts, longopts);
        if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
                printf("stripe (dragstrip) %s\n", DS_VERSION);
                return 0;
        }
        if (argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
                usage(stdout);
                return 0;
        }
        if (argc < 2) {
                usage(stderr);
                return 2;
        }
        for (size_t i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]); i++)
                if (strcmp(argv[1], subcommands[i].name) == 0)
                        sub = &subcommands[i];
        if (!sub)
                errx(2,
                     "'%s' is not a subcommand (put, get, ls, stat, verify, rm, mv, fsck, bench)",
                     argv[1]);
        cmd.name = sub->name;
        /* The subcommand first, then its options anywhere among its arguments (GNU
         * permutation: `put SRC DIRS --json`); `--` ends them, for a name that starts with -. */
        optind = 2;
        opterr = 0;
        while ((opt = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
                if (strchr("fudsmaiR", opt) && !strchr(sub->allowed, opt))
                        errx(2, "%s: option -%c does not apply (see stripe --help)", sub->name,
                             opt == 'd' ? '-' : opt);
                switch (opt) {
                case 'j':
                        cmd.json = true;
                        break;
                case 'c':
                        cmd.no_checksum = true;
                        break;
                case 'n':
                        cmd.no_direct = true;
                        break;
                case 'd':
                        cmd.data = true;
                        break;
                case 'f':
                        cmd.force = true;
                        break;
                case 'u':
                        cmd.unit =
                            ds_cli_size("-u", optarg, DS_STRIPE_MIN_UNIT, DS_STRIPE_MAX_UNIT);
                        if (cmd.unit % DS_STRIPE_MIN_UNIT != 0)
                                errx(2, "-u: '%s' is not a multiple of 4K", optarg);
                        break;
                case 's':
                        cmd.size = ds_cli_size("-s", optarg, 1, 1ull << 50);
                        break;
                case 'm':
                        cmd.mem = ds_cli_size("-m", optarg, 64 * 1024, 1ull << 40);
                        break;
                case 'a':
                        cmd.all = true;
                        break;
                case 'i':
                        cmd.interval_s = ds_cli_seconds("-i", optarg);
                        break;
                case 'R':
                        cmd.rate_bps = ds_cli_rate("-R", optarg);
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                case 'V':
                        printf("stripe (dragstrip) %s\n", DS_VERSION);
                        return 0;
                default:
                        ds_cli_bad_option("stripe", argv, opt);
                }
        }
        cmd.args = argv + optind;
        cmd.nargs = argc - optind;
        if (cmd.nargs < sub->min_args || cmd.nargs > sub->max_args) {
                errx(2, "%s: wrong number of arguments (see stripe --help)", sub->name);
        }
        check_crc_choice();
        ds_cli_catch_stop(&cmd_interrupted);
        return sub->run(&cmd);
}

char **cmd_dirs(const struct stripe_cmd *cmd, const char *list, unsigned *ndirs)
{
        struct ds_error err;
        char **dirs;

        if (ds_stripe_dirs_parse(list, &dirs, ndirs, &err) != 0)
                errx(2, "%s: %s", cmd->name, err.text);
        return dirs;
}

void cmd_name(const struct stripe_cmd *cmd, const char *name)
{
        struct ds_error err;

        if (ds_stripe_name_check(name, &err) != 0)
                errx(2, "%s: %s", cmd->name, err.text);
}

struct ds_stripe_options cmd_options(const struct stripe_cmd *cmd)
{
        return (struct ds_stripe_options){
            .flags = cmd_flags(cmd), .mem_budget = cmd->mem, .stop = &cmd_interrupted};
}

unsigned cmd_flags(const struct stripe_cmd *cmd)
{
        return (cmd->no_direct ? DS_STRIPE_NO_DIRECT : 0) |
               (cmd->no_checksum ? DS_STRIPE_NO_CHECKSUM : 0);
}

void cmd_note_buffered(const struct ds_stripe *stripe, const char *const *dirs)
{
        static bool said;
        struct ds_stripe_info info;

        ds_stripe_stat(stripe, &info);
        if (said || info.buffered_member < 0)
                return;
        said = true;
        fprintf(stderr, "stripe: note: %s refuses O_DIRECT (tmpfs?); using buffered I/O there\n",
                dirs[info.buffered_member]);
}
