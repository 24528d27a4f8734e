/* Which sends the verbs link asks to be signaled (link_verbs_data.c), over a queue pair
 * whose post only records: a sender's buffer comes back only with a signal, so a large
 * message is signaled on its own, small ones once per VB_SIGNAL_EVERY, and the last of
 * every post always. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "link_verbs_data.c"

#define POSTED_MAX 64u

static struct {
        bool signaled[POSTED_MAX];
        unsigned posted;
} fake;

static int fake_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
        (void)qp, (void)bad;
        for (; wr; wr = wr->next)
                fake.signaled[fake.posted++] = wr->send_flags & IBV_SEND_SIGNALED;
        return 0;
}

static struct ibv_context fake_context = {.ops = {.post_send = fake_post_send}};
static struct ibv_qp fake_qp = {.context = &fake_context};

/* One post of n data messages of len bytes each; returns where its first one landed. */
static unsigned post(struct verbs_link *v, unsigned n, uint32_t len)
{
        static uint8_t payload[1];
        struct sq_batch b = {.n = 0};
        struct ds_error err;
        unsigned first = fake.posted;
        for (unsigned i = 0; i < n; i++)
                sq_add(v, &b, VB_SQ_DATA, IBV_WR_RDMA_WRITE_WITH_IMM, payload, len, 1);
        assert_int_equal(sq_flush(v, &b, &err), 0);
        assert_int_equal(fake.posted, first + n);
        return first;
}

static struct verbs_link *fresh_link(void)
{
        static struct verbs_link v;
        memset(&v, 0, sizeof(v));
        memset(&fake, 0, sizeof(fake));
        v.qp = &fake_qp;
        return &v;
}

static void test_large_messages_posted_together_are_each_signaled(void **state)
{
        (void)state;
        struct verbs_link *v = fresh_link();
        unsigned at = post(v, 6, 4u << 20); /* xftp: the blocks read, in one post */
        for (unsigned i = 0; i < 6; i++)
                assert_true(fake.signaled[at + i]);
}

static void test_small_messages_are_signaled_once_per_sixteen_and_at_the_end(void **state)
{
        (void)state;
        struct verbs_link *v = fresh_link();
        unsigned at = post(v, 20, 64);
        for (unsigned i = 0; i < 20; i++)
                assert_int_equal(fake.signaled[at + i], i == VB_SIGNAL_EVERY - 1 || i == 19);
}

static void test_a_megabyte_of_sends_is_signaled_and_each_post_counts_afresh(void **state)
{
        (void)state;
        struct verbs_link *v = fresh_link();
        /* 256 KiB each: the fourth brings a megabyte. A post's last is signaled anyway, so
         * the next post counts from nothing. */
        unsigned at = post(v, 6, 256u << 10);
        bool want[6] = {false, false, false, true, false, true};
        for (unsigned i = 0; i < 6; i++)
                assert_int_equal(fake.signaled[at + i], want[i]);
        at = post(v, 3, 512u << 10);
        assert_false(fake.signaled[at]);
        assert_true(fake.signaled[at + 1]);
        assert_true(fake.signaled[at + 2]);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_large_messages_posted_together_are_each_signaled),
            cmocka_unit_test(test_small_messages_are_signaled_once_per_sixteen_and_at_the_end),
            cmocka_unit_test(test_a_megabyte_of_sends_is_signaled_and_each_post_counts_afresh),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
