/* The live-counter segment in /dev/shm. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <dragstrip/error.h>
#include <dragstrip/live.h>

static void segment_path(char *path, size_t len)
{
        snprintf(path, len, "/dev/shm/%s%d", DS_LIVE_PREFIX, (int)getpid());
}

static void test_live_segment_appears_in_dev_shm_and_goes_at_close(void **state)
{
        (void)state;
        struct ds_live *live;
        struct ds_error err;
        int shared = -1;
        char path[64];
        segment_path(path, sizeof(path));

        assert_int_equal(ds_live_open(&live, "blast", "send", "raw", &shared, &err), 0);
        assert_int_equal(shared, 1);
        ds_live_set_msg_size(live, 65536);
        ds_live_add(ds_live_segment(live), 3, 3 * 65536);

        /* Read it the way tach does: a separate read-only mapping of the file. */
        int fd = open(path, O_RDONLY);
        assert_true(fd >= 0);
        struct stat st;
        assert_int_equal(fstat(fd, &st), 0);
        assert_true((size_t)st.st_size >= sizeof(struct ds_live_segment));
        assert_int_equal(st.st_mode & 0777, 0600); /* owner only */
        const struct ds_live_segment *seen =
            mmap(NULL, sizeof(*seen), PROT_READ, MAP_SHARED, fd, 0);
        assert_true(seen != MAP_FAILED);
        assert_int_equal(close(fd), 0);
        assert_int_equal(seen->magic, DS_LIVE_MAGIC);
        assert_int_equal(seen->version, DS_LIVE_VERSION);
        assert_int_equal(seen->pid, getpid());
        assert_string_equal(seen->tool, "blast");
        assert_string_equal(seen->role, "send");
        assert_string_equal(seen->link, "raw");
        assert_int_equal(seen->msg_size, 65536);
        assert_int_equal(atomic_load(&seen->state), DS_LIVE_STARTING);
        assert_int_equal(atomic_load(&seen->messages), 3);
        assert_int_equal(atomic_load(&seen->bytes), 3 * 65536);

        ds_live_start(live);
        assert_int_equal(atomic_load(&seen->state), DS_LIVE_RUNNING);
        assert_true(seen->start_ns > 0);
        ds_live_done(live);
        assert_int_equal(atomic_load(&seen->state), DS_LIVE_DONE);

        ds_live_close(live);
        assert_int_equal(access(path, F_OK), -1);
        assert_int_equal(errno, ENOENT);
        assert_int_equal(munmap((void *)seen, sizeof(*seen)), 0);
}

static void test_live_truncates_long_text_safely(void **state)
{
        (void)state;
        struct ds_live *live;
        char peer[200];
        memset(peer, 'p', sizeof(peer) - 1);
        peer[sizeof(peer) - 1] = '\0';
        assert_int_equal(
            ds_live_open(&live, "a-tool-name-that-is-far-too-long", "recv", NULL, NULL, NULL), 0);
        ds_live_set_peer(live, peer);
        struct ds_live_segment *seg = ds_live_segment(live);
        assert_string_equal(seg->tool, "a-tool-name-tha"); /* 15 characters and a NUL */
        assert_string_equal(seg->link, "");
        assert_int_equal(strlen(seg->peer), sizeof(seg->peer) - 1);
        ds_live_close(live);
}

static void test_live_replaces_a_stale_segment_with_our_pid(void **state)
{
        (void)state;
        char name[64], path[64];
        snprintf(name, sizeof(name), "/%s%d", DS_LIVE_PREFIX, (int)getpid());
        segment_path(path, sizeof(path));
        /* What a dead process with our pid would have left behind. */
        int fd = shm_open(name, O_CREAT | O_RDWR, 0600);
        assert_true(fd >= 0);
        assert_int_equal(ftruncate(fd, 10), 0);
        assert_int_equal(close(fd), 0);

        struct ds_live *live;
        int shared = 0;
        assert_int_equal(ds_live_open(&live, "ttcp", "recv", "tcp", &shared, NULL), 0);
        assert_int_equal(shared, 1);
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        assert_true((size_t)st.st_size >= sizeof(struct ds_live_segment));
        ds_live_close(live);
        assert_int_equal(access(path, F_OK), -1);
}

