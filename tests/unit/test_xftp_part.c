/* A partial download's resume point (xftp/client/part.h) when its syncs fail: what it
 * claims to keep, and what the file then holds. fdatasync() and fsetxattr() are wrapped
 * (-Wl,--wrap): a test decides which syncs fail and whether the file system keeps the
 * point as an attribute, as a disk that refuses writeback or one without user xattrs
 * would. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "part.h"

#define MIB (1ull << 20)

int __real_fdatasync(int fd);
int __wrap_fdatasync(int fd);
int __wrap_fsetxattr(int fd, const char *name, const void *value, size_t size, int flags);

static unsigned syncs_to_pass; /* fdatasync succeeds this many more times, then fails */
static bool attributes_kept;   /* whether fsetxattr succeeds (else ENOTSUP) */

int __wrap_fdatasync(int fd)
{
        if (syncs_to_pass == 0) {
                errno = EIO;
                return -1;
        }
        syncs_to_pass--;
        return __real_fdatasync(fd);
}

int __wrap_fsetxattr(int fd, const char *name, const void *value, size_t size, int flags)
{
        (void)fd, (void)name, (void)value, (void)size, (void)flags;
        if (attributes_kept)
                return 0;
        errno = ENOTSUP;
        return -1;
}

/* A partial of size bytes in a temporary file. */
static int partial_of(uint64_t size)
{
        char path[] = "/tmp/test_xftp_part.XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        unlink(path);
        assert_int_equal(ftruncate(fd, (off_t)size), 0);
        return fd;
}

static uint64_t size_of(int fd)
{
        struct stat st;
        assert_int_equal(fstat(fd, &st), 0);
        return (uint64_t)st.st_size;
}

/* A resumed partial (4 MiB before this run) on a file system with no attributes: its
 * point lives in its size. A failed sync keeps the 4 MiB the run began with, and the
 * partial holds no more, so a resume cannot take the 4 MiB above for whole. */
static void failed_sync_without_attributes_cuts_to_the_start(void **state)
{
        (void)state;
        int fd = partial_of(8 * MIB);
        struct part_whole w = {.fd = fd, .whole = 4 * MIB, .recorded = 4 * MIB};
        syncs_to_pass = 0;
        attributes_kept = false;
        assert_int_equal(part_record_whole(8 * MIB, &w), -EIO);
        assert_int_equal(part_whole_final(&w), 0); /* told already, by the transfer */
        assert_int_equal(part_whole_kept(&w, 8 * MIB), 4 * MIB);
        assert_int_equal(size_of(fd), 4 * MIB);
        close(fd);
}

/* A fresh partial whose sync at 6 MiB passes, then the last sync fails: 6 MiB kept and the
 * partial cut there (the blocks above may be lost, whichever order they came in). With
 * attributes the point is user.xftp.whole; without, the size that sync made durable, not
 * the start of the run. */
static void point_at_6_mib_then_a_failed_sync(bool attributes)
{
        int fd = partial_of(8 * MIB);
        struct part_whole w = {.fd = fd, .marks = attributes};
        syncs_to_pass = 1;
        attributes_kept = attributes;
        assert_int_equal(part_record_whole(6 * MIB, &w), 0);
        assert_int_equal(w.recorded, 6 * MIB);
        w.whole = 8 * MIB;                            /* written since, less than a second later */
        assert_int_equal(part_whole_final(&w), -EIO); /* its own: for the words to tell */
        assert_int_equal(part_whole_kept(&w, 8 * MIB), 6 * MIB);
        assert_int_equal(size_of(fd), 6 * MIB);
        close(fd);
}

static void failed_sync_without_attributes_keeps_what_synced(void **state)
{
        (void)state;
        point_at_6_mib_then_a_failed_sync(false);
}

static void failed_last_sync_cuts_to_the_point_recorded(void **state)
{
        (void)state;
        point_at_6_mib_then_a_failed_sync(true);
}

/* Every sync passes: the whole prefix is kept and nothing is cut, and a second final
 * neither syncs nor cuts again. */
static void good_syncs_keep_the_whole_prefix(void **state)
{
        (void)state;
        int fd = partial_of(8 * MIB);
        struct part_whole w = {.fd = fd};
        syncs_to_pass = 1;
        attributes_kept = false;
        w.whole = 8 * MIB;
        assert_int_equal(part_whole_final(&w), 0);
        assert_int_equal(part_whole_final(&w), 0); /* would fail, had it synced again */
        assert_int_equal(w.failed, 0);
        assert_int_equal(part_whole_kept(&w, 8 * MIB), 8 * MIB);
        assert_int_equal(size_of(fd), 8 * MIB);
        close(fd);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(failed_sync_without_attributes_cuts_to_the_start),
            cmocka_unit_test(failed_sync_without_attributes_keeps_what_synced),
            cmocka_unit_test(failed_last_sync_cuts_to_the_point_recorded),
            cmocka_unit_test(good_syncs_keep_the_whole_prefix),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
