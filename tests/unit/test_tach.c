/* tach's pure parts: the rate arithmetic on a recorded series, the parsers of /proc lines,
 * the formats, and the reading of segments, good, ended and hostile. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <dragstrip/clock.h>
#include <dragstrip/live.h>

#include "machine.h"
#include "render.h"
#include "series.h"
#include "sessions.h"

#define S 1000000000ull

/* A blast recorded by hand at 1 s looks, from t = 100 s: 0, then 200, 400, 100 MB per
 * second, a look 0.5 s late, and a counter reset by a new repeat. */
static void test_series_rate_average_and_peak_on_a_recorded_series(void **state)
{
        (void)state;
        struct tach_series s = {0};
        tach_series_sample(&s, 100 * S, 0);
        assert_true(s.now == 0);
        tach_series_sample(&s, 101 * S, 200000000);
        assert_float_equal(s.now, 200e6, 1);
        tach_series_sample(&s, 102 * S, 600000000);
        assert_float_equal(s.now, 400e6, 1);
        tach_series_sample(&s, 103 * S, 700000000);
        assert_float_equal(s.now, 100e6, 1);
        assert_float_equal(s.peak, 400e6, 1);
        /* 1.5 s carrying 300 MB: 200 MB/s */
        tach_series_sample(&s, 104 * S + S / 2, 1000000000);
        assert_float_equal(s.now, 200e6, 1);
        /* A sample that is not later changes nothing. */
        tach_series_sample(&s, 104 * S, 5);
        assert_float_equal(s.now, 200e6, 1);
        /* The tool started a new run from zero: what it has now came in this interval. */
        tach_series_sample(&s, 105 * S + S / 2, 50000000);
        assert_float_equal(s.now, 50e6, 1);
        assert_float_equal(s.peak, 400e6, 1);
        tach_series_stop(&s);
        assert_true(s.now == 0);

        assert_float_equal(tach_average(1000000000, 100 * S, 105 * S), 200e6, 1);
        assert_true(tach_average(5, 7 * S, 7 * S) == 0);
        assert_true(tach_average(5, 8 * S, 7 * S) == 0);
}

/* The buckets hold bytes per second of the clock: a look that spans two seconds shares
 * its bytes between them by time. */
static void test_series_sparkline_shows_the_last_minute_in_whole_seconds(void **state)
{
        (void)state;
        struct tach_series s = {0};
        tach_series_sample(&s, 100 * S + S / 2, 0);
        tach_series_sample(&s, 101 * S + S / 2, 1000); /* half in 100, half in 101 */
        tach_series_sample(&s, 102 * S + S / 2, 3000); /* 1000 in 101 and in 102 */
        assert_float_equal(s.buckets[100 % TACH_HISTORY], 500, 1e-6);
        assert_float_equal(s.buckets[101 % TACH_HISTORY], 1500, 1e-6);
        assert_float_equal(s.buckets[102 % TACH_HISTORY], 1000, 1e-6);

        uint8_t levels[TACH_HISTORY];
        /* At 103.2 s the minute is 43..102; one column a second. */
        double top = tach_series_spark(&s, 103 * S + S / 5, TACH_HISTORY, levels);
        assert_float_equal(top, 1500, 1e-6);
        assert_int_equal(levels[59], 6); /* second 102: 1000 of 1500, 5.3 of 8, up to 6 */
        assert_int_equal(levels[58], TACH_SPARK_TOP);
        assert_int_equal(levels[57], 3); /* second 100: 500 */
        assert_int_equal(levels[0], 0);
        /* Squeezed into 6 columns of 10 s: the last holds 93..102, a mean of 300. */
        top = tach_series_spark(&s, 103 * S + S / 5, 6, levels);
        assert_float_equal(top, 300, 1e-6);
        assert_int_equal(levels[5], TACH_SPARK_TOP);
        assert_int_equal(levels[4], 0);
        /* Two minutes later the old seconds are gone. */
        tach_series_sample(&s, 222 * S + S / 2, 3000);
        top = tach_series_spark(&s, 223 * S, TACH_HISTORY, levels);
        assert_true(top == 0);
        for (int i = 0; i < TACH_HISTORY; i++)
                assert_int_equal(levels[i], 0);
}

