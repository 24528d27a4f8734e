/* linkmatrix's results: table, CSV, JSON, heat map (matrix_out.h). */
#include "matrix_out.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LABELS_UP_TO 24 /* ranks; beyond, the heat map's cells are too small for figures */

extern char **environ;

/* The merged view of one ordered pair. */
struct cell {
        enum pair_status status;
        double MB_per_s;
        uint64_t lost;
        bool slow;
        char reason[2 * PAIR_REASON_MAX + 16];
};

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

/* The sender's outcome decides; a receiver's complaint is added to a failure. */
static void merge(const struct matrix *m, struct cell *cells)
{
        int n = m->n;
        for (int from = 0; from < n; from++) {
                for (int to = 0; to < n; to++) {
                        struct cell *c = &cells[from * n + to];
                        const struct pair_outcome *s = &m->sent[from * n + to];
                        const struct pair_outcome *g = &m->got[to * n + from];
                        memset(c, 0, sizeof(*c));
                        if (from == to)
                                continue;
                        c->status = (enum pair_status)s->status;
                        c->MB_per_s = s->MB_per_s;
                        c->lost = s->lost;
                        if (c->status == PAIR_OK)
                                continue;
                        if (c->status == PAIR_NOT_RUN) {
                                c->status = PAIR_FAILED;
                                snprintf(c->reason, sizeof(c->reason), "not run (%s)",
                                         m->interrupted ? "interrupted" : "no result");
                        } else if (g->status == PAIR_FAILED && strcmp(g->reason, s->reason)) {
                                snprintf(c->reason, sizeof(c->reason), "%.*s; receiver: %.*s",
                                         PAIR_REASON_MAX, s->reason, PAIR_REASON_MAX, g->reason);
                        } else {
                                snprintf(c->reason, sizeof(c->reason), "%.*s", PAIR_REASON_MAX,
                                         s->reason);
                        }
                }
        }
}

/* The median of the pairs that ran, and the slow flags against it. */
static double flag_slow(const struct matrix *m, struct cell *cells)
{
        int n = m->n, k = 0;
        double *rates = malloc(sizeof(double) * (size_t)n * (size_t)n);
        if (!rates)
                return NAN;
        for (int i = 0; i < n * n; i++)
                if (cells[i].status == PAIR_OK)
                        rates[k++] = cells[i].MB_per_s;
        double median = NAN;
        if (k > 0) {
                qsort(rates, (size_t)k, sizeof(double), cmp_double);
                median = k % 2 ? rates[k / 2] : (rates[k / 2 - 1] + rates[k / 2]) / 2;
        }
        free(rates);
        for (int i = 0; i < n * n && k > 0; i++)
                cells[i].slow = cells[i].status == PAIR_OK && cells[i].MB_per_s < m->slow * median;
        return median;
}

/* "tcp, 1M messages, 1 s per pair, pairs in rounds, 4 ranks" */
static void describe(const struct matrix *m, char *out, size_t cap)
{
        char size[32];
        if (m->msg_size % (1u << 20) == 0)
                snprintf(size, sizeof(size), "%uM", m->msg_size >> 20);
        else if (m->msg_size % 1024 == 0)
                snprintf(size, sizeof(size), "%uK", m->msg_size >> 10);
        else
                snprintf(size, sizeof(size), "%u-byte", m->msg_size);
        snprintf(out, cap, "%s, %s messages, %g s per pair, %s, %d ranks", m->link, size,
                 m->seconds, m->all_to_all ? "all to all at once" : "pairs in rounds", m->n);
}

static void now_utc(char *out, size_t cap)
{
        time_t now = time(NULL);
        strftime(out, cap, "%Y-%m-%d %H:%M UTC", gmtime(&now));
}

