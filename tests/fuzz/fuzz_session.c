/* libFuzzer target for sink's session state machine: whole sequences of frames on up to
 * three links at once, through ds_sink_serve itself (admission, the memory budget, runs
 * shared by links, credits, END claims, FINAL, reaping), not only the frame parser.
 *
 * The links are an in-memory backend: each hands out the frames the input gives it, as a
 * real backend does once ds_wire_parse has passed them, then reports the peer gone.
 *
 * Input: a byte of set-up (bits 0-1: links - 1, capped at 3; bits 2-4: the links' caps:
 * reliable, own flow, control frames unreliable), then frames: a byte whose low 3 bits
 * are the type (1 DATA .. 6 FINAL, 0 and 7 stand for 1 and 6) and high bits pick the
 * link; DATA is followed by an 8-byte big-endian seq and a 2-byte length, control by a
 * 1-byte length and that many payload bytes (cut short by the end of the input). */
#include <dragstrip/blast.h>
#include <dragstrip/error.h>
#include <dragstrip/link.h>
#include <dragstrip/wire.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define LINKS     3
#define MAX_MSGS  256
#define DATA_MAX  (64u << 10)
#define MSG_LIMIT (1u << 20) /* --max-msg of the fuzzed sink */

struct fake_msg {
        uint8_t kind, type;
        uint64_t seq;
        uint32_t len;
        const uint8_t *payload;
};

struct fake_link {
        struct ds_link base;
        struct fake_msg msgs[MAX_MSGS];
        unsigned count, next;
        uint32_t msg_size; /* 0 until prepared: data before it is refused, as backends do */
        uint8_t ctl[DS_WIRE_CTL_MAX];
};

static struct fake_link links[LINKS];
static unsigned link_count, handed;
static atomic_uint closed;
static atomic_bool stop;
static uint8_t zeros[DATA_MAX];

static const struct ds_link_ops fake_ops;

static int fake_listen(struct ds_link_listener **out, const struct ds_link_config *config,
                       struct ds_error *err)
{
        static struct ds_link_listener listener = {.ops = &fake_ops};
        (void)config;
        (void)err;
        *out = &listener;
        return 0;
}

static int fake_accept(struct ds_link_listener *listener, struct ds_link **out, int timeout_ms,
                       struct ds_error *err)
{
        (void)listener;
        (void)timeout_ms;
        (void)err;
        if (handed < link_count) {
                *out = &links[handed++].base;
                return 0;
        }
        if (atomic_load(&closed) == link_count)
                atomic_store(&stop, true);
        nanosleep(&(struct timespec){.tv_nsec = 100000}, NULL);
        return -ETIMEDOUT;
}

static void fake_unlisten(struct ds_link_listener *listener)
{
        (void)listener;
}

static int fake_prepare(struct ds_link *link, const struct ds_link_params *params,
                        struct ds_link_offer *mine, struct ds_error *err)
{
        (void)err;
        ((struct fake_link *)link)->msg_size = params->msg_size;
        mine->window = 16;
        return 0;
}

static int fake_send_ctl(struct ds_link *link, uint8_t type, const void *payload, size_t len,
                         struct ds_error *err)
{
        (void)link;
        (void)type;
        (void)payload;
        (void)len;
        (void)err;
        return 0;
}

static int fake_recv(struct ds_link *link, struct ds_msg *msgs, unsigned max, int timeout_ms,
                     struct ds_error *err)
{
        struct fake_link *f = (struct fake_link *)link;
        (void)timeout_ms;
        unsigned got = 0;
        while (got < max && f->next < f->count) {
                const struct fake_msg *m = &f->msgs[f->next++];
                if (m->kind == DS_MSG_DATA) {
                        if (!f->msg_size || m->len == 0 || m->len > f->msg_size) {
                                link->stats.malformed[DS_WIRE_TOO_BIG]++;
                                continue;
                        }
                        msgs[got++] = (struct ds_msg){.buf = zeros, .len = m->len, .seq = m->seq};
                        continue;
                }
                /* A copy of exactly the payload, so a read past it is caught by ASan. */
                uint8_t *copy = malloc(m->len ? m->len : 1);
                if (!copy)
                        break;
                memcpy(copy, m->payload, m->len);
                msgs[got++] = (struct ds_msg){
                    .buf = copy, .len = m->len, .kind = DS_MSG_CTL, .ctl_type = m->type};
        }
        if (got == 0)
                return ds_fail(err, -EPIPE, "fuzz peer gone");
        return (int)got;
}