static void test_proc_lines_parse_and_headings_do_not(void **state)
{
        (void)state;
        char name[40];
        uint64_t in, out;
        assert_true(tach_parse_diskstats(
            " 254       0 vda 26384 7405 6487162 8816 262213 206102 27738584 183452 0 162836 "
            "209048 0 0 0 0 4683 16779",
            name, sizeof(name), &in, &out));
        assert_string_equal(name, "vda");
        assert_int_equal(in, 6487162ull * 512);
        assert_int_equal(out, 27738584ull * 512);
        assert_false(tach_parse_diskstats("garbage", name, sizeof(name), &in, &out));
        assert_false(tach_parse_diskstats(" 1 2 a-name-longer-than-the-room-given 1 2 3 4 5 6 7",
                                          name, 8, &in, &out));

        assert_true(tach_parse_net_dev(
            "    lo: 68721420   52111    0    0    0     0          0         0 68721420   "
            "52111    0    0    0     0       0          0",
            name, sizeof(name), &in, &out));
        assert_string_equal(name, "lo");
        assert_int_equal(in, 68721420);
        assert_int_equal(out, 68721420);
        assert_false(tach_parse_net_dev(
            "Inter-|   Receive                                                |  Transmit", name,
            sizeof(name), &in, &out));
        assert_false(tach_parse_net_dev(" face |bytes    packets errs drop fifo frame", name,
                                        sizeof(name), &in, &out));
}

static void test_formats_fit_their_columns(void **state)
{
        (void)state;
        char buf[32];
        assert_string_equal(tach_format_rate(buf, sizeof(buf), 2851.18e6, false), "2.85 GB/s");
        assert_string_equal(tach_format_rate(buf, sizeof(buf), 2851.18e6, true), "22.8 Gb/s");
        assert_string_equal(tach_format_rate(buf, sizeof(buf), 0, false), "0.00 B/s");
        assert_string_equal(tach_format_rate(buf, sizeof(buf), 999.4e3, false), "999 kB/s");
        assert_string_equal(tach_format_rate(buf, sizeof(buf), 999.6e3, false), "1.00 MB/s");
        assert_string_equal(tach_format_amount(buf, sizeof(buf), 5696913408ull), "5.70 GB");
        for (double v = 1; v < 1e21; v *= 3.7) {
                assert_true(strlen(tach_format_rate(buf, sizeof(buf), v, true)) <= 9);
                assert_true(strlen(tach_format_amount(buf, sizeof(buf), (uint64_t)v)) <= 8);
        }
        const uint8_t levels[] = {0, 1, 4, 8, 9};
        tach_format_spark(buf, sizeof(buf), levels, 5, false);
        assert_string_equal(buf, " .=@@");
        tach_format_spark(buf, sizeof(buf), levels, 5, true);
        assert_string_equal(buf, " \u2581\u2584\u2588\u2588");
        tach_format_spark(buf, 4, levels, 5, true); /* no room: whole characters only */
        assert_string_equal(buf, " ");
}

/* Display columns of UTF-8 text: every byte but continuation bytes. */
static size_t columns(const char *text)
{
        size_t n = 0;
        for (const unsigned char *p = (const unsigned char *)text; *p; p++)
                n += (*p & 0xc0) != 0x80;
        return n;
}

