/* Stopping, durations and the serving helpers: stop.h, ds_duration_ms, serve.h. */
#include <dragstrip/clock.h>
#include <dragstrip/serve.h>
#include <dragstrip/stop.h>

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

static void test_duration_ms_rounds_up_and_saturates(void **state)
{
        (void)state;
        assert_int_equal(ds_duration_ms(0), 0);
        assert_int_equal(ds_duration_ms(-3), 0);
        assert_int_equal(ds_duration_ms(NAN), 0);
        assert_int_equal(ds_duration_ms(0.0001), 1);
        assert_int_equal(ds_duration_ms(1.5), 1500);
        /* past 24.8 days an int of milliseconds would wrap: it saturates instead */
        assert_int_equal(ds_duration_ms(2200000), INT_MAX);
        assert_int_equal(ds_duration_ms(365.0 * 86400), INT_MAX);
}

static void test_poll_one_waits_its_time_and_sees_data(void **state)
{
        (void)state;
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        uint64_t t0 = ds_now_ns();
        assert_int_equal(ds_poll_one(fds[0], POLLIN, 150), 0);
        assert_true(ds_now_ns() - t0 >= 150000000u);
        assert_int_equal(write(fds[1], "x", 1), 1);
        assert_int_equal(ds_poll_one(fds[0], POLLIN, -1), 1);
        close(fds[0]);
        close(fds[1]);
}

static void test_budget_takes_within_its_limit_only(void **state)
{
        (void)state;
        struct ds_budget b;
        ds_budget_init(&b, 100);
        assert_true(ds_budget_take(&b, 60));
        assert_false(ds_budget_take(&b, 41));
        assert_true(ds_budget_take(&b, 40));
        assert_false(ds_budget_take(&b, 1));
        assert_false(ds_budget_take(&b, UINT64_MAX)); /* no wrap */
        ds_budget_give(&b, 60);
        assert_true(ds_budget_take(&b, 60));
        assert_true(ds_budget_default() > 0);
}

static void test_shared_budget_is_one_across_processes(void **state)
{
        (void)state;
        struct ds_shared_budget *b;
        assert_int_equal(ds_shared_budget_create(&b, 100, 4), 0);
        pid_t child = fork();
        assert_true(child >= 0);
        if (child == 0) /* a session that takes and dies holding it */
                _exit(ds_shared_budget_take(b, 1, 60) ? 0 : 1);
        int status;
        assert_int_equal(waitpid(child, &status, 0), child);
        assert_int_equal(status, 0);
        assert_false(ds_shared_budget_take(b, 0, 41));
        assert_true(ds_shared_budget_take(b, 0, 40));
        assert_false(ds_shared_budget_take(b, 4, 0)); /* no such slot */
        ds_shared_budget_release(b, 1);
        assert_int_equal(ds_shared_budget_used(b), 40);
        ds_shared_budget_give(b, 0, 100); /* never more than the slot holds */
        assert_int_equal(ds_shared_budget_used(b), 0);
        assert_true(ds_shared_budget_take(b, 2, 100));
        ds_shared_budget_destroy(b);
}

static void test_shared_budget_survives_holders_killed_at_any_instant(void **state)
{
        (void)state;
        struct ds_shared_budget *b;
        assert_int_equal(ds_shared_budget_create(&b, 1000, 2), 0);
        for (int round = 0; round < 20; round++) {
                pid_t child = fork();
                assert_true(child >= 0);
                if (child == 0)
                        for (;;)
                                if (ds_shared_budget_take(b, 1, 10))
                                        ds_shared_budget_give(b, 1, 10);
                nanosleep(&(struct timespec){.tv_nsec = 2000000 + round * 100000}, NULL);
                kill(child, SIGKILL);
                assert_int_equal(waitpid(child, NULL, 0), child);
                ds_shared_budget_release(b, 1); /* what the listener does when it reaps */
                assert_int_equal(ds_shared_budget_used(b), 0);
        }
        assert_true(ds_shared_budget_take(b, 0, 1000));
        ds_shared_budget_destroy(b);
}

