/* The control exchange shared by every link: hello, credits, end, final counts. */
#include <dragstrip/session.h>

#include <dragstrip/clock.h>
#include <dragstrip/error.h>
#include <dragstrip/live.h>
#include <dragstrip/size.h>
#include <dragstrip/stop.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* How often a control frame is repeated over a link that may lose it. */
#define RETRY_MS   200
#define PUMP_BATCH 16
/* After a stop, how long a sender still waits for the receiver's final counts. */
#define STOP_GRACE_MS 1000

static int send_ctl(struct ds_session *s, uint8_t type, const union ds_wire_ctl *ctl,
                    struct ds_error *err)
{
        uint8_t payload[DS_WIRE_CTL_MAX];
        size_t len = ds_wire_ctl_encode(type, ctl, payload, sizeof(payload));
        if (len == 0)
                return ds_fail(err, -EINVAL, "control frame of type %u cannot be encoded", type);
        return ds_link_send_ctl(s->link, type, payload, len, err);
}

static void count_bad(struct ds_session *s, enum ds_wire_reject reason)
{
        s->link->stats.malformed[reason]++;
}

int ds_session_handle(struct ds_session *s, const struct ds_msg *msg, struct ds_error *err)
{
        union ds_wire_ctl ctl;
        enum ds_wire_reject bad = ds_wire_ctl_decode(msg->ctl_type, msg->buf, msg->len, &ctl);
        if (bad != DS_WIRE_OK) {
                count_bad(s, bad);
                return 0;
        }
        /* Each side hears only the other's frames: ours coming back is an echo. */
        bool from_sender = msg->ctl_type == DS_WIRE_HELLO || msg->ctl_type == DS_WIRE_END;
        if (from_sender != s->receiver) {
                count_bad(s, DS_WIRE_TYPE_BAD);
                if (!s->receiver)
                        return ds_fail(err, 0,
                                       "%s sent a blast's own frames back: an echo, not a sink",
                                       s->link->peer),
                               -EPROTO;
                return 0;
        }
        switch (msg->ctl_type) {
        case DS_WIRE_CREDIT:
                if (ctl.credit.limit > s->limit)
                        s->limit = ctl.credit.limit;
                return 0;
        case DS_WIRE_FINAL:
                s->final = ctl.final;
                s->final_seen = true;
                return 0;
        case DS_WIRE_END:
                if (s->ended && s->final_seen) /* our FINAL was lost: say it again */
                        return send_ctl(s, DS_WIRE_FINAL, (union ds_wire_ctl *)&s->final, err);
                s->end = ctl.end;
                s->ended = true;
                return 0;
        case DS_WIRE_HELLO:
                /* A repeat of the hello we answered (its ACK was lost); another run's
                 * hello on this link makes no sense. */
                if (ctl.hello.run_id != s->hello.run_id || ctl.hello.stream != s->hello.stream) {
                        count_bad(s, DS_WIRE_SESSION_BAD);
                        return 0;
                }
                return send_ctl(s, DS_WIRE_HELLO_ACK, (union ds_wire_ctl *)&s->ack, err);
        default:
                count_bad(s, DS_WIRE_CTL_BAD);
                return 0;
        }
}

/* Receives for up to timeout_ms, acting on control messages and dropping data (a sender
 * gets none). Returns the count of messages seen or a negative errno. */
static int pump(struct ds_session *s, int timeout_ms, bool *got_ack, struct ds_error *err)
{
        struct ds_msg msgs[PUMP_BATCH];
        int n = ds_link_recv(s->link, msgs, PUMP_BATCH, timeout_ms, err);
        if (n <= 0)
                return n;
        int rc = 0;
        for (int i = 0; i < n && rc == 0; i++) {
                if (msgs[i].kind != DS_MSG_CTL) {
                        count_bad(s, DS_WIRE_TYPE_BAD);
                } else if (msgs[i].ctl_type == DS_WIRE_HELLO_ACK) {
                        if (got_ack && !*got_ack) {
                                union ds_wire_ctl ctl;
                                if (ds_wire_ctl_decode(DS_WIRE_HELLO_ACK, msgs[i].buf, msgs[i].len,
                                                       &ctl) == DS_WIRE_OK) {
                                        s->ack = ctl.ack;
                                        *got_ack = true;
                                } else {
                                        count_bad(s, DS_WIRE_CTL_BAD);
                                }
                        }
                } else {
                        rc = ds_session_handle(s, &msgs[i], err);
                }
        }
        ds_link_release(s->link, msgs, (unsigned)n);
        return rc < 0 ? rc : n;
}