/* Leaves a segment named for pid, as a process killed before ds_live_close would. */
static void leave_segment(pid_t pid, char *path, size_t len)
{
        char name[32]; /* "/dragstrip." and a pid fit with room to spare */
        snprintf(name, sizeof(name), "/%s%d", DS_LIVE_PREFIX, (int)pid);
        snprintf(path, len, "/dev/shm%s", name);
        int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0644);
        assert_true(fd >= 0);
        assert_int_equal(close(fd), 0);
}

static void test_live_open_sweeps_segments_of_dead_processes(void **state)
{
        (void)state;
        pid_t child = fork();
        assert_true(child >= 0);
        if (child == 0)
                _exit(0);
        assert_int_equal(waitpid(child, NULL, 0), child);
        char dead_path[64], alive_path[64];
        leave_segment(child, dead_path, sizeof(dead_path));
        /* pid 1 is always alive; its segment, if a test left one, must stay. */
        leave_segment(1, alive_path, sizeof(alive_path));

        struct ds_live *live;
        assert_int_equal(ds_live_open(&live, "ttcp", "send", "tcp", NULL, NULL), 0);
        assert_int_equal(access(dead_path, F_OK), -1);
        assert_int_equal(access(alive_path, F_OK), 0);
        ds_live_close(live);
        assert_int_equal(unlink(alive_path), 0);
}

static void test_live_falls_back_to_private_memory_when_shm_refused(void **state)
{
        (void)state;
        char path[64];
        segment_path(path, sizeof(path));
        /* No descriptor left for shm_open: the lowest free one is above the limit. */
        int lowest_free = dup(0);
        assert_true(lowest_free >= 0);
        assert_int_equal(close(lowest_free), 0);
        struct rlimit saved, tight;
        assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
        tight = saved;
        tight.rlim_cur = (rlim_t)lowest_free;
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &tight), 0);

        struct ds_live *live;
        int shared = -1;
        int rc = ds_live_open(&live, "ttcp", "send", "tcp", &shared, NULL);
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
        assert_int_equal(rc, 0);
        assert_int_equal(shared, 0);
        assert_int_equal(access(path, F_OK), -1);

        struct ds_live_segment *seg = ds_live_segment(live);
        assert_int_equal(seg->magic, DS_LIVE_MAGIC);
        ds_live_add(seg, 2, 20);
        struct ds_counters counters;
        ds_live_read(seg, &counters);
        assert_int_equal(counters.messages, 2);
        assert_int_equal(counters.bytes, 20);
        ds_live_close(live);
}

#define ADDERS 4
#define ADDS   100000

static void *add_many(void *arg)
{
        struct ds_live_segment *seg = arg;
        for (int i = 0; i < ADDS; i++) {
                ds_live_add(seg, 1, 1000);
                ds_live_fault(seg, DS_FAULT_REORDERED, 2);
        }
        return NULL;
}

static void test_live_counts_from_many_threads_without_loss(void **state)
{
        (void)state;
        struct ds_live *live;
        pthread_t threads[ADDERS];
        assert_int_equal(ds_live_open(&live, "sink", "recv", "udp", NULL, NULL), 0);
        struct ds_live_segment *seg = ds_live_segment(live);
        for (int i = 0; i < ADDERS; i++)
                assert_int_equal(pthread_create(&threads[i], NULL, add_many, seg), 0);
        for (int i = 0; i < ADDERS; i++)
                assert_int_equal(pthread_join(threads[i], NULL), 0);
        ds_live_fault(seg, DS_FAULT_LOST, 7);

        struct ds_counters counters;
        ds_live_read(seg, &counters);
        assert_int_equal(counters.messages, ADDERS * ADDS);
        assert_int_equal(counters.bytes, (uint64_t)ADDERS * ADDS * 1000);
        assert_int_equal(counters.faults[DS_FAULT_REORDERED], 2 * ADDERS * ADDS);
        assert_int_equal(counters.faults[DS_FAULT_LOST], 7);
        assert_int_equal(counters.faults[DS_FAULT_DUP], 0);
        ds_live_close(live);
}

