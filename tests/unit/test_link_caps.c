/* What links need and can do is read from their caps (link.h), never from their names: the
 * backends' tables, and a receiver's answer to a hello asking for an op. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dragstrip/error.h>
#include <dragstrip/link.h>
#include <dragstrip/session.h>

#include <errno.h>
#include <string.h>

static void test_only_raw_needs_an_interface_and_names_its_peer_by_mac(void **state)
{
        (void)state;
        const struct ds_link_ops *raw = ds_link_find("raw");
        assert_non_null(raw);
        assert_true(raw->caps & DS_LINK_NEEDS_IFACE);
        assert_true(raw->caps & DS_LINK_MAC_PEER);
        assert_false(raw->caps & DS_LINK_CHOOSES_OP);
        const char *kernel[] = {"tcp", "udp"};
        for (unsigned i = 0; i < 2; i++) {
                const struct ds_link_ops *ops = ds_link_find(kernel[i]);
                assert_non_null(ops);
                assert_false(ops->caps & (DS_LINK_NEEDS_IFACE | DS_LINK_MAC_PEER |
                                          DS_LINK_CHOOSES_OP | DS_LINK_PCAP));
        }
}

static void test_verbs_alone_chooses_its_op(void **state)
{
        (void)state;
#ifdef DS_HAVE_VERBS
        const struct ds_link_ops *verbs = ds_link_find("verbs");
        assert_non_null(verbs);
        assert_true(verbs->caps & DS_LINK_CHOOSES_OP);
        assert_false(verbs->caps & (DS_LINK_NEEDS_IFACE | DS_LINK_PCAP));
#else
        assert_null(ds_link_find("verbs"));
#endif
}

/* A link that hands out one hello asking for RDMA READ and records the answer. */
static uint8_t hello_payload[DS_WIRE_CTL_MAX];
static size_t hello_len;
static bool hello_taken;
static struct ds_wire_hello_ack answer;

static int hello_recv(struct ds_link *link, struct ds_msg *msgs, unsigned max, int timeout_ms,
                      struct ds_error *err)
{
        (void)link, (void)max, (void)timeout_ms, (void)err;
        if (hello_taken)
                return 0;
        hello_taken = true;
        msgs[0] = (struct ds_msg){.buf = hello_payload,
                                  .len = (uint32_t)hello_len,
                                  .kind = DS_MSG_CTL,
                                  .ctl_type = DS_WIRE_HELLO};
        return 1;
}

static void hello_release(struct ds_link *link, const struct ds_msg *msgs, unsigned n)
{
        (void)link, (void)msgs, (void)n;
}

static int record_answer(struct ds_link *link, uint8_t type, const void *payload, size_t len,
                         struct ds_error *err)
{
        (void)link, (void)err;
        union ds_wire_ctl ctl;
        assert_int_equal(type, DS_WIRE_HELLO_ACK);
        assert_int_equal(ds_wire_ctl_decode(type, payload, len, &ctl), DS_WIRE_OK);
        answer = ctl.ack;
        return 0;
}

/* Answers a hello for op over a link called name with caps. */
static int accept_op(const char *name, unsigned caps, enum ds_link_op op, struct ds_error *err)
{
        union ds_wire_ctl hello = {.hello = {.msg_size = 4096,
                                             .count = 10,
                                             .flow = DS_FLOW_CREDIT,
                                             .op = (uint8_t)op,
                                             .streams = 1,
                                             .run_id = 7}};
        hello_len = ds_wire_ctl_encode(DS_WIRE_HELLO, &hello, hello_payload, sizeof(hello_payload));
        assert_true(hello_len > 0);
        hello_taken = false;
        memset(&answer, 0xff, sizeof(answer));
        struct ds_link_ops ops = {.name = name,
                                  .caps = caps,
                                  .recv = hello_recv,
                                  .release = hello_release,
                                  .send_ctl = record_answer};
        struct ds_link link = {.ops = &ops, .caps = caps, .max_msg = 1u << 20};
        struct ds_session session;
        return ds_session_accept(&session, &link, NULL, NULL, 1000, err);
}

static void test_an_op_is_refused_by_a_link_without_the_cap_whatever_its_name(void **state)
{
        (void)state;
        struct ds_error err = {{0}};
        assert_int_equal(accept_op("verbs", DS_LINK_RELIABLE, DS_OP_READ, &err), -EPROTO);
        assert_int_equal(answer.status, DS_ACK_UNSUPPORTED);
        assert_non_null(strstr(err.text, "cannot do"));
}

static void test_an_op_is_taken_by_a_link_with_the_cap_whatever_its_name(void **state)
{
        (void)state;
        struct ds_error err = {{0}};
        assert_int_equal(
            accept_op("hippi", DS_LINK_RELIABLE | DS_LINK_CHOOSES_OP, DS_OP_READ, &err), 0);
        assert_int_equal(answer.status, DS_ACK_OK);
        assert_int_equal(accept_op("tcp", DS_LINK_RELIABLE, DS_OP_DEFAULT, &err), 0);
        assert_int_equal(answer.status, DS_ACK_OK);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_only_raw_needs_an_interface_and_names_its_peer_by_mac),
            cmocka_unit_test(test_verbs_alone_chooses_its_op),
            cmocka_unit_test(test_an_op_is_refused_by_a_link_without_the_cap_whatever_its_name),
            cmocka_unit_test(test_an_op_is_taken_by_a_link_with_the_cap_whatever_its_name),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