/* Sessions with every text field full and every counter huge, and busy devices. */
static void fill_worst_case(struct tach_sessions *s, struct tach_machine *m)
{
        tach_sessions_init(s, "/nonexistent");
        for (unsigned i = 0; i < 30; i++) {
                struct tach_session *t = calloc(1, sizeof(*t));
                assert_non_null(t);
                struct ds_live_view *v = &t->view;
                v->pid = 999999999;
                memset(v->tool, 'T', sizeof(v->tool) - 1);
                memset(v->role, 'R', sizeof(v->role) - 1);
                memset(v->link, 'L', sizeof(v->link) - 1);
                memset(v->peer, 'P', sizeof(v->peer) - 1);
                v->msg_size = UINT64_MAX;
                v->start_ns = 1;
                v->counters.bytes = UINT64_MAX;
                v->counters.messages = UINT64_MAX;
                v->counters.faults[DS_FAULT_LOST] = UINT64_MAX;
                v->slot_count = DS_LIVE_SLOTS;
                for (unsigned k = 0; k < DS_LIVE_SLOTS; k++) {
                        v->slots[k].position = k;
                        v->slots[k].index = UINT32_MAX;
                        memset(v->slots[k].name, 'N', sizeof(v->slots[k].name) - 1);
                        v->slots[k].counters = v->counters;
                        v->slots[k].ended = k < 100; /* a sink's past runs, listed first */
                        t->slots[k].rate.now = 1e300;
                }
                t->ended = i % 2;
                for (uint64_t sec = 0; sec < 70; sec++)
                        tach_series_sample(&t->rate, sec * S, sec * sec * 1000000000ull);
                s->list[s->count++] = t;
                snprintf(s->notes[i % TACH_MAX_NOTES].segment, 64, "dragstrip.%u", i);
                memset(s->notes[i % TACH_MAX_NOTES].why, 'w', 127);
        }
        s->note_count = TACH_MAX_NOTES;
        memset(m, 0, sizeof(*m));
        for (unsigned i = 0; i < TACH_MAX_DEVICES; i++) {
                struct tach_device *d = &m->devices[m->count++];
                d->kind = (enum tach_device_kind)(i % TACH_DEVICE_KINDS);
                memset(d->name, 'D', sizeof(d->name) - 1);
                d->in = d->out = UINT64_MAX;
                for (uint64_t sec = 0; sec < 70; sec++)
                        tach_series_sample(&d->in_rate, sec * S, sec * 77777777ull);
        }
}

static void test_render_never_writes_past_the_screen(void **state)
{
        (void)state;
        static struct tach_sessions s;
        static struct tach_machine m;
        static struct tach_screen scr;
        fill_worst_case(&s, &m);
        const unsigned sizes[][2] = {{80, 24}, {200, 50}, {40, 10}, {250, 120}, {120, 5}};
        for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
                for (int mode = 0; mode < 4; mode++) {
                        struct tach_view v = {.utf8 = mode % 2, .bits = mode > 1, .delay_s = 1};
                        v.detail = mode == 1;
                        v.help = mode == 3;
                        v.selected = 3;
                        tach_render(&scr, &s, &m, &v, sizes[z][0], sizes[z][1], 70 * S, "12:00:00");
                        assert_int_equal(scr.count, sizes[z][1]);
                        /* Streams still moving come before ended ones. */
                        if (mode == 1 && sizes[z][1] > 8)
                                assert_null(strstr(scr.lines[6].text, "ended"));
                        for (unsigned i = 0; i < scr.count; i++)
                                if (columns(scr.lines[i].text) > sizes[z][0])
                                        fail_msg("%ux%u mode %d line %u is %zu wide: %s",
                                                 sizes[z][0], sizes[z][1], mode, i,
                                                 columns(scr.lines[i].text), scr.lines[i].text);
                }
        }
        tach_sessions_free(&s);
}

/* One running session of tool over link with peer, bytes moved at 100 MB/s; disk_slots
 * makes it a stripe's, whose streams are disks. */
static struct tach_session *session_of(const char *tool, const char *peer, bool disk_slots)
{
        struct tach_session *t = calloc(1, sizeof(*t));
        assert_non_null(t);
        struct ds_live_view *v = &t->view;
        snprintf(v->tool, sizeof(v->tool), "%s", tool);
        snprintf(v->role, sizeof(v->role), "send");
        snprintf(v->link, sizeof(v->link), "%s", disk_slots ? "disk" : "tcp");
        snprintf(v->peer, sizeof(v->peer), "%s", peer);
        v->start_ns = 1 * S;
        v->counters.bytes = 1000000000;
        v->slot_count = 1;
        v->slots[0].kind = disk_slots ? DS_SLOT_DISK : DS_SLOT_STREAM;
        tach_series_sample(&t->rate, 9 * S, 900000000);
        tach_series_sample(&t->rate, 10 * S, 1000000000);
        return t;
}

/* The text of the row of tool in a screen, or fails. */
static const char *row_of(const struct tach_screen *scr, const char *tool)
{
        for (unsigned i = 0; i < scr->count; i++)
                if (strncmp(scr->lines[i].text + 1, tool, strlen(tool)) == 0)
                        return scr->lines[i].text;
        fail_msg("no row for %s", tool);
        return NULL;
}

/* PEER (and a stream's NAME) holds an address and its port whole when the screen has room;
 * when it has not, the port goes first, then the address is cut with a '~', never in the
 * middle unsaid. */