static const char *ack_reason(const struct ds_wire_hello_ack *ack, uint32_t msg_size, char *buf,
                              size_t len)
{
        char have[32], most[32];
        switch (ack->status) {
        case DS_ACK_TOO_BIG:
                snprintf(buf, len, "messages of %s are more than its limit of %s",
                         ds_size_format(have, sizeof(have), msg_size),
                         ds_size_format(most, sizeof(most), ack->max_msg));
                return buf;
        case DS_ACK_UNSUPPORTED:
                return "an operation or flow control its link cannot do";
        case DS_ACK_BUSY:
                return "busy (it serves one run only, or as many peers as it allows)";
        case DS_ACK_NO_MEMORY:
                return "the run's receive buffers would pass its memory budget";
        case DS_ACK_CONFLICT:
                return "another link holds that run and stream, or the run has other options";
        default:
                return "could not set up its buffers";
        }
}

static void session_init(struct ds_session *s, struct ds_link *link, int timeout_ms, bool receiver)
{
        memset(s, 0, sizeof(*s));
        s->receiver = receiver;
        s->link = link;
        s->timeout_ms = timeout_ms > 0 ? timeout_ms : 5000;
        s->ctl_retry = link->caps & DS_LINK_CTL_UNRELIABLE;
}

static bool wants_credits(const struct ds_link *link, uint8_t flow)
{
        return flow == DS_FLOW_CREDIT && !(link->caps & DS_LINK_OWN_FLOW);
}

int ds_session_open(struct ds_session *s, struct ds_link *link, const struct ds_wire_hello *hello,
                    struct ds_pool *send_pool, int timeout_ms, struct ds_error *err)
{
        session_init(s, link, timeout_ms, false);
        s->hello = *hello;
        struct ds_link_params params = {.msg_size = hello->msg_size,
                                        .flow = hello->flow,
                                        .op = hello->op,
                                        .window = hello->window,
                                        .send_pool = send_pool};
        struct ds_link_offer mine;
        int rc = ds_link_prepare(link, &params, &mine, err);
        if (rc < 0)
                return rc;
        s->hello.offer_window = mine.window;
        s->hello.offer_len = mine.len;
        memcpy(s->hello.offer, mine.blob, mine.len);

        uint64_t deadline = ds_now_ns() + (uint64_t)s->timeout_ms * 1000000u;
        bool got_ack = false;
        while (!got_ack) {
                rc = send_ctl(s, DS_WIRE_HELLO, (union ds_wire_ctl *)&s->hello, err);
                if (rc < 0)
                        return rc;
                uint64_t resend = ds_now_ns() + (uint64_t)RETRY_MS * 1000000u;
                while (!got_ack && ds_now_ns() < deadline &&
                       (!s->ctl_retry || ds_now_ns() < resend)) {
                        if (ds_stopping())
                                return ds_fail(err, -ECANCELED, "stopped waiting for sink %s",
                                               link->peer);
                        rc = pump(s, s->ctl_retry ? RETRY_MS / 4 : 100, &got_ack, err);
                        if (rc < 0)
                                return rc == -EPIPE
                                           ? ds_fail(err, rc,
                                                     "sink %s closed the link during the hello",
                                                     link->peer)
                                           : rc;
                }
                if (!got_ack && ds_now_ns() >= deadline)
                        return ds_fail(err, -ETIMEDOUT, "no answer to the hello from sink %s",
                                       link->peer);
        }
        char why[128];
        if (s->ack.status != DS_ACK_OK)
                return ds_fail(err, 0, "sink %s refused the run: %s", link->peer,
                               ack_reason(&s->ack, hello->msg_size, why, sizeof(why))),
                       -EPROTO;
        struct ds_link_offer peer = {.window = s->ack.offer_window, .len = s->ack.offer_len};
        memcpy(peer.blob, s->ack.offer, s->ack.offer_len);
        rc = ds_link_start(link, &peer, err);
        if (rc < 0)
                return rc;
        s->window = s->ack.offer_window;
        s->credits = wants_credits(link, hello->flow) && s->window > 0;
        s->limit = s->credits ? s->window : UINT64_MAX;
        return 0;
}

/* Messages the sender may still send, as a count that fits the return type. */
static int64_t room(const struct ds_session *s, uint64_t sent)
{
        if (s->limit <= sent)
                return 0;
        uint64_t left = s->limit - sent;
        return left > INT64_MAX ? INT64_MAX : (int64_t)left;
}