static void print_table(const struct matrix *m, const struct cell *cells, double median)
{
        int n = m->n;
        char what[160], when[32];
        describe(m, what, sizeof(what));
        now_utc(when, sizeof(when));
        printf("linkmatrix: %s; %s\n", what, when);
        printf("MB/s (10^6 bytes/s), receive side; row = sender, column = receiver; "
               "* = below %.2f x median\n%-8s",
               m->slow, "from\\to");
        for (int to = 0; to < n; to++)
                printf(" %9d", to);
        printf("\n");
        for (int from = 0; from < n; from++) {
                printf("%-8d", from);
                for (int to = 0; to < n; to++) {
                        const struct cell *c = &cells[from * n + to];
                        if (from == to)
                                printf(" %9s", "--");
                        else if (c->status != PAIR_OK)
                                printf(" %9s", "FAIL");
                        else
                                printf(" %8.1f%c", c->MB_per_s, c->slow ? '*' : ' ');
                }
                printf("\n");
        }
        printf("median %.1f MB/s\n", median);
        for (int i = 0; i < n * n; i++) {
                if (cells[i].slow)
                        printf("slow   %d -> %d: %.1f MB/s, %.2f x median\n", i / n, i % n,
                               cells[i].MB_per_s, cells[i].MB_per_s / median);
                else if (cells[i].status == PAIR_FAILED)
                        printf("FAILED %d -> %d: %s\n", i / n, i % n, cells[i].reason);
        }
        for (int r = 0; r < n; r++)
                printf("rank %d: %s (%s)\n", r, m->hosts[r], m->addrs[r]);
        fflush(stdout);
}

static void json_string(FILE *f, const char *text)
{
        fputc('"', f);
        for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
                if (*p == '"' || *p == '\\')
                        fprintf(f, "\\%c", *p);
                else if (*p < 0x20 || *p == 0x7f)
                        fprintf(f, "\\u%04x", *p);
                else
                        fputc(*p, f);
        }
        fputc('"', f);
}

/* Names path PREFIX.EXT and opens its temporary twin tmp; finish_file() makes it path
 * once complete. NULL (said on stderr) when it cannot be opened. */
static FILE *start_file(const char *prefix, const char *ext, char path[static 4096],
                        char tmp[static 4200])
{
        snprintf(path, 4096, "%s.%s", prefix, ext);
        snprintf(tmp, 4200, "%s.tmp%d", path, (int)getpid());
        FILE *f = fopen(tmp, "w");
        if (!f)
                fprintf(stderr, "linkmatrix: cannot write %s: %s\n", tmp, strerror(errno));
        return f;
}

static int finish_file(FILE *f, const char *tmp, const char *path)
{
        int bad = fflush(f) != 0 || ferror(f) || fsync(fileno(f)) != 0;
        bad |= fclose(f) != 0;
        if (bad || rename(tmp, path) != 0) {
                fprintf(stderr, "linkmatrix: cannot write %s: %s\n", path, strerror(errno));
                unlink(tmp);
                return 1;
        }
        return 0;
}

static int write_csv(const struct matrix *m, const struct cell *cells, const char *prefix)
{
        char path[4096], tmp[4200];
        FILE *f = start_file(prefix, "csv", path, tmp);
        if (!f)
                return 1;
        fprintf(f, "from\\to");
        for (int to = 0; to < m->n; to++)
                fprintf(f, ",%d", to);
        fprintf(f, "\n");
        for (int from = 0; from < m->n; from++) {
                fprintf(f, "%d", from);
                for (int to = 0; to < m->n; to++) {
                        const struct cell *c = &cells[from * m->n + to];
                        if (from == to)
                                fprintf(f, ",");
                        else if (c->status == PAIR_OK)
                                fprintf(f, ",%.3f", c->MB_per_s);
                        else
                                fprintf(f, ",FAIL");
                }
                fprintf(f, "\n");
        }
        return finish_file(f, tmp, path);
}