static void test_render_peer_fits_whole_or_is_cut_cleanly(void **state)
{
        (void)state;
        /* cell: the PEER column at width; stream: the 10-column NAME of its stream at 80 */
        static const struct {
                const char *peer;
                unsigned width;
                const char *cell, *stream;
        } cases[] = {
            {"10.9.9.1:5050", 80, " 10.9.9.1:5050 ", " 10.9.9.1   "},
            {"192.168.100.200:5050", 100, " 192.168.100.200:5050 ", " 192.168.1~ "},
            {"192.168.100.200:5050", 80, " 192.168.100.200 ", " 192.168.1~ "},
            {"[2001:db8::1]:5050", 80, " [2001:db8::1]:5050 ", " [2001:db8~ "},
            {"[2001:db8::12]:5050", 80, " [2001:db8::12]    ", " [2001:db8~ "},
            {"[2001:db8:1234:5678:9abc:def0:1234:5678]:5050", 80, " [2001:db8:1234:56~ ",
             " [2001:db8~ "},
            {"2001:db8:1234:5678:9abc:def0:1234:5678", 80, " 2001:db8:1234:567~ ", " 2001:db8:~ "},
        };
        static struct tach_screen scr;
        static struct tach_machine m;
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct tach_sessions s;
                tach_sessions_init(&s, "/nonexistent");
                struct tach_session *t = session_of("blast", cases[i].peer, false);
                snprintf(t->view.slots[0].name, sizeof(t->view.slots[0].name), "%s", cases[i].peer);
                s.list[s.count++] = t;
                struct tach_view v = {.delay_s = 1, .selected = UINT32_MAX};
                tach_render(&scr, &s, &m, &v, cases[i].width, 24, 10 * S, "12:00:00");
                const char *row = row_of(&scr, "blast");
                if (!strstr(row, cases[i].cell))
                        fail_msg("%s at %u columns: '%s' is not in '%s'", cases[i].peer,
                                 cases[i].width, cases[i].cell, row);
                v.detail = true;
                v.selected = 0;
                tach_render(&scr, &s, &m, &v, 80, 24, 10 * S, "12:00:00");
                row = row_of(&scr, "stream");
                if (!strstr(row, cases[i].stream))
                        fail_msg("stream %s at 80 columns: '%s' is not in '%s'", cases[i].peer,
                                 cases[i].stream, row);
                tach_sessions_free(&s);
        }
}

/* u turns link rates into bits; totals, a stripe's disks and the machine's disks stay in
 * bytes. */
static void test_render_bits_only_for_link_rates(void **state)
{
        (void)state;
        static struct tach_screen scr;
        static struct tach_machine m;
        struct tach_sessions s;
        tach_sessions_init(&s, "/nonexistent");
        s.list[s.count++] = session_of("blast", "10.0.0.2", false);
        s.list[s.count++] = session_of("stripe", "", true);
        memset(&m, 0, sizeof(m));
        const enum tach_device_kind kinds[] = {TACH_NIC, TACH_DISK};
        for (unsigned i = 0; i < 2; i++) {
                struct tach_device *d = &m.devices[m.count++];
                d->kind = kinds[i];
                snprintf(d->name, sizeof(d->name), "%s", i ? "vda" : "eth0");
                d->in = d->out = 5000000000ull;
                tach_series_sample(&d->in_rate, 9 * S, 0);
                tach_series_sample(&d->in_rate, 10 * S, 100000000);
        }
        struct tach_view v = {.delay_s = 1, .bits = true, .selected = UINT32_MAX};
        tach_render(&scr, &s, &m, &v, 120, 24, 10 * S, "12:00:00");
        const char *blast = row_of(&scr, "blast");
        assert_non_null(strstr(blast, "800 Mb/s"));
        assert_non_null(strstr(blast, "1.00 GB "));
        const char *stripe = row_of(&scr, "stripe");
        assert_non_null(strstr(stripe, "100 MB/s"));
        assert_null(strstr(stripe, "b/s"));
        assert_non_null(strstr(row_of(&scr, "eth0"), "800 Mb/s"));
        assert_non_null(strstr(row_of(&scr, "eth0"), "5.00 GB"));
        assert_non_null(strstr(row_of(&scr, "vda"), "100 MB/s"));
        assert_null(strstr(row_of(&scr, "vda"), "b/s"));
        tach_sessions_free(&s);
}

