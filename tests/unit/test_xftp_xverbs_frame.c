/* The verbs data channel's framing (xverbs.c) over a link that only records: a block sent
 * from the pipeline's memory is copied into one message, its data first and its header
 * last; a block larger than a buffer is cut into messages, each with its header; a block
 * in a buffer the channel lent goes in place; bytes taken before a post fails are kept
 * and posted by the next call, never offered twice. Receiving: a message reads as its
 * header then its data, the data is lent where it lies, slots go back in arrival order
 * whatever the order of the loans' return, and a message that is not a framed block is
 * refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "xverbs.c"

#define POSTS_MAX 32u

/* What the fake link saw and will say. */
static struct {
        struct ds_msg posted[POSTS_MAX];
        unsigned posts;
        int fail_next_send; /* a negative errno the next send returns, posting nothing */
        unsigned reaped;    /* posts handed back by reap */
        struct ds_msg arriving[POSTS_MAX];
        unsigned arrivals, delivered;
        uint64_t released_seq[POSTS_MAX];
        unsigned released;
} fake;

static int fake_send(struct ds_link *link, const struct ds_msg *msgs, unsigned n,
                     struct ds_error *err)
{
        (void)link, (void)err;
        if (fake.fail_next_send) {
                int rc = fake.fail_next_send;
                fake.fail_next_send = 0;
                return rc;
        }
        for (unsigned i = 0; i < n; i++)
                fake.posted[fake.posts++] = msgs[i];
        return (int)n;
}

/* Every post has completed: its buffer is free again. */
static int fake_reap(struct ds_link *link, void **bufs, unsigned max, int timeout_ms,
                     struct ds_error *err)
{
        (void)link, (void)timeout_ms, (void)err;
        unsigned got = 0;
        while (got < max && fake.reaped < fake.posts)
                bufs[got++] = fake.posted[fake.reaped++].buf;
        return (int)got;
}

static int fake_recv(struct ds_link *link, struct ds_msg *msgs, unsigned max, int timeout_ms,
                     struct ds_error *err)
{
        (void)link, (void)max, (void)timeout_ms, (void)err;
        if (fake.delivered == fake.arrivals)
                return 0;
        msgs[0] = fake.arriving[fake.delivered++];
        return 1;
}

static void fake_release(struct ds_link *link, const struct ds_msg *msgs, unsigned n)
{
        (void)link;
        for (unsigned i = 0; i < n; i++)
                fake.released_seq[fake.released++] = msgs[i].seq;
}

static void fake_close(struct ds_link *link)
{
        (void)link;
}

static const struct ds_link_ops fake_ops = {.name = "fake",
                                            .send = fake_send,
                                            .reap = fake_reap,
                                            .recv = fake_recv,
                                            .release = fake_release,
                                            .close = fake_close};
static struct ds_link fake_link = {.ops = &fake_ops};

static int setup(void **state)
{
        memset(&fake, 0, sizeof(fake));
        struct ds_error err;
        struct xverbs *x = stream_new(&fake_link, true, &err);
        assert_non_null(x);
        assert_int_equal(ds_pool_create(&x->pool, XFTP_VERBS_MSG, XFTP_VERBS_WINDOW, 0, &err), 0);
        for (unsigned i = 0; i < XFTP_VERBS_WINDOW; i++)
                x->free_bufs[x->free_count++] = ds_pool_buf(x->pool, i);
        struct xftp_conn *c = calloc(1, sizeof(*c));
        assert_non_null(c);
        wrap(c, x);
        *state = c;
        return 0;
}

static int teardown(void **state)
{
        struct xftp_conn *c = *state;
        stream_free(c->impl);
        free(c);
        return 0;
}

static void header(uint8_t out[XFTP_MODEE_HEADER], uint8_t desc, uint64_t count, uint64_t offset)
{
        xftp_modee_encode(&(struct xftp_modee_block){desc, count, offset}, out);
}

/* Post i is one framed block: count bytes of data equal to want, then its header. */
static void check_post(unsigned i, uint8_t desc, uint64_t count, uint64_t offset, const void *want)
{
        struct xftp_modee_block block;
        struct ds_error err;
        assert_true(i < fake.posts);
        const struct ds_msg *m = &fake.posted[i];
        assert_int_equal(m->len, count + XFTP_MODEE_HEADER);
        assert_int_equal(
            xftp_modee_decode((const uint8_t *)m->buf + count, UINT64_MAX, &block, &err), 0);
        assert_int_equal(block.desc, desc);
        assert_int_equal(block.count, count);
        assert_int_equal(block.offset, offset);
        if (count)
                assert_memory_equal(m->buf, want, count);
}

static uint8_t *pattern(size_t len, uint8_t seed)
{
        uint8_t *p = malloc(len);
        assert_non_null(p);
        for (size_t i = 0; i < len; i++)
                p[i] = (uint8_t)(seed + i * 7);
        return p;
}

