/* File windows mapped for a TLS sender (xftp/common/filemap.h): the windows cover the file
 * and stop at its end, and a file that shrinks under a guarded read is reported, not a
 * crash, while a fault outside any guard still is one. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "filemap.h"

#define TAIL 5000u /* the file's bytes past its first window */

/* A file of one window and TAIL bytes, byte i holding i * 7 mod 251, already unlinked. */
static int patterned_file(void)
{
        char path[] = "/tmp/test_xftp_filemap.XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        unlink(path);
        size_t len = XFTP_FILEMAP_WINDOW + TAIL;
        unsigned char *bytes = malloc(len);
        assert_non_null(bytes);
        for (size_t i = 0; i < len; i++)
                bytes[i] = (unsigned char)(i * 7 % 251);
        assert_int_equal(write(fd, bytes, len), (ssize_t)len);
        free(bytes);
        return fd;
}

/* The patterned file, with m mapping its first window. */
static int mapped_file(struct xftp_filemap *m)
{
        int fd = patterned_file();
        xftp_filemap_init(m);
        assert_int_equal(xftp_filemap_at(m, fd, 0), 1);
        return fd;
}

static bool holds_pattern(const struct xftp_filemap *m)
{
        for (size_t i = 0; i < m->len; i++)
                if ((unsigned char)m->data[i] != (unsigned char)((m->offset + i) * 7 % 251))
                        return false;
        return true;
}

static void test_windows_cover_the_file_up_to_its_end(void **state)
{
        (void)state;
        struct xftp_filemap m;
        int fd = patterned_file();

        xftp_filemap_init(&m);
        assert_int_equal(xftp_filemap_at(&m, fd, 12345), 1);
        assert_int_equal(m.offset, 0);
        assert_int_equal(m.len, XFTP_FILEMAP_WINDOW);
        assert_true(holds_pattern(&m));
        assert_int_equal(xftp_filemap_at(&m, fd, XFTP_FILEMAP_WINDOW + 10), 1);
        assert_int_equal(m.offset, XFTP_FILEMAP_WINDOW);
        assert_int_equal(m.len, TAIL);
        assert_true(holds_pattern(&m));
        assert_int_equal(xftp_filemap_at(&m, fd, XFTP_FILEMAP_WINDOW + TAIL), 0);
        assert_null(m.data);
        xftp_filemap_release(&m);
        close(fd);
}

static void test_a_guard_over_a_whole_file_reports_nothing(void **state)
{
        (void)state;
        struct xftp_filemap m;
        int fd = mapped_file(&m);

        xftp_filemap_guard(&m);
        bool pattern = holds_pattern(&m);
        assert_false(xftp_filemap_unguard(&m));
        assert_true(pattern);
        assert_non_null(m.data);
        xftp_filemap_release(&m);
        close(fd);
}

static void test_a_file_shrunk_under_a_guard_reads_zeros_and_says_so(void **state)
{
        (void)state;
        struct xftp_filemap m;
        int fd = mapped_file(&m);
        long page = sysconf(_SC_PAGESIZE);

        assert_int_equal(ftruncate(fd, page), 0);
        xftp_filemap_guard(&m);
        unsigned char first = (unsigned char)m.data[1];
        unsigned char beyond = (unsigned char)m.data[3 * page + 1];
        unsigned char last = (unsigned char)m.data[m.len - 1];
        assert_true(xftp_filemap_unguard(&m));
        assert_int_equal(first, 7);
        assert_int_equal(beyond, 0);
        assert_int_equal(last, 0);
        assert_null(m.data);
        close(fd);
}

static void test_a_fault_outside_a_guard_is_not_swallowed(void **state)
{
        (void)state;
        int fd = patterned_file();
        long page = sysconf(_SC_PAGESIZE);
        pid_t child = fork();

        assert_true(child >= 0);
        if (child == 0) {
                struct xftp_filemap m;
                signal(SIGBUS, SIG_DFL); /* not cmocka's, which would report and go on */
                xftp_filemap_init(&m);
                if (xftp_filemap_at(&m, fd, 0) != 1)
                        _exit(3);
                xftp_filemap_guard(&m); /* the handler is in place from here */
                xftp_filemap_unguard(&m);
                if (ftruncate(fd, page) != 0)
                        _exit(3);
                volatile unsigned char beyond = (unsigned char)m.data[3 * page];
                (void)beyond;
                _exit(0);
        }
        int status = 0;
        assert_int_equal(waitpid(child, &status, 0), child);
        assert_true(WIFSIGNALED(status));
        assert_int_equal(WTERMSIG(status), SIGBUS);
        close(fd);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_windows_cover_the_file_up_to_its_end),
            cmocka_unit_test(test_a_guard_over_a_whole_file_reports_nothing),
            cmocka_unit_test(test_a_file_shrunk_under_a_guard_reads_zeros_and_says_so),
            cmocka_unit_test(test_a_fault_outside_a_guard_is_not_swallowed),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