static void test_deadline_left_counts_down_to_zero(void **state)
{
        (void)state;
        uint64_t d = ds_deadline_in(1000);
        int left = ds_deadline_left_ms(d);
        assert_true(left > 900 && left <= 1000);
        assert_int_equal(ds_deadline_left_ms(ds_now_ns() - 1), 0);
}

static void test_accept_survives_shortages_and_logs_once(void **state)
{
        (void)state;
        char text[512] = {0};
        FILE *log = fmemopen(text, sizeof(text) - 1, "w");
        assert_non_null(log);
        struct ds_accept_guard g = {0};
        uint64_t t0 = ds_now_ns();
        assert_true(ds_accept_survive(&g, -EMFILE, "test", log));
        assert_true(ds_accept_survive(&g, -ENFILE, "test", log));
        assert_true(ds_now_ns() - t0 >= 2u * DS_ACCEPT_BACKOFF_MS * 1000000u); /* backed off */
        assert_true(ds_accept_survive(&g, -ECONNABORTED, "test", log));
        assert_true(ds_accept_survive(&g, -ETIMEDOUT, "test", log));
        assert_false(ds_accept_survive(&g, -EBADF, "test", log));
        ds_accept_ok(&g);
        assert_true(ds_accept_survive(&g, -EAGAIN, "test", log)); /* a new run, soon after */
        g.logged_ns -= (DS_ACCEPT_LOG_S + 1) * 1000000000ull;
        ds_accept_ok(&g);
        assert_true(ds_accept_survive(&g, -EMFILE, "test", log)); /* a minute on: said again */
        fclose(log);
        assert_int_equal(g.shortages, 4);
        int lines = 0;
        for (const char *p = text; *p; p++)
                lines += *p == '\n';
        assert_int_equal(lines, 2);
        assert_non_null(strstr(text, "test: Too many open files"));
}

/* Last: the stop is for the whole process and stays. */
static void test_a_signal_ends_long_waits_and_sets_the_status(void **state)
{
        (void)state;
        atomic_bool flag = false;
        assert_int_equal(ds_stop_catch(&flag, NULL), 0);
        assert_false(ds_stopping());
        assert_int_equal(ds_stop_status(), 0);
        assert_int_equal(ds_stop_signal(), 0);
        assert_int_equal(raise(SIGTERM), 0);
        assert_true(ds_stopping());
        assert_true(atomic_load(&flag));
        assert_int_equal(ds_stop_signal(), SIGTERM);
        assert_int_equal(ds_stop_status(), 143);

        int fds[2];
        assert_int_equal(pipe(fds), 0);
        uint64_t t0 = ds_now_ns();
        assert_int_equal(ds_poll_one(fds[0], POLLIN, -1), -EINTR);
        assert_int_equal(ds_poll_one(fds[0], POLLIN, 60000), -EINTR);
        assert_int_equal(ds_sleep_until(ds_now_ns() + 60000000000u), -EINTR);
        assert_true(ds_now_ns() - t0 < 500000000u);
        /* a short wait runs its course, so a tool can still finish its exchange */
        assert_int_equal(ds_poll_one(fds[0], POLLIN, 30), 0);
        assert_true(ds_now_ns() - t0 >= 30000000u);
        close(fds[0]);
        close(fds[1]);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_duration_ms_rounds_up_and_saturates),
            cmocka_unit_test(test_poll_one_waits_its_time_and_sees_data),
            cmocka_unit_test(test_budget_takes_within_its_limit_only),
            cmocka_unit_test(test_shared_budget_is_one_across_processes),
            cmocka_unit_test(test_shared_budget_survives_holders_killed_at_any_instant),
            cmocka_unit_test(test_deadline_left_counts_down_to_zero),
            cmocka_unit_test(test_accept_survives_shortages_and_logs_once),
            cmocka_unit_test(test_a_signal_ends_long_waits_and_sets_the_status),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