static int write_json(const struct matrix *m, const struct cell *cells, double median,
                      const char *prefix)
{
        char path[4096], tmp[4200];
        FILE *f = start_file(prefix, "json", path, tmp);
        if (!f)
                return 1;
        int n = m->n, failed = 0;
        fprintf(f, "{\"tool\":\"linkmatrix\",\"link\":");
        json_string(f, m->link);
        fprintf(f,
                ",\"msg_size\":%u,\"seconds_per_pair\":%g,\"mode\":\"%s\",\"ranks\":%d,"
                "\"unit\":\"MB/s = 10^6 bytes/s, receive side\",\"hosts\":[",
                m->msg_size, m->seconds, m->all_to_all ? "all-to-all" : "rounds", n);
        for (int r = 0; r < n; r++) {
                fprintf(f, "%s{\"rank\":%d,\"host\":", r ? "," : "", r);
                json_string(f, m->hosts[r]);
                fprintf(f, ",\"addr\":");
                json_string(f, m->addrs[r]);
                fprintf(f, "}");
        }
        fprintf(f, "],\"matrix\":[");
        for (int from = 0; from < n; from++) {
                fprintf(f, "%s[", from ? "," : "");
                for (int to = 0; to < n; to++) {
                        const struct cell *c = &cells[from * n + to];
                        if (c->status == PAIR_OK)
                                fprintf(f, "%s%.3f", to ? "," : "", c->MB_per_s);
                        else
                                fprintf(f, "%snull", to ? "," : "");
                }
                fprintf(f, "]");
        }
        fprintf(f, "],\"pairs\":[");
        bool first = true;
        for (int i = 0; i < n * n; i++) {
                const struct cell *c = &cells[i];
                if (i / n == i % n)
                        continue;
                fprintf(f, "%s{\"from\":%d,\"to\":%d,\"ok\":%s", first ? "" : ",", i / n, i % n,
                        c->status == PAIR_OK ? "true" : "false");
                first = false;
                if (c->status == PAIR_OK) {
                        fprintf(f, ",\"MB_per_s\":%.3f,\"lost\":%llu,\"slow\":%s", c->MB_per_s,
                                (unsigned long long)c->lost, c->slow ? "true" : "false");
                } else {
                        failed++;
                        fprintf(f, ",\"error\":");
                        json_string(f, c->reason);
                }
                fprintf(f, "}");
        }
        if (isnan(median))
                fprintf(f, "],\"median_MB_per_s\":null");
        else
                fprintf(f, "],\"median_MB_per_s\":%.3f", median);
        fprintf(f, ",\"slow_fraction\":%g,\"failed\":%d,\"complete\":%s}\n", m->slow, failed,
                failed ? "false" : "true");
        return finish_file(f, tmp, path);
}