/* A scratch directory standing in for /dev/shm. */
static char dir[64];

static int make_dir(void **state)
{
        (void)state;
        snprintf(dir, sizeof(dir), "/tmp/test_tach.XXXXXX");
        return mkdtemp(dir) ? 0 : -1;
}

static int remove_dir(void **state)
{
        (void)state;
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        return system(cmd);
}

static void write_file(const char *name, const void *data, size_t len)
{
        char path[160];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, data, len), (ssize_t)len);
        assert_int_equal(close(fd), 0);
}

/* A segment as a tool of this version writes it, for pid, in a file of dir. */
static uint8_t *segment_for(pid_t pid, size_t *len)
{
        struct ds_live *live;
        assert_int_equal(ds_live_open(&live, "blast", "send", "tcp", NULL, NULL), 0);
        ds_live_set_peer(live, "10.1.2.3");
        ds_live_start(live);
        struct ds_live_segment *seg = ds_live_segment(live);
        ds_live_stream_add(seg, ds_live_slot_open(seg, DS_SLOT_STREAM, 0, "10.1.2.3"), 10,
                           10 << 20);
        char path[64];
        snprintf(path, sizeof(path), "/dev/shm/%s%d", DS_LIVE_PREFIX, (int)getpid());
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        *len = (size_t)st.st_size;
        uint8_t *copy = malloc(*len);
        assert_non_null(copy);
        memcpy(copy, seg, *len);
        ds_live_close(live);
        ((struct ds_live_segment *)copy)->pid = pid;
        return copy;
}

static const struct tach_note *note_for(const struct tach_sessions *s, const char *segment)
{
        for (unsigned i = 0; i < s->note_count; i++)
                if (strcmp(s->notes[i].segment, segment) == 0)
                        return &s->notes[i];
        return NULL;
}

static void expect_note(const struct tach_sessions *s, const char *segment, const char *words)
{
        const struct tach_note *n = note_for(s, segment);
        if (!n || !strstr(n->why, words))
                fail_msg("no note on %s saying '%s' (%s)", segment, words, n ? n->why : "none");
}

static void write_number(const char *path, uint64_t value)
{
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fprintf(f, "%llu\n", (unsigned long long)value);
        assert_int_equal(fclose(f), 0);
}

/* port_rcv_data and port_xmit_data count 4-byte words. */
static void test_rdma_port_counters_are_words_of_four_bytes(void **state)
{
        (void)state;
        char path[200];
        snprintf(path, sizeof(path), "mkdir -p %s/rxe0/ports/1/counters", dir);
        assert_int_equal(system(path), 0);
        struct tach_machine m;
        tach_machine_init(&m);
        m.ib_dir = dir;
        m.net_dev = "/nonexistent";
        m.diskstats = "/nonexistent";
        char rcv[200], xmit[200];
        snprintf(rcv, sizeof(rcv), "%s/rxe0/ports/1/counters/port_rcv_data", dir);
        snprintf(xmit, sizeof(xmit), "%s/rxe0/ports/1/counters/port_xmit_data", dir);
        write_number(rcv, 1000);
        write_number(xmit, 250);
        tach_machine_sample(&m, 10 * S);
        assert_int_equal(m.count, 1);
        assert_string_equal(m.devices[0].name, "rxe0/1");
        assert_int_equal(m.devices[0].kind, TACH_RDMA);
        assert_int_equal(m.devices[0].in, 4000);
        assert_int_equal(m.devices[0].out, 1000);
        write_number(xmit, 250 + 25000000); /* 100 MB in 2 s */
        tach_machine_sample(&m, 12 * S);
        assert_float_equal(m.devices[0].out_rate.now, 50e6, 1);
        assert_true(m.devices[0].in_rate.now == 0);
        /* A port that goes away is dropped. */
        snprintf(path, sizeof(path), "rm -r %s/rxe0", dir);
        assert_int_equal(system(path), 0);
        tach_machine_sample(&m, 13 * S);
        assert_int_equal(m.count, 0);
}