int64_t ds_session_credit(struct ds_session *s, uint64_t sent, bool wait, struct ds_error *err)
{
        /* Plenty left: no need to look for more (a system call on most links). */
        if (!s->credits || (s->limit > sent && (s->limit - sent > s->window / 2 || !wait)))
                return room(s, sent);
        /* Look at what has arrived, then wait only if still short. */
        int rc = pump(s, 0, NULL, err);
        if (rc < 0)
                return rc;
        if (s->limit > sent || !wait)
                return room(s, sent);
        uint64_t deadline = ds_now_ns() + (uint64_t)s->timeout_ms * 1000000u;
        while (s->limit <= sent) {
                if (ds_stopping())
                        return -ECANCELED;
                if (ds_now_ns() >= deadline)
                        return ds_fail(err, -ETIMEDOUT,
                                       "sink %s granted no credit for %d ms (is it still running?)",
                                       s->link->peer, s->timeout_ms);
                rc = pump(s, 50, NULL, err);
                if (rc < 0)
                        return rc;
        }
        return room(s, sent);
}

/* The receiver's final counts against the sent messages of msg_size bytes that this side
 * sent: each arrives once or is lost, and may come again (dup). Counts beyond that come
 * from a broken sink or from something else, and are not figures to print. */
static int check_final(const struct ds_session *s, uint64_t sent, struct ds_error *err)
{
        const struct ds_wire_final *f = &s->final;
        uint64_t dup = f->faults[DS_FAULT_DUP], lost = f->faults[DS_FAULT_LOST];
        uint64_t size = s->hello.msg_size;
        const char *wrong = NULL;
        if (dup > f->messages || f->messages - dup > sent)
                wrong = "more messages received than were sent";
        else if (lost > sent - (f->messages - dup))
                wrong = "more messages lost than were sent and not received";
        else if (f->faults[DS_FAULT_REORDERED] > f->messages ||
                 f->faults[DS_FAULT_CORRUPT] > f->messages)
                wrong = "more messages reordered or corrupt than received";
        else if (size && f->messages > UINT64_MAX / size)
                wrong = "more messages than 64-bit bytes can count";
        else if (size && f->bytes > f->messages * size)
                wrong = "more bytes than its messages hold";
        if (!wrong)
                return 0;
        return ds_fail(err, 0,
                       "sink %s answered END with impossible counts, %s: %llu messages (%llu "
                       "dup, %llu lost), %llu bytes, of %llu sent of %u bytes",
                       s->link->peer, wrong, (unsigned long long)f->messages,
                       (unsigned long long)dup, (unsigned long long)lost,
                       (unsigned long long)f->bytes, (unsigned long long)sent, s->hello.msg_size),
               -EPROTO;
}

int ds_session_close(struct ds_session *s, uint64_t messages, uint64_t bytes,
                     struct ds_wire_final *final, struct ds_error *err)
{
        union ds_wire_ctl end = {.end = {.messages = messages, .bytes = bytes}};
        int wait_ms =
            ds_stopping() && s->timeout_ms > STOP_GRACE_MS ? STOP_GRACE_MS : s->timeout_ms;
        uint64_t deadline = ds_now_ns() + (uint64_t)wait_ms * 1000000u;
        while (!s->final_seen) {
                int rc = send_ctl(s, DS_WIRE_END, &end, err);
                if (rc < 0)
                        return rc;
                uint64_t resend = ds_now_ns() + (uint64_t)RETRY_MS * 1000000u;
                while (!s->final_seen && ds_now_ns() < deadline &&
                       (!s->ctl_retry || ds_now_ns() < resend)) {
                        rc = pump(s, 50, NULL, err);
                        if (rc < 0)
                                return rc;
                }
                if (!s->final_seen && ds_now_ns() >= deadline)
                        return ds_fail(err, -ETIMEDOUT, "no final counts from sink %s",
                                       s->link->peer);
        }
        *final = s->final;
        return check_final(s, messages, err);
}

static uint32_t check_hello(struct ds_session *s, ds_session_admit_fn admit, void *ctx)
{
        const struct ds_wire_hello *h = &s->hello;
        if (h->msg_size > s->link->max_msg)
                return DS_ACK_TOO_BIG;
        if (h->op != DS_OP_DEFAULT && !(s->link->caps & DS_LINK_CHOOSES_OP))
                return DS_ACK_UNSUPPORTED;
        return admit ? admit(s, ctx) : DS_ACK_OK; /* last: it may take resources */
}

