/* The receiver's credit grants (session.c) over a link that only records what it sent. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dragstrip/error.h>
#include <dragstrip/session.h>

static uint64_t last_limit;
static unsigned credits_sent;

static int record_ctl(struct ds_link *link, uint8_t type, const void *payload, size_t len,
                      struct ds_error *err)
{
        (void)link, (void)err;
        union ds_wire_ctl ctl;
        assert_int_equal(type, DS_WIRE_CREDIT);
        assert_int_equal(ds_wire_ctl_decode(type, payload, len, &ctl), DS_WIRE_OK);
        last_limit = ctl.credit.limit;
        credits_sent++;
        return 0;
}

static const struct ds_link_ops recorder = {.name = "recorder", .send_ctl = record_ctl};
static struct ds_link link = {.ops = &recorder};

/* A receiver that has granted its first window of 32 messages. */
static int setup(void **state)
{
        (void)state;
        struct ds_session *s = test_malloc(sizeof(*s));
        *s = (struct ds_session){.link = &link, .credits = true, .window = 32, .granted = 32};
        last_limit = 0;
        credits_sent = 0;
        *state = s;
        return 0;
}

static int teardown(void **state)
{
        test_free(*state);
        return 0;
}

static void test_session_grants_a_quarter_window_at_a_time(void **state)
{
        struct ds_session *s = *state;
        struct ds_error err;
        assert_int_equal(ds_session_released(s, 7, &err), 0);
        assert_int_equal(credits_sent, 0);
        assert_int_equal(ds_session_released(s, 1, &err), 0);
        assert_int_equal(credits_sent, 1);
        assert_int_equal(last_limit, 8 + 32);
}

static void test_session_idle_repeats_a_grant_the_sender_may_have_lost(void **state)
{
        struct ds_session *s = *state;
        struct ds_error err;
        assert_int_equal(ds_session_released(s, 20, &err), 0);
        assert_int_equal(last_limit, 52);
        assert_int_equal(ds_session_released(s, 3, &err), 0); /* not a quarter window yet */
        assert_int_equal(ds_session_idle(s, &err), 0);
        assert_int_equal(last_limit, 23 + 32);
}

static void test_session_idle_never_lets_a_paused_sender_two_windows_ahead(void **state)
{
        struct ds_session *s = *state;
        struct ds_error err;
        /* Nothing arrives for many silences: one message more, then the same grant. */
        for (int i = 0; i < 10; i++)
                assert_int_equal(ds_session_idle(s, &err), 0);
        assert_int_equal(credits_sent, 10);
        assert_int_equal(last_limit, 32 + 1);
        /* Once messages arrive, a later silence may add one more again. */
        assert_int_equal(ds_session_released(s, 1, &err), 0);
        assert_int_equal(ds_session_idle(s, &err), 0);
        assert_int_equal(last_limit, 1 + 32 + 1);
}

static void test_session_idle_unsticks_a_lost_tail(void **state)
{
        struct ds_session *s = *state;
        struct ds_error err;
        /* The whole first window was lost: the sender waits at 32; one more lets it send
         * message 32, whose arrival makes the rest of the window due. */
        assert_int_equal(ds_session_idle(s, &err), 0);
        assert_int_equal(last_limit, 33);
        assert_int_equal(ds_session_released(s, 33, &err), 0);
        assert_int_equal(last_limit, 33 + 32);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_session_grants_a_quarter_window_at_a_time, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(
                test_session_idle_repeats_a_grant_the_sender_may_have_lost, setup, teardown),
            cmocka_unit_test_setup_teardown(
                test_session_idle_never_lets_a_paused_sender_two_windows_ahead, setup, teardown),
            cmocka_unit_test_setup_teardown(test_session_idle_unsticks_a_lost_tail, setup,
                                            teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