static void test_sessions_skip_garbage_foreign_and_future_segments_with_a_note(void **state)
{
        (void)state;
        /* Every hostile file is named for a live process, this one or its parent, so
         * nothing is passed over for being stale. */
        pid_t me = getpid(), parent = getppid();
        char name[64], other[64];
        snprintf(name, sizeof(name), "%s%d", DS_LIVE_PREFIX, (int)me);
        snprintf(other, sizeof(other), "%s%d", DS_LIVE_PREFIX, (int)parent);

        size_t len;
        uint8_t *seg = segment_for(me, &len);
        struct tach_sessions s;
        tach_sessions_init(&s, dir);

        /* From a future version */
        ((struct ds_live_segment *)seg)->version = DS_LIVE_VERSION + 1;
        write_file(name, seg, len);
        tach_sessions_look(&s, 1 * S);
        assert_int_equal(s.count, 0);
        expect_note(&s, name, "version 3");
        ((struct ds_live_segment *)seg)->version = DS_LIVE_VERSION;

        /* Truncated, garbage, empty, a FIFO, a symbolic link, a segment naming another pid */
        write_file(name, seg, 300);
        tach_sessions_look(&s, 2 * S);
        expect_note(&s, name, "truncated");
        uint8_t garbage[4096];
        for (size_t i = 0; i < sizeof(garbage); i++)
                garbage[i] = (uint8_t)(i * 131 + 7);
        write_file(name, garbage, sizeof(garbage));
        tach_sessions_look(&s, 3 * S);
        expect_note(&s, name, "not a dragstrip segment");
        write_file(name, "", 0);
        tach_sessions_look(&s, 4 * S);
        expect_note(&s, name, "not the size");
        char path[160], target[160];
        snprintf(path, sizeof(path), "%s/%s", dir, other);
        assert_int_equal(mkfifo(path, 0600), 0);
        tach_sessions_look(&s, 5 * S);
        expect_note(&s, other, "not a regular file");
        assert_int_equal(unlink(path), 0);
        snprintf(target, sizeof(target), "%s/%s", dir, name);
        assert_int_equal(symlink(target, path), 0);
        write_file(name, seg, len);
        tach_sessions_look(&s, 6 * S);
        expect_note(&s, other, "cannot open");
        assert_int_equal(unlink(path), 0);
        write_file(other, seg, len); /* says pid me, named for parent */
        tach_sessions_look(&s, 7 * S);
        expect_note(&s, other, "says pid");
        assert_int_equal(unlink(path), 0);
        /* A watched segment cut short is dropped with a note, never read past its end. */
        ((struct ds_live_segment *)seg)->pid = parent;
        write_file(other, seg, len);
        tach_sessions_look(&s, 7 * S + 1);
        assert_int_equal(s.count, 2);
        assert_int_equal(truncate(path, 100), 0);
        tach_sessions_look(&s, 7 * S + 2);
        expect_note(&s, other, "truncated");
        assert_int_equal(s.count, 1);
        assert_int_equal(unlink(path), 0);
        ((struct ds_live_segment *)seg)->pid = me;
        /* Names that are not a segment's are not judged at all. */
        write_file("dragstrip.x", "x", 1);
        write_file("dragstrip.0123", "x", 1);
        tach_sessions_look(&s, 8 * S);
        assert_int_equal(s.note_count, 0);

        /* Through all that, the one good segment was read. */
        assert_int_equal(s.count, 1);
        assert_string_equal(s.list[0]->view.tool, "blast");
        assert_string_equal(s.list[0]->view.peer, "10.1.2.3");
        assert_int_equal(s.list[0]->view.counters.bytes, 10 << 20);
        assert_int_equal(s.list[0]->view.slot_count, 1);
        tach_sessions_free(&s);
        free(seg);
}

/* This process's segment, as a tool writes it, placed in dir; path gets its file's path.
 * Returns the segment's length. */
static size_t place_own_segment(char *path, size_t path_len)
{
        char name[64];
        snprintf(name, sizeof(name), "%s%d", DS_LIVE_PREFIX, (int)getpid());
        snprintf(path, path_len, "%s/%s", dir, name);
        size_t len;
        uint8_t *seg = segment_for(getpid(), &len);
        write_file(name, seg, len);
        free(seg);
        return len;
}

/* The segment at path mapped for writing, as its tool holds it. */
static struct ds_live_segment *map_for_writing(const char *path, size_t len)
{
        int fd = open(path, O_RDWR);
        assert_true(fd >= 0);
        struct ds_live_segment *live = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        assert_true(live != MAP_FAILED);
        assert_int_equal(close(fd), 0);
        return live;
}