static void test_fault_names_are_the_json_keys(void **state)
{
        (void)state;
        assert_string_equal(ds_fault_name(DS_FAULT_LOST), "lost");
        assert_string_equal(ds_fault_name(DS_FAULT_DUP), "dup");
        assert_string_equal(ds_fault_name(DS_FAULT_REORDERED), "reordered");
        assert_string_equal(ds_fault_name(DS_FAULT_CORRUPT), "corrupt");
        assert_string_equal(ds_fault_name(DS_FAULT_MALFORMED), "malformed");
        assert_string_equal(ds_fault_name(DS_FAULT_COUNT), "unknown");
}

/* Maps this process's own segment read-only, as tach does; *len gets its size. */
static const void *map_own(size_t *len)
{
        char path[64];
        segment_path(path, sizeof(path));
        int fd = open(path, O_RDONLY);
        assert_true(fd >= 0);
        struct stat st;
        assert_int_equal(fstat(fd, &st), 0);
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        assert_true(p != MAP_FAILED);
        assert_int_equal(close(fd), 0);
        *len = (size_t)st.st_size;
        return p;
}

static void test_live_slots_publish_each_stream_and_are_reused_once_ended(void **state)
{
        (void)state;
        struct ds_live *live;
        assert_int_equal(ds_live_open(&live, "blast", "send", "tcp", NULL, NULL), 0);
        ds_live_set_peer(live, "10.0.0.2");
        ds_live_start(live);
        struct ds_live_segment *seg = ds_live_segment(live);
        struct ds_live_slot *a = ds_live_slot_open(seg, DS_SLOT_STREAM, 0, "10.0.0.2");
        struct ds_live_slot *b = ds_live_slot_open(seg, DS_SLOT_STREAM, 1, "10.0.0.2");
        assert_non_null(a);
        assert_non_null(b);
        assert_ptr_not_equal(a, b);
        ds_live_stream_add(seg, a, 2, 2000);
        ds_live_stream_add(seg, b, 1, 500);
        ds_live_slot_fault(b, DS_FAULT_LOST, 4);

        size_t len;
        const void *mem = map_own(&len);
        static struct ds_live_view view;
        char note[128] = "";
        assert_int_equal(ds_live_parse(mem, len, &view, note, sizeof(note)), 0);
        assert_string_equal(view.tool, "blast");
        assert_string_equal(view.peer, "10.0.0.2");
        assert_int_equal(view.state, DS_LIVE_RUNNING);
        assert_true(view.start_ns > 0 && view.start_unix_ns > 0);
        assert_int_equal(view.counters.bytes, 2500);
        assert_int_equal(view.slot_count, 2);
        assert_int_equal(view.slots[0].counters.bytes, 2000);
        assert_int_equal(view.slots[1].index, 1);
        assert_int_equal(view.slots[1].counters.messages, 1);
        assert_int_equal(view.slots[1].counters.faults[DS_FAULT_LOST], 4);
        assert_false(view.slots[0].ended);

        /* Ended slots stay on show; a new stream takes a never-used slot first. */
        ds_live_slot_close(a);
        struct ds_live_slot *c = ds_live_slot_open(seg, DS_SLOT_DISK, 2, "/mnt/d2");
        assert_ptr_not_equal(c, a);
        assert_int_equal(ds_live_parse(mem, len, &view, note, sizeof(note)), 0);
        assert_int_equal(view.slot_count, 3);
        assert_true(view.slots[0].ended);
        assert_int_equal(view.slots[2].kind, DS_SLOT_DISK);
        assert_string_equal(view.slots[2].name, "/mnt/d2");

        /* Full: ended slots are claimed again, counting from zero; then NULL, which the
         * adders take. */
        struct ds_live_slot *last = NULL;
        for (unsigned i = 3; i < DS_LIVE_SLOTS; i++)
                assert_non_null(last = ds_live_slot_open(seg, DS_SLOT_STREAM, i, "x"));
        struct ds_live_slot *again = ds_live_slot_open(seg, DS_SLOT_STREAM, 9, "y");
        assert_ptr_equal(again, a);
        assert_int_equal(atomic_load(&again->bytes), 0);
        assert_null(ds_live_slot_open(seg, DS_SLOT_STREAM, 10, "z"));
        ds_live_stream_add(seg, NULL, 1, 1);
        ds_live_slot_fault(NULL, DS_FAULT_DUP, 1);
        ds_live_slot_close(NULL);
        (void)last;
        assert_int_equal(munmap((void *)mem, len), 0);
        ds_live_close(live);
}