static void test_a_block_from_the_pipeline_is_one_message_data_first(void **state)
{
        struct xftp_conn *c = *state;
        uint8_t head[XFTP_MODEE_HEADER], eod[XFTP_MODEE_HEADER];
        uint8_t *data = pattern(4096, 1);
        header(head, 0, 4096, 1 << 20);
        header(eod, XFTP_MODEE_EOD | XFTP_MODEE_EOF, 0, 1);
        struct iovec iov[2] = {{head, sizeof(head)}, {data, 4096}};
        assert_int_equal(c->ops->sendv(c, iov, 2, 0), XFTP_MODEE_HEADER + 4096);
        assert_int_equal(xftp_conn_send(c, eod, sizeof(eod), 0), XFTP_MODEE_HEADER);
        assert_int_equal(fake.posts, 2);
        check_post(0, 0, 4096, 1 << 20, data);
        check_post(1, XFTP_MODEE_EOD | XFTP_MODEE_EOF, 0, 1, NULL);
        free(data);
}

static void test_a_block_larger_than_a_buffer_is_cut_into_messages(void **state)
{
        struct xftp_conn *c = *state;
        size_t len = 2 * XFTP_XFER_BLOCK + 5;
        uint8_t head[XFTP_MODEE_HEADER];
        uint8_t *data = pattern(len, 3);
        header(head, XFTP_MODEE_EOD, len, 12345);
        /* in pieces, as a paced sender gives them */
        size_t done = 0;
        for (size_t piece = 1000; done < XFTP_MODEE_HEADER + len;) {
                struct iovec iov[2];
                int cnt = 0;
                if (done < XFTP_MODEE_HEADER)
                        iov[cnt++] = (struct iovec){head + done, XFTP_MODEE_HEADER - done};
                size_t from = done < XFTP_MODEE_HEADER ? 0 : done - XFTP_MODEE_HEADER;
                size_t take = len - from < piece ? len - from : piece;
                iov[cnt++] = (struct iovec){data + from, take};
                ssize_t n = c->ops->sendv(c, iov, cnt, 0);
                assert_true(n > 0);
                done += (size_t)n;
                piece = piece * 3 + 1;
        }
        assert_int_equal(fake.posts, 3);
        check_post(0, 0, XFTP_XFER_BLOCK, 12345, data);
        check_post(1, 0, XFTP_XFER_BLOCK, 12345 + XFTP_XFER_BLOCK, data + XFTP_XFER_BLOCK);
        check_post(2, XFTP_MODEE_EOD, 5, 12345 + 2 * XFTP_XFER_BLOCK, data + 2 * XFTP_XFER_BLOCK);
        free(data);
}

static void test_a_lent_buffer_goes_in_place(void **state)
{
        struct xftp_conn *c = *state;
        void *buf;
        uint8_t head[XFTP_MODEE_HEADER];
        assert_int_equal(c->ops->take_buf(c, XFTP_XFER_BLOCK + 1, 0, &buf), -EMSGSIZE);
        assert_int_equal(c->ops->take_buf(c, 8192, 0, &buf), 0);
        memset(buf, 0x5a, 8192);
        header(head, 0, 8192, 4096);
        struct iovec iov[2] = {{head, sizeof(head)}, {buf, 8192}};
        assert_int_equal(c->ops->sendv(c, iov, 2, 0), XFTP_MODEE_HEADER + 8192);
        assert_int_equal(fake.posts, 1);
        assert_ptr_equal(fake.posted[0].buf, buf);
        check_post(0, 0, 8192, 4096, buf);
        /* a lent buffer comes whole, as the block's payload, or not at all */
        assert_int_equal(c->ops->take_buf(c, 8192, 0, &buf), 0);
        header(head, 0, 8192, 0);
        iov[1] = (struct iovec){buf, 4096};
        assert_int_equal(c->ops->sendv(c, iov, 2, 0), -EINVAL);
        c->ops->put_buf(c, buf);
}

/* A post that fails after the block's bytes were taken (a stop seen while waiting for
 * credit: nothing posted) leaves them framed; the next call posts them first. The caller
 * hears they were taken and does not offer them again. */
static void test_bytes_taken_before_a_failed_post_are_posted_once(void **state)
{
        struct xftp_conn *c = *state;
        uint8_t head[XFTP_MODEE_HEADER], eod[XFTP_MODEE_HEADER];
        uint8_t *data = pattern(4096, 9);
        header(head, 0, 4096, 0);
        header(eod, XFTP_MODEE_EOD, 0, 0);
        fake.fail_next_send = -EINTR;
        struct iovec iov[2] = {{head, sizeof(head)}, {data, 4096}};
        assert_int_equal(c->ops->sendv(c, iov, 2, 0), XFTP_MODEE_HEADER + 4096);
        assert_int_equal(fake.posts, 0);
        fake.fail_next_send = -EINTR; /* nothing taken yet: the error itself */
        assert_int_equal(xftp_conn_send(c, eod, sizeof(eod), 0), -EINTR);
        assert_int_equal(xftp_conn_send(c, eod, sizeof(eod), 0), XFTP_MODEE_HEADER);
        assert_int_equal(fake.posts, 2);
        check_post(0, 0, 4096, 0, data);
        check_post(1, XFTP_MODEE_EOD, 0, 0, NULL);
        free(data);
}