static void gnuplot_heatmap(FILE *f, const struct matrix *m, const struct cell *cells,
                            const char *png)
{
        int n = m->n;
        char what[160], when[32];
        describe(m, what, sizeof(what));
        now_utc(when, sizeof(when));
        int side = 300 + 50 * (n < 16 ? n : 16);
        fprintf(f, "set terminal pngcairo size %d,%d font 'DejaVu Sans,11'\n", side + 300,
                side + 60);
        fprintf(f, "set output '%s'\nset termoption noenhanced\n", png);
        fprintf(f, "set title \"linkmatrix from %s, %s\\n%s\"\n", m->hosts[0], when, what);
        fprintf(f, "set xlabel 'receiver rank'\nset ylabel 'sender rank'\n"
                   "set cblabel 'MB/s (10^6 bytes/s), receive side'\n");
        fprintf(f, "set xrange [-0.5:%d.5]\nset yrange [%d.5:-0.5]\n", n - 1, n - 1);
        fprintf(f, "set xtics 0,1,%d out nomirror\nset ytics 0,1,%d out nomirror\n", n - 1, n - 1);
        fprintf(f,
                "set palette defined (0 '#3b0f70', 0.35 '#8c2981', 0.65 '#de4968', 1 '#fcfdbf')\n"
                "set cbrange [0:*]\nunset key\nset size square\n"
                "set style textbox opaque fc rgb 'white' noborder\n");
        fprintf(f, "$M << EOD\n");
        for (int from = 0; from < n; from++) {
                for (int to = 0; to < n; to++) {
                        const struct cell *c = &cells[from * n + to];
                        fprintf(f, "%s", to ? " " : "");
                        if (c->status == PAIR_OK)
                                fprintf(f, "%.3f", c->MB_per_s);
                        else
                                fprintf(f, "NaN");
                }
                fprintf(f, "\n");
        }
        fprintf(f, "EOD\n$L << EOD\n");
        for (int i = 0; i < n * n && n <= LABELS_UP_TO; i++) {
                const struct cell *c = &cells[i];
                if (i / n == i % n)
                        fprintf(f, "%d %d \"--\"\n", i % n, i / n);
                else if (c->status != PAIR_OK)
                        fprintf(f, "%d %d \"FAIL\"\n", i % n, i / n);
                else
                        fprintf(f, "%d %d \"%.0f%s\"\n", i % n, i / n, c->MB_per_s,
                                c->slow ? " slow" : "");
        }
        fprintf(f, "EOD\nplot $M matrix with image pixels, "
                   "$L using 1:2:3 with labels boxed font ',10'\n");
}

/* Draws PREFIX.png with gnuplot; returns 0, or 1 when gnuplot is there but failed. */
static int write_heatmap(const struct matrix *m, const struct cell *cells, const char *prefix)
{
        char png[4096], png_tmp[4200], gp[4096], script[4200];
        snprintf(png, sizeof(png), "%s.png", prefix);
        snprintf(png_tmp, sizeof(png_tmp), "%s.png.tmp%d", prefix, (int)getpid());
        FILE *f = start_file(prefix, "gp", gp, script);
        if (!f)
                return 1;
        gnuplot_heatmap(f, m, cells, png_tmp);
        if (fclose(f) != 0) {
                unlink(script);
                fprintf(stderr, "linkmatrix: cannot write %s\n", script);
                return 1;
        }
        char *argv[] = {"gnuplot", script, NULL};
        pid_t pid;
        /* gnuplot warns on stderr about the empty diagonal; its exit status says enough. */
        posix_spawn_file_actions_t quiet;
        posix_spawn_file_actions_init(&quiet);
        posix_spawn_file_actions_addopen(&quiet, 2, "/dev/null", O_WRONLY, 0);
        int status = 0, rc = posix_spawnp(&pid, "gnuplot", &quiet, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&quiet);
        if (rc == 0 && waitpid(pid, &status, 0) < 0)
                rc = errno;
        unlink(script);
        if (rc != 0 || (WIFEXITED(status) && WEXITSTATUS(status) == 127)) {
                fprintf(stderr, "linkmatrix: no heat map: gnuplot is not installed "
                                "(apt-get install gnuplot-nox)\n");
                return 0;
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || rename(png_tmp, png) != 0) {
                unlink(png_tmp);
                fprintf(stderr, "linkmatrix: gnuplot could not draw %s\n", png);
                return 1;
        }
        return 0;
}

int matrix_report(const struct matrix *m, const char *prefix)
{
        struct cell *cells = calloc((size_t)m->n * (size_t)m->n, sizeof(*cells));
        if (!cells) {
                fprintf(stderr, "linkmatrix: out of memory for the report\n");
                return 1;
        }
        merge(m, cells);
        double median = flag_slow(m, cells);
        print_table(m, cells, median);
        int bad = write_csv(m, cells, prefix);
        bad |= write_json(m, cells, median, prefix);
        bad |= write_heatmap(m, cells, prefix);
        for (int i = 0; i < m->n * m->n; i++)
                bad |= cells[i].status == PAIR_FAILED;
        free(cells);
        return bad ? 1 : 0;
}