/* A copy of this process's segment to damage, 8-byte aligned like a mapping. */
static uint64_t copy_words[(256 + DS_LIVE_SLOTS * 128) / 8 + 8];

static size_t copy_own(struct ds_live **live)
{
        assert_int_equal(ds_live_open(live, "sink", "recv", "udp", NULL, NULL), 0);
        ds_live_slot_open(ds_live_segment(*live), DS_SLOT_STREAM, 0, "peer");
        size_t len;
        const void *mem = map_own(&len);
        assert_true(len <= sizeof(copy_words));
        memcpy(copy_words, mem, len);
        assert_int_equal(munmap((void *)mem, len), 0);
        return len;
}

static void expect_rejected(size_t len, const char *words_in_note)
{
        static struct ds_live_view view;
        char note[128] = "";
        assert_int_equal(ds_live_parse(copy_words, len, &view, note, sizeof(note)), -EINVAL);
        if (!strstr(note, words_in_note))
                fail_msg("note '%s' does not say '%s'", note, words_in_note);
}

static void test_live_parse_rejects_future_truncated_and_garbage_segments(void **state)
{
        (void)state;
        struct ds_live *live;
        size_t len = copy_own(&live);
        struct ds_live_segment *seg = (struct ds_live_segment *)copy_words;
        static struct ds_live_view view;
        assert_int_equal(ds_live_parse(copy_words, len, &view, NULL, 0), 0);
        assert_int_equal(view.slot_count, 1);

        seg->version = DS_LIVE_VERSION + 1;
        expect_rejected(len, "version 3");
        /* Version 1, what older tools write: the header up to the faults, no slots. */
        seg->version = 1;
        assert_int_equal(ds_live_parse(copy_words, 200, &view, NULL, 0), 0);
        assert_string_equal(view.tool, "sink");
        assert_int_equal(view.slot_count, 0);
        expect_rejected(199, "truncated");
        seg->version = DS_LIVE_VERSION;
        expect_rejected(100, "truncated");
        expect_rejected(len - 1, "truncated");
        expect_rejected(3, "too short");
        seg->slot_count = 1000000;
        expect_rejected(len, "bad layout");
        seg->slot_count = DS_LIVE_SLOTS;
        seg->slot_offset = 4;
        expect_rejected(len, "bad layout");
        seg->slot_offset = 256;
        memset(seg->tool, 'A', sizeof(seg->tool));
        expect_rejected(len, "not terminated");
        strcpy(seg->tool, "sink");
        struct ds_live_slot *slot = (struct ds_live_slot *)((char *)copy_words + 256);
        atomic_store(&slot->state, 99);
        expect_rejected(len, "slot 0");
        atomic_store(&slot->state, DS_SLOT_ACTIVE);
        seg->magic = 0x12345678;
        expect_rejected(len, "not a dragstrip segment");
        /* Not yet filled in: neither an error nor a session. */
        seg->magic = 0;
        assert_int_equal(ds_live_parse(copy_words, len, &view, NULL, 0), -EAGAIN);
        seg->magic = DS_LIVE_MAGIC;

        /* Text that would steer a terminal comes out as '?'. */
        strcpy(seg->peer, "\x1b[2Jevil\n");
        assert_int_equal(ds_live_parse(copy_words, len, &view, NULL, 0), 0);
        assert_string_equal(view.peer, "?[2Jevil?");
        ds_live_close(live);
}

/* A tool's options as getopt_long reads them: -o and --output take a value, -q and
 * --quiet none, -v and --verbose one only within their word. */
static const char tool_shorts[] = ":o:qv::";
static const struct option tool_longs[] = {{"output", required_argument, NULL, 'o'},
                                           {"quiet", no_argument, NULL, 'q'},
                                           {"verbose", optional_argument, NULL, 'v'},
                                           {NULL, 0, NULL, 0}};

