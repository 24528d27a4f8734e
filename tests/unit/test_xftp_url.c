/* xftp's URLs and credentials: what parses, what is refused, and what ~/.netrc gives. */
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

#include <dragstrip/error.h>

#include "url.h"

static void test_url_with_everything(void **state)
{
        (void)state;
        struct url url;

        assert_int_equal(url_parse("ftp://alice:p%40ss@files.example:2121/a/b%20c.img", &url), 0);
        assert_string_equal(url.user, "alice");
        assert_string_equal(url.pass, "p@ss");
        assert_true(url.has_user && url.has_pass);
        assert_string_equal(url.host, "files.example");
        assert_int_equal(url.port, 2121);
        assert_string_equal(url.path, "a/b c.img");
}

static void test_url_defaults_and_ipv6(void **state)
{
        (void)state;
        struct url url;

        assert_int_equal(url_parse("FTP://[::1]/x", &url), 0);
        assert_string_equal(url.host, "::1");
        assert_int_equal(url.port, 21);
        assert_false(url.has_user);
        assert_string_equal(url.path, "x");
        assert_int_equal(url_parse("ftp://[fe80::1]:99", &url), 0);
        assert_int_equal(url.port, 99);
        assert_string_equal(url.path, "");
        assert_int_equal(url_parse("ftp://bob@h/", &url), 0);
        assert_true(url.has_user);
        assert_false(url.has_pass);
}

static void test_url_refuses_what_cannot_be_sent(void **state)
{
        (void)state;
        struct url url;
        static const char *const junk[] = {
            "http://h/x",   "ftp://",       "ftp:///x",     "ftp://h:0/x",     "ftp://h:65536/",
            "ftp://h:/x",   "ftp://h:2x/",  "ftp://[::1/x", "ftp://[::1]x/",   "ftp://h/a%0Ab",
            "ftp://h/a%00", "ftp://h/a%zz", "ftp://h/a%4",  "ftp://u%0D:p@h/", "ftp://u:p%0A@h/x",
        };
        for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++)
                if (url_parse(junk[i], &url) != -EINVAL)
                        fail_msg("'%s' should be -EINVAL", junk[i]);
}

/* Writes text to a netrc file of the given mode and returns its path (static). */
static const char *netrc_file(const char *text, mode_t mode)
{
        static char path[64];
        strcpy(path, "/tmp/ds-netrc-XXXXXX");
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        assert_int_equal(fchmod(fd, mode), 0);
        assert_int_equal(close(fd), 0);
        return path;
}

static void test_netrc_machine_then_default(void **state)
{
        (void)state;
        struct url url;
        struct ds_error err = {{0}};
        const char *path = netrc_file("machine other login x password y\n"
                                      "machine h login bob password secret\n"
                                      "default login anon password guest\n",
                                      0600);

        assert_int_equal(url_parse("ftp://h/f", &url), 0);
        assert_int_equal(url_credentials(&url, path, false, &err), 0);
        assert_string_equal(url.user, "bob");
        assert_string_equal(url.pass, "secret");
        assert_int_equal(url_parse("ftp://elsewhere/f", &url), 0);
        assert_int_equal(url_credentials(&url, path, false, &err), 0);
        assert_string_equal(url.user, "anon");
        assert_string_equal(url.pass, "guest");
        /* another login's password is never sent */
        assert_int_equal(url_parse("ftp://carol@h/f", &url), 0);
        assert_int_equal(url_credentials(&url, path, false, &err), -ENOTTY);
        assert_string_equal(url.user, "carol");
        assert_false(url.has_pass);
        unlink(path);
}

static void test_netrc_password_others_can_reach_is_refused(void **state)
{
        (void)state;
        struct url url;
        struct ds_error err = {{0}};
        const char *path = netrc_file("machine h login bob password secret\n", 0640);

        assert_int_equal(url_parse("ftp://h/f", &url), 0);
        assert_int_equal(url_credentials(&url, path, false, &err), -EPERM);
        assert_non_null(strstr(err.text, "chmod go="));
        assert_false(url.has_pass);
        /* a password in the URL needs nothing of the file */
        assert_int_equal(url_parse("ftp://bob:pw@h/f", &url), 0);
        assert_int_equal(url_credentials(&url, path, false, &err), 0);
        assert_string_equal(url.pass, "pw");
        unlink(path);
        /* a login without a password may sit in a file others read */
        path = netrc_file("machine h login carol\n", 0644);
        assert_int_equal(url_parse("ftp://h/f", &url), 0);
        assert_int_equal(url_credentials(&url, path, false, &err), -ENOTTY);
        assert_string_equal(url.user, "carol");
        assert_non_null(strstr(err.text, "no password for carol@h"));
        unlink(path);
}

static void test_url_show_hides_the_password(void **state)
{
        (void)state;
        char shown[256];

        url_show("ftp://bob:s3cret@h:21/x", shown, sizeof(shown));
        assert_string_equal(shown, "ftp://bob:***@h:21/x");
        /* Only text that failed to parse is shown: hiding too much beats showing a secret. */
        url_show("ftp://bob@h/x:y@z", shown, sizeof(shown));
        assert_string_equal(shown, "ftp://bob@h/x:***@z");
        url_show("ftp://alice:Hunt/er2pw@host/x", shown, sizeof(shown));
        assert_string_equal(shown, "ftp://alice:***@host/x");
        url_show("ftp:/alice:Hunter2pw@host/x", shown, sizeof(shown));
        assert_null(strstr(shown, "Hunter2pw"));
        url_show("ftp://h/x", shown, sizeof(shown));
        assert_string_equal(shown, "ftp://h/x");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_url_with_everything),
            cmocka_unit_test(test_url_defaults_and_ipv6),
            cmocka_unit_test(test_url_refuses_what_cannot_be_sent),
            cmocka_unit_test(test_netrc_machine_then_default),
            cmocka_unit_test(test_netrc_password_others_can_reach_is_refused),
            cmocka_unit_test(test_url_show_hides_the_password),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