/* Receiving: arrival i is a framed block of count bytes at the start of a slot. */
static void arrive(uint8_t *slot, uint64_t count, uint64_t offset, uint8_t desc)
{
        header(slot + count, desc, count, offset);
        fake.arriving[fake.arrivals] = (struct ds_msg){.buf = slot,
                                                       .len = (uint32_t)(count + XFTP_MODEE_HEADER),
                                                       .kind = DS_MSG_DATA,
                                                       .seq = fake.arrivals};
        fake.arrivals++;
}

static void test_a_message_reads_header_first_and_lends_its_data_in_place(void **state)
{
        struct xftp_conn *c = *state;
        struct xverbs *x = c->impl;
        x->sender = false;
        uint8_t *slots = calloc(3, 8192);
        assert_non_null(slots);
        memset(slots, 0x11, 4096);
        memset(slots + 8192, 0x22, 4096);
        arrive(slots, 4096, 0, 0);
        arrive(slots + 8192, 4096, 4096, 0);
        arrive(slots + 16384, 0, 1, XFTP_MODEE_EOD | XFTP_MODEE_EOF);

        uint8_t head[XFTP_MODEE_HEADER];
        uint64_t first, second;
        struct xftp_modee_block block;
        struct ds_error err;
        assert_null(c->ops->lend(c, 4096, &first)); /* no header read yet */
        assert_int_equal(xftp_conn_recv(c, head, sizeof(head), MSG_WAITALL), XFTP_MODEE_HEADER);
        assert_int_equal(xftp_modee_decode(head, UINT64_MAX, &block, &err), 0);
        assert_int_equal(block.count, 4096);
        assert_null(c->ops->lend(c, 2048, &first)); /* not the whole data */
        assert_ptr_equal(c->ops->lend(c, 4096, &first), slots);
        assert_int_equal(xftp_conn_recv(c, head, sizeof(head), MSG_WAITALL), XFTP_MODEE_HEADER);
        assert_ptr_equal(c->ops->lend(c, 4096, &second), slots + 8192);
        /* the second loan back first: nothing goes back before the first */
        c->ops->give_back(c, second);
        assert_int_equal(fake.released, 0);
        c->ops->give_back(c, first);
        assert_int_equal(fake.released, 2);
        assert_int_equal(fake.released_seq[0], 0);
        assert_int_equal(fake.released_seq[1], 1);
        /* a header-only block, read by copy, goes back at once */
        assert_int_equal(xftp_conn_recv(c, head, sizeof(head), MSG_WAITALL), XFTP_MODEE_HEADER);
        assert_int_equal(xftp_modee_decode(head, UINT64_MAX, &block, &err), 0);
        assert_int_equal(block.desc, XFTP_MODEE_EOD | XFTP_MODEE_EOF);
        assert_int_equal(fake.released, 3);
        free(slots);
}

static void test_a_message_whose_header_miscounts_is_refused(void **state)
{
        struct xftp_conn *c = *state;
        struct xverbs *x = c->impl;
        x->sender = false;
        uint8_t slot[4096 + XFTP_MODEE_HEADER];
        uint8_t head[XFTP_MODEE_HEADER];
        arrive(slot, 4096, 0, 0);
        header(slot + 4096, 0, 4095, 0); /* one byte fewer than the message holds */
        assert_int_equal(xftp_conn_recv(c, head, sizeof(head), MSG_WAITALL), -EPROTO);
        fake.arriving[1] = (struct ds_msg){.buf = slot, .len = 5, .kind = DS_MSG_DATA, .seq = 1};
        fake.arrivals = 2;
        x->has_msg = false;
        assert_int_equal(xftp_conn_recv(c, head, sizeof(head), MSG_WAITALL), -EPROTO);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(
                test_a_block_from_the_pipeline_is_one_message_data_first, setup, teardown),
            cmocka_unit_test_setup_teardown(test_a_block_larger_than_a_buffer_is_cut_into_messages,
                                            setup, teardown),
            cmocka_unit_test_setup_teardown(test_a_lent_buffer_goes_in_place, setup, teardown),
            cmocka_unit_test_setup_teardown(test_bytes_taken_before_a_failed_post_are_posted_once,
                                            setup, teardown),
            cmocka_unit_test_setup_teardown(
                test_a_message_reads_header_first_and_lends_its_data_in_place, setup, teardown),
            cmocka_unit_test_setup_teardown(test_a_message_whose_header_miscounts_is_refused, setup,
                                            teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