static void test_live_no_stats_as_an_options_value_is_left_to_the_tool(void **state)
{
        (void)state;
        char *argv[] = {"tool", "-o",         "--no-stats", "--output",   "--no-stats",
                        "-qo",  "--no-stats", "--out",      "--no-stats", "host",
                        "-o",   "--no-stats", NULL};
        char *expected[] = {"tool",       "-o",   "--no-stats", "--output",
                            "--no-stats", "-qo",  "--no-stats", "--out",
                            "--no-stats", "host", "-o",         "--no-stats"};
        assert_int_equal(ds_live_take_option(12, argv, tool_shorts, tool_longs), 12);
        for (int i = 0; i < 12; i++)
                assert_string_equal(argv[i], expected[i]);
        assert_null(argv[12]);

        struct ds_live *live;
        int shared = -1;
        assert_int_equal(ds_live_open(&live, "tool", "send", "tcp", &shared, NULL), 0);
        assert_int_equal(shared, 1); /* the values above did not turn publishing off */
        ds_live_close(live);
}

/* Last: --no-stats holds for the rest of the process. */
static void test_live_no_stats_option_keeps_counters_private(void **state)
{
        (void)state;
        char path[64];
        segment_path(path, sizeof(path));
        char *plain[] = {"blast", "-l", "1M", "host", NULL};
        assert_int_equal(ds_live_take_option(4, plain, tool_shorts, tool_longs), 4);
        /* Beside options whose value is in their own word, or that take none, it is taken. */
        char *words[] = {"tool",          "-q",         "--no-stats", "-ofile",     "--no-stats",
                         "--output=file", "--no-stats", "-v",         "--no-stats", "--verbose",
                         "--no-stats",    "-",          "--no-stats", NULL};
        char *kept[] = {"tool", "-q", "-ofile", "--output=file", "-v", "--verbose", "-"};
        assert_int_equal(ds_live_take_option(13, words, tool_shorts, tool_longs), 7);
        for (int i = 0; i < 7; i++)
                assert_string_equal(words[i], kept[i]);
        assert_null(words[7]);
        char *argv[] = {"blast", "--no-stats", "-l", "1M", "host", "--", "--no-stats", NULL};
        assert_int_equal(ds_live_take_option(7, argv, tool_shorts, tool_longs), 6);
        assert_string_equal(argv[1], "-l");
        assert_string_equal(argv[3], "host");
        assert_string_equal(argv[5], "--no-stats"); /* after "--": an operand */
        assert_null(argv[6]);
        struct ds_live *live;
        int shared = -1;
        assert_int_equal(ds_live_open(&live, "blast", "send", "tcp", &shared, NULL), 0);
        assert_int_equal(shared, 0);
        assert_int_equal(access(path, F_OK), -1);
        struct ds_live_segment *seg = ds_live_segment(live);
        assert_null(ds_live_slot_open(seg, DS_SLOT_STREAM, 0, "x"));
        ds_live_stream_add(seg, NULL, 3, 30);
        struct ds_counters counters;
        ds_live_read(seg, &counters);
        assert_int_equal(counters.bytes, 30);
        ds_live_close(live);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_live_segment_appears_in_dev_shm_and_goes_at_close),
            cmocka_unit_test(test_live_truncates_long_text_safely),
            cmocka_unit_test(test_live_replaces_a_stale_segment_with_our_pid),
            cmocka_unit_test(test_live_open_sweeps_segments_of_dead_processes),
            cmocka_unit_test(test_live_falls_back_to_private_memory_when_shm_refused),
            cmocka_unit_test(test_live_counts_from_many_threads_without_loss),
            cmocka_unit_test(test_fault_names_are_the_json_keys),
            cmocka_unit_test(test_live_slots_publish_each_stream_and_are_reused_once_ended),
            cmocka_unit_test(test_live_parse_rejects_future_truncated_and_garbage_segments),
            cmocka_unit_test(test_live_no_stats_as_an_options_value_is_left_to_the_tool),
            cmocka_unit_test(test_live_no_stats_option_keeps_counters_private),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
