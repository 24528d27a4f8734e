/* tach: every dragstrip tool running on this machine, live, beside the NICs, RDMA ports
 * and disks that carry what they move. */
#include <err.h>
#include <errno.h>
#include <getopt.h>
#include <langinfo.h>
#include <limits.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include <dragstrip/cli.h>
#include <dragstrip/clock.h>

#include "render.h"
#include "screen.h"
#include "snapshot.h"

static atomic_bool stop_requested;

static void usage(FILE *out)
{
        fputs("usage: tach [-d SEC]                  watch, full screen\n"
              "       tach --once [--json] [-d SEC]  one look (rates over SEC, default 1)\n"
              "       tach -i SEC [-n COUNT] [--json] a look every SEC, as text or JSON lines\n"
              "  -d SEC      seconds between looks on screen (default 1)\n"
              "  -i SEC      print a look every SEC seconds until stopped (or COUNT looks)\n"
              "  -n COUNT    with -i: stop after COUNT looks\n"
              "  --once      print one look and exit\n"
              "  --json      looks as JSON objects, one a line\n"
              "  -h, --help  this text;  --version\n"
              "Keys on screen: q quit, Up/Down select, Enter streams or disks, Esc back,\n"
              "u bits/bytes, p pause, s sort, h help.\n",
              out);
}

struct options {
        double delay_s;
        double interval_s;
        uint64_t count;
        bool once;
        bool json;
};

enum { OPT_ONCE = 256, OPT_JSON, OPT_VERSION };

static void parse(int argc, char **argv, struct options *o)
{
        static const struct option longopts[] = {{"once", no_argument, NULL, OPT_ONCE},
                                                 {"json", no_argument, NULL, OPT_JSON},
                                                 {"help", no_argument, NULL, 'h'},
                                                 {"version", no_argument, NULL, OPT_VERSION},
                                                 {NULL, 0, NULL, 0}};
        bool count_given = false;
        int c;
        opterr = 0;
        while ((c = getopt_long(argc, argv, ":d:i:n:h", longopts, NULL)) != -1) {
                switch (c) {
                case 'd':
                        o->delay_s = ds_cli_seconds("-d", optarg);
                        break;
                case 'i':
                        o->interval_s = ds_cli_seconds("-i", optarg);
                        break;
                case 'n':
                        o->count = ds_cli_size("-n", optarg, 1, UINT64_MAX / 2);
                        count_given = true;
                        break;
                case OPT_ONCE:
                        o->once = true;
                        break;
                case OPT_JSON:
                        o->json = true;
                        break;
                case 'h':
                        usage(stdout);
                        exit(0);
                case OPT_VERSION:
                        printf("tach (dragstrip) %s\n", DS_VERSION);
                        exit(0);
                default:
                        ds_cli_bad_option("tach", argv, c);
                }
        }
        if (optind != argc)
                errx(2, "unexpected argument '%s': tach takes options only; see -h", argv[optind]);
        if (o->delay_s < 0.1 || o->delay_s > 3600)
                errx(2, "-d: %g s is out of range (0.1 to 3600)", o->delay_s);
        if (o->interval_s != 0 && (o->interval_s < 0.1 || o->interval_s > 3600))
                errx(2, "-i: %g s is out of range (0.1 to 3600)", o->interval_s);
        if (o->once && o->interval_s > 0)
                errx(2, "--once and -i are exclusive: one look, or one every SEC");
        if (count_given && o->interval_s == 0)
                errx(2, "-n counts the looks of -i SEC");
        if (o->json && !o->once && o->interval_s == 0)
                errx(2, "--json is for --once or -i SEC (the screen is for people)");
}

/* Sleeps until t_ns (monotonic) or a stop request, whichever is first. */
static void wait_until(uint64_t t_ns)
{
        while (!atomic_load(&stop_requested)) {
                uint64_t now = ds_now_ns();
                if (now >= t_ns)
                        return;
                uint64_t step = t_ns - now < 100000000u ? t_ns - now : 100000000u;
                struct timespec ts = {0, (long)step};
                nanosleep(&ts, NULL);
        }
}