static void test_sessions_keep_the_final_counts_of_a_segment_removed_at_exit(void **state)
{
        (void)state;
        char path[160];
        size_t len = place_own_segment(path, sizeof(path));
        struct tach_sessions s;
        tach_sessions_init(&s, dir);
        tach_sessions_look(&s, 10 * S);
        assert_int_equal(s.count, 1);

        /* The tool moves 100 MB more, then ends and removes its segment. */
        struct ds_live_segment *live = map_for_writing(path, len);
        ds_live_add(live, 100, 100000000);
        tach_sessions_look(&s, 11 * S);
        assert_float_equal(s.list[0]->rate.now, 100e6, 1);
        assert_false(s.list[0]->ended);
        ds_live_add(live, 5, 5000000);
        assert_int_equal(unlink(path), 0);
        assert_int_equal(munmap(live, len), 0);

        tach_sessions_look(&s, 12 * S);
        assert_int_equal(s.count, 1);
        assert_true(s.list[0]->ended);
        assert_int_equal(s.list[0]->view.counters.bytes, (10 << 20) + 105000000);
        assert_true(s.list[0]->rate.now == 0);
        assert_float_equal(s.list[0]->rate.peak, 100e6, 1);
        /* It lingers, then goes. */
        tach_sessions_look(&s, (12 + TACH_LINGER_S - 1) * S);
        assert_int_equal(s.count, 1);
        tach_sessions_look(&s, (12 + TACH_LINGER_S) * S);
        assert_int_equal(s.count, 0);
        tach_sessions_free(&s);
}

/* Seen only after it moved its bytes (--once), a session's PEAK is at least its AVG; idle
 * looks (a sink between runs) leave the average where it was. */
static void test_sessions_average_holds_while_idle_and_peak_is_never_below_it(void **state)
{
        (void)state;
        char path[160];
        uint64_t t0 = ds_now_ns(); /* the segment starts now, on the same clock */
        size_t len = place_own_segment(path, sizeof(path));
        struct tach_sessions s;
        tach_sessions_init(&s, dir);
        tach_sessions_look(&s, t0 + 1 * S);
        tach_sessions_look(&s, t0 + 2 * S); /* nothing moved in between */
        const struct tach_session *t = s.list[0];
        double average = tach_session_average(t, t0 + 2 * S);
        assert_true(average > 0);
        assert_true(t->rate.peak == 0);
        assert_float_equal(tach_session_peak(t, t0 + 2 * S), average, 1);

        tach_sessions_look(&s, t0 + 30 * S); /* idle for 28 s more */
        assert_float_equal(tach_session_average(t, t0 + 30 * S), average, average / 100);

        /* 100 MB in the next second: AVG takes it in, PEAK is that second's rate. */
        struct ds_live_segment *live = map_for_writing(path, len);
        ds_live_add(live, 100, 100000000);
        tach_sessions_look(&s, t0 + 31 * S);
        assert_true(tach_session_average(t, t0 + 31 * S) > average);
        assert_float_equal(tach_session_peak(t, t0 + 31 * S), 100e6, 1);
        assert_int_equal(munmap(live, len), 0);
        tach_sessions_free(&s);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_series_rate_average_and_peak_on_a_recorded_series),
            cmocka_unit_test(test_series_sparkline_shows_the_last_minute_in_whole_seconds),
            cmocka_unit_test(test_proc_lines_parse_and_headings_do_not),
            cmocka_unit_test(test_formats_fit_their_columns),
            cmocka_unit_test(test_render_never_writes_past_the_screen),
            cmocka_unit_test(test_render_peer_fits_whole_or_is_cut_cleanly),
            cmocka_unit_test(test_render_bits_only_for_link_rates),
            cmocka_unit_test_setup_teardown(test_rdma_port_counters_are_words_of_four_bytes,
                                            make_dir, remove_dir),
            cmocka_unit_test_setup_teardown(
                test_sessions_skip_garbage_foreign_and_future_segments_with_a_note, make_dir,
                remove_dir),
            cmocka_unit_test_setup_teardown(
                test_sessions_keep_the_final_counts_of_a_segment_removed_at_exit, make_dir,
                remove_dir),
            cmocka_unit_test_setup_teardown(
                test_sessions_average_holds_while_idle_and_peak_is_never_below_it, make_dir,
                remove_dir),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