/* Waits for the link's first control frame, a hello. */
static int await_hello(struct ds_session *s, int timeout_ms, struct ds_error *err)
{
        uint64_t deadline = ds_now_ns() + (uint64_t)timeout_ms * 1000000u;
        for (;;) {
                struct ds_msg msg;
                if (ds_stopping())
                        return ds_fail(err, -ECANCELED, "stopped waiting for a hello from %s",
                                       s->link->peer);
                int n = ds_link_recv(s->link, &msg, 1, 100, err);
                if (n < 0)
                        return n;
                if (n == 1) {
                        union ds_wire_ctl ctl;
                        enum ds_wire_reject bad = DS_WIRE_TYPE_BAD;
                        if (msg.kind == DS_MSG_CTL && msg.ctl_type == DS_WIRE_HELLO)
                                bad = ds_wire_ctl_decode(DS_WIRE_HELLO, msg.buf, msg.len, &ctl);
                        ds_link_release(s->link, &msg, 1);
                        if (bad == DS_WIRE_OK) {
                                s->hello = ctl.hello;
                                return 0;
                        }
                        /* A link that opens with anything else is not a blast's. */
                        count_bad(s, bad);
                        return ds_fail(err, -EPROTO, "%s opened with a malformed hello (%s)",
                                       s->link->peer, ds_wire_reject_name(bad));
                }
                if (ds_now_ns() >= deadline)
                        return ds_fail(err, -ETIMEDOUT, "no hello from %s", s->link->peer);
        }
}

int ds_session_accept(struct ds_session *s, struct ds_link *link, ds_session_admit_fn admit,
                      void *ctx, int timeout_ms, struct ds_error *err)
{
        session_init(s, link, timeout_ms, true);
        int rc = await_hello(s, s->timeout_ms, err);
        if (rc < 0)
                return rc;
        const struct ds_wire_hello *h = &s->hello;
        s->ack.max_msg = link->max_msg;
        s->ack.status = check_hello(s, admit, ctx);
        struct ds_link_offer mine = {0};
        if (s->ack.status == DS_ACK_OK) {
                struct ds_link_params params = {.msg_size = h->msg_size,
                                                .flow = h->flow,
                                                .op = h->op,
                                                .window = h->window,
                                                .recv_pool = s->recv_pool};
                struct ds_link_offer peer = {.window = h->offer_window, .len = h->offer_len};
                memcpy(peer.blob, h->offer, h->offer_len);
                if (ds_link_prepare(link, &params, &mine, err) < 0 ||
                    ds_link_start(link, &peer, err) < 0)
                        s->ack.status = DS_ACK_FAILED;
        }
        if (h->window && mine.window > h->window)
                mine.window = h->window;
        s->ack.offer_window = mine.window;
        s->ack.offer_len = mine.len;
        memcpy(s->ack.offer, mine.blob, mine.len);
        struct ds_error send_err;
        rc = send_ctl(s, DS_WIRE_HELLO_ACK, (union ds_wire_ctl *)&s->ack, &send_err);
        if (s->ack.status != DS_ACK_OK) {
                char why[128];
                if (s->ack.status != DS_ACK_FAILED)
                        ds_fail(err, 0, "refused a run from %s: %s", link->peer,
                                ack_reason(&s->ack, h->msg_size, why, sizeof(why)));
                return -EPROTO;
        }
        if (rc < 0) {
                *err = send_err;
                return rc;
        }
        s->window = mine.window;
        s->credits = wants_credits(link, h->flow) && s->window > 0;
        s->granted = s->window;
        return 0;
}

int ds_session_released(struct ds_session *s, uint64_t n, struct ds_error *err)
{
        s->released += n;
        s->idle_bumped = false;
        if (!s->credits || s->released + s->window <= s->granted) /* granted ahead by idle */
                return 0;
        uint64_t due = s->released + s->window - s->granted;
        uint64_t step = s->window / 4 ? s->window / 4 : 1;
        if (due < step)
                return 0;
        s->granted = s->released + s->window;
        union ds_wire_ctl ctl = {.credit = {.limit = s->granted}};
        return send_ctl(s, DS_WIRE_CREDIT, &ctl, err);
}

int ds_session_idle(struct ds_session *s, struct ds_error *err)
{
        if (!s->credits || s->ended)
                return 0;
        /* Silence: the last grant was lost (say it again), or the messages it allowed
         * were (a lost tail leaves no later number to show it), or the sender is only
         * slow, which this side cannot tell from a loss. A window beyond what was seen
         * is always safe; when that is no more than was granted, one message more
         * unsticks a lost tail, once per silence, so that a slow sender is never more
         * than a window and one ahead of what this side has taken (ring sizes allow it). */
        if (s->released + s->window > s->granted) {
                s->granted = s->released + s->window;
        } else if (!s->idle_bumped) {
                s->granted++;
                s->idle_bumped = true;
        }
        union ds_wire_ctl ctl = {.credit = {.limit = s->granted}};
        return send_ctl(s, DS_WIRE_CREDIT, &ctl, err);
}

int ds_session_finish(struct ds_session *s, const struct ds_wire_final *final, struct ds_error *err)
{
        s->final = *final;
        s->final_seen = true;
        s->ended = true;
        return send_ctl(s, DS_WIRE_FINAL, (union ds_wire_ctl *)&s->final, err);
}
