/* Shared command-line helpers (cli.h). */
#include <dragstrip/cli.h>

#include <dragstrip/clock.h>
#include <dragstrip/error.h>
#include <dragstrip/net.h>
#include <dragstrip/size.h>
#include <dragstrip/stop.h>

#include <ctype.h>
#include <err.h>
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>

uint64_t ds_cli_size(const char *opt, const char *arg, uint64_t min, uint64_t max)
{
        uint64_t value;
        char lo[16], hi[16];
        switch (ds_size_parse(arg, min, max, &value)) {
        case 0:
                return value;
        case -ERANGE:
                errx(2, "%s: '%s' is out of range (%s to %s)", opt, arg,
                     ds_size_format(lo, sizeof lo, min), ds_size_format(hi, sizeof hi, max));
        default:
                errx(2, "%s: '%s' is not a size (try 64K, 1M)", opt, arg);
        }
}

unsigned ds_cli_count(const char *opt, const char *arg, unsigned max)
{
        char *end;
        errno = 0;
        unsigned long value = strtoul(arg, &end, 10);
        /* Digits only: strtoul would also take leading blanks and a sign, and wrap a minus. */
        if (errno || !isdigit((unsigned char)arg[0]) || *end || value < 1 || value > max)
                errx(2, "%s: '%s' is not a count from 1 to %u", opt, arg, max);
        return (unsigned)value;
}

double ds_cli_seconds(const char *opt, const char *arg)
{
        double seconds;
        if (ds_duration_parse(arg, &seconds) != 0)
                errx(2, "%s: '%s' is not a duration in seconds (try 10, 0.5, 200ms)", opt, arg);
        return seconds;
}

double ds_cli_rate(const char *opt, const char *arg)
{
        double bits_per_s;
        if (ds_rate_parse(arg, &bits_per_s) != 0)
                errx(2, "%s: '%s' is not a rate in bits/s (try 2G, 500M)", opt, arg);
        return bits_per_s;
}

uint16_t ds_cli_port(const char *opt, const char *arg)
{
        uint16_t port;
        if (ds_port_parse(arg, &port) != 0)
                errx(2, "%s: '%s' is not a port (1 to 65535)", opt, arg);
        return port;
}

char ds_cli_rate_unit(const char *opt, const char *arg)
{
        if (arg[0] == 0 || arg[1] != 0 || ds_rate_unit_check(arg[0]) != 0)
                errx(2, "%s: '%s' is not a unit (one of k K m M g G a)", opt, arg);
        return arg[0];
}

_Noreturn void ds_cli_bad_option(const char *tool, char **argv, int getopt_result)
{
        char letter[3] = {'-', (char)optopt, 0};
        /* getopt leaves optopt 0 for an unknown long option and the option's value (above
         * any letter) for a long one missing its argument; both are still in argv. */
        const char *name = optopt > 0 && optopt < 128 ? letter : argv[optind - 1];
        if (getopt_result == ':')
                errx(2, "%s needs a value (try '%s --help')", name, tool);
        errx(2, "unknown option '%s' (try '%s --help')", name, tool);
}

void ds_cli_catch_stop(atomic_bool *stop)
{
        struct ds_error err;
        if (ds_stop_catch(stop, &err) < 0)
                errx(1, "%s", err.text);
}

int ds_cli_ms(const char *opt, const char *arg)
{
        return ds_duration_ms(ds_cli_seconds(opt, arg));
}