static void look(struct tach_sessions *s, struct tach_machine *m, uint64_t t_ns)
{
        tach_sessions_look(s, t_ns);
        tach_machine_sample(m, t_ns);
}

/* The terminal's width, else $COLUMNS, else 100; within 40 and 250. */
static unsigned text_width(void)
{
        struct winsize ws;
        unsigned width = 100;
        const char *columns = getenv("COLUMNS");
        if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0)
                width = ws.ws_col;
        else if (columns && atoi(columns) > 0)
                width = (unsigned)atoi(columns);
        return width < 40 ? 40 : width > TACH_LINE_BYTES / 4 ? TACH_LINE_BYTES / 4 : width;
}

/* The screen as plain text, title included, without the key help or trailing blanks. */
static void print_text(const struct tach_sessions *s, const struct tach_machine *m,
                       const struct tach_view *v, uint64_t now_ns)
{
        static struct tach_screen scr;
        char wall[16];
        tach_wall_clock(wall, sizeof(wall));
        tach_render(&scr, s, m, v, text_width(), TACH_MAX_LINES, now_ns, wall);
        unsigned n = scr.count - 1;
        while (n > 0 && scr.lines[n - 1].text[0] == '\0')
                n--;
        for (unsigned i = 0; i < n; i++)
                printf("%s\n", scr.lines[i].text);
        fflush(stdout);
}

static void report(const struct options *o, const struct tach_sessions *s,
                   const struct tach_machine *m, const struct tach_view *v, uint64_t now_ns,
                   double over_s)
{
        if (o->json) {
                tach_snapshot_json(stdout, s, m, now_ns, over_s);
                return;
        }
        print_text(s, m, v, now_ns);
        if (!o->once)
                putchar('\n'); /* a blank line between looks */
}

/* Whether stdout took every look so far: 0 yes, 1 its reader went away (EPIPE, as in
 * `tach -i 1 | head`), -1 another failure. */
static int stdout_state(void)
{
        if (fflush(stdout) == 0 && !ferror(stdout))
                return 0;
        return errno == EPIPE ? 1 : -1;
}

/* --once and -i: looks printed, no screen. A reader that goes away ends tach quietly
 * (status 0), as it ends other tools. */
static int run_lines(const struct options *o, struct tach_sessions *s, struct tach_machine *m,
                     struct tach_view *v)
{
        double step_s = o->once ? o->delay_s : o->interval_s;
        uint64_t step = (uint64_t)(step_s * 1e9);
        uint64_t t = ds_now_ns();
        look(s, m, t);
        for (uint64_t n = 0; !atomic_load(&stop_requested);) {
                t += step;
                wait_until(t);
                if (atomic_load(&stop_requested))
                        break;
                look(s, m, ds_now_ns());
                tach_sessions_sort(s, v->sort);
                report(o, s, m, v, ds_now_ns(), step_s);
                int state = stdout_state();
                if (state != 0)
                        return state < 0;
                if (o->once || (o->count && ++n == o->count))
                        break;
        }
        return 0;
}

int main(int argc, char **argv)
{
        struct options o = {.delay_s = 1};
        parse(argc, argv, &o);
        setlocale(LC_ALL, "");
        ds_cli_catch_stop(&stop_requested);
        static struct tach_sessions sessions;
        static struct tach_machine machine;
        tach_sessions_init(&sessions, NULL);
        tach_machine_init(&machine);
        struct tach_view view = {
            .utf8 = strcmp(nl_langinfo(CODESET), "UTF-8") == 0,
            .delay_s = o.once || o.interval_s == 0 ? o.delay_s : o.interval_s,
        };
        int rc;
        if (o.once || o.interval_s > 0) {
                view.selected = UINT_MAX; /* printed looks select nothing */
                rc = run_lines(&o, &sessions, &machine, &view);
        } else {
                if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))
                        errx(2, "the screen needs a terminal; for scripts use --once or -i SEC");
                rc = tach_screen_run(&sessions, &machine, &view, &stop_requested);
        }
        tach_sessions_free(&sessions);
        if (rc != 0)
                errx(1, "writing to stdout failed");
        return 0;
}
