/* The live-counter segment in /dev/shm. */
#include <errno.h>
#include <fcntl.h>
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
        assert_int_equal(st.st_size, sizeof(struct ds_live_segment));
        assert_int_equal(st.st_mode & 0777, 0644);
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
        assert_int_equal(st.st_size, sizeof(struct ds_live_segment));
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
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