static void fake_release(struct ds_link *link, const struct ds_msg *msgs, unsigned n)
{
        (void)link;
        for (unsigned i = 0; i < n; i++)
                if (msgs[i].kind == DS_MSG_CTL)
                        free(msgs[i].buf);
}

static int fake_send(struct ds_link *link, const struct ds_msg *msgs, unsigned n,
                     struct ds_error *err)
{
        (void)link;
        (void)msgs;
        (void)err;
        return (int)n;
}

static int fake_connect(struct ds_link **out, const struct ds_link_config *config,
                        struct ds_error *err)
{
        (void)out;
        (void)config;
        return ds_fail(err, -ENOTSUP, "fuzz links only accept");
}

static void fake_close(struct ds_link *link)
{
        (void)link;
        atomic_fetch_add(&closed, 1);
}

static const struct ds_link_ops fake_ops = {
    .name = "fuzz",
    .listen = fake_listen,
    .accept = fake_accept,
    .unlisten = fake_unlisten,
    .connect = fake_connect,
    .prepare = fake_prepare,
    .send = fake_send,
    .send_ctl = fake_send_ctl,
    .recv = fake_recv,
    .release = fake_release,
    .close = fake_close,
};

static uint64_t get_be(const uint8_t *p, unsigned n)
{
        uint64_t v = 0;
        for (unsigned i = 0; i < n; i++)
                v = v << 8 | p[i];
        return v;
}

/* Splits the input into the links' frame lists. */
static void parse(const uint8_t *data, size_t size)
{
        memset(links, 0, sizeof(links));
        unsigned caps_bits = (data[0] >> 2) & 7;
        unsigned caps = (caps_bits & 1 ? DS_LINK_RELIABLE : 0) |
                        (caps_bits & 2 ? DS_LINK_OWN_FLOW : 0) |
                        (caps_bits & 4 ? DS_LINK_CTL_UNRELIABLE : 0);
        link_count = (data[0] & 3) % LINKS + 1;
        for (unsigned i = 0; i < link_count; i++) {
                links[i].base = (struct ds_link){
                    .ops = &fake_ops, .caps = caps | DS_LINK_BOUNDARIES, .max_msg = 256u << 20};
                snprintf(links[i].base.peer, sizeof(links[i].base.peer), "fuzz%u", i);
        }
        size_t at = 1;
        while (at < size) {
                uint8_t b = data[at++];
                struct fake_link *f = &links[(b >> 3) % link_count];
                unsigned type = b & 7;
                type = type == 0 ? DS_WIRE_DATA : type == 7 ? DS_WIRE_FINAL : type;
                if (f->count == MAX_MSGS)
                        break;
                struct fake_msg *m = &f->msgs[f->count++];
                m->type = (uint8_t)type;
                if (type == DS_WIRE_DATA) {
                        uint8_t field[10] = {0};
                        size_t n = size - at < sizeof(field) ? size - at : sizeof(field);
                        memcpy(field, data + at, n);
                        at += n;
                        m->kind = DS_MSG_DATA;
                        m->seq = get_be(field, 8);
                        m->len = (uint32_t)get_be(field + 8, 2) + 1;
                        continue;
                }
                m->kind = DS_MSG_CTL;
                size_t len = at < size ? data[at++] : 0;
                if (len > DS_WIRE_CTL_MAX)
                        len = DS_WIRE_CTL_MAX;
                if (len > size - at)
                        len = size - at;
                m->payload = data + at;
                m->len = (uint32_t)len;
                at += len;
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static FILE *devnull;
        if (!devnull && !(devnull = fopen("/dev/null", "w")))
                abort();
        if (size < 1)
                return 0;
        parse(data, size);
        handed = 0;
        atomic_store(&closed, 0);
        atomic_store(&stop, false);
        struct ds_sink_options o = {
            .link = &fake_ops,
            .idle_ms = 1000,
            .max_msg = MSG_LIMIT,
            .max_mem = 8u << 20, /* a few small runs at once, never a large one */
            .max_peers = 2,      /* three links: the third may find the house full */
            .report = {.out = devnull},
            .log = devnull,
        };
        struct ds_error err;
        ds_sink_serve(&o, &stop, &err);
        return 0;
}
