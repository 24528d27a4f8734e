/* The blast/sink wire format: encoding, and the one parser that checks every frame. */
#include <dragstrip/wire.h>

#include <string.h>

static const char *const reject_names[DS_WIRE_REJECT_COUNT] = {
    [DS_WIRE_OK] = "ok",
    [DS_WIRE_SHORT] = "short",
    [DS_WIRE_MAGIC_BAD] = "magic",
    [DS_WIRE_VERSION_BAD] = "version",
    [DS_WIRE_TYPE_BAD] = "type",
    [DS_WIRE_CHECK_BAD] = "checksum",
    [DS_WIRE_LENGTH_BAD] = "length",
    [DS_WIRE_OFFSET_BAD] = "offset",
    [DS_WIRE_TOO_BIG] = "too_big",
    [DS_WIRE_CTL_BAD] = "control",
    [DS_WIRE_SESSION_BAD] = "session",
    [DS_WIRE_CLAIM_BAD] = "claim",
};

const char *ds_wire_reject_name(enum ds_wire_reject reason)
{
        if ((unsigned)reason >= DS_WIRE_REJECT_COUNT)
                return "unknown";
        return reject_names[reason];
}

/* Big-endian field access through byte arrays: frames are not aligned, and this is the
 * only place that knows the byte order. */
static void put16(uint8_t *p, uint16_t v)
{
        p[0] = (uint8_t)(v >> 8);
        p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
        put16(p, (uint16_t)(v >> 16));
        put16(p + 2, (uint16_t)v);
}

static void put64(uint8_t *p, uint64_t v)
{
        put32(p, (uint32_t)(v >> 32));
        put32(p + 4, (uint32_t)v);
}

static uint16_t get16(const uint8_t *p)
{
        return (uint16_t)((p[0] << 8) | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
        return ((uint32_t)get16(p) << 16) | get16(p + 2);
}

static uint64_t get64(const uint8_t *p)
{
        return ((uint64_t)get32(p) << 32) | get32(p + 4);
}

/* FNV-1a over the first 28 header bytes: cheap, and catches a header damaged anywhere. */
static uint32_t header_check(const uint8_t *p)
{
        uint32_t h = 2166136261u;
        for (unsigned i = 0; i < DS_WIRE_HDR_LEN - 4; i++)
                h = (h ^ p[i]) * 16777619u;
        return h;
}

void ds_wire_encode(void *out, const struct ds_wire_hdr *hdr)
{
        uint8_t *p = out;
        put16(p, DS_WIRE_MAGIC);
        p[2] = DS_WIRE_VERSION;
        p[3] = hdr->type;
        put32(p + 4, hdr->session);
        put64(p + 8, hdr->seq);
        put32(p + 16, hdr->msg_len);
        put32(p + 20, hdr->frag_off);
        put32(p + 24, hdr->frag_len);
        put32(p + 28, header_check(p));
}

enum ds_wire_reject ds_wire_parse(const void *frame, size_t avail, uint32_t max_msg, unsigned flags,
                                  struct ds_wire_hdr *hdr)
{
        const uint8_t *p = frame;
        if (avail < DS_WIRE_HDR_LEN)
                return DS_WIRE_SHORT;
        if (get16(p) != DS_WIRE_MAGIC)
                return DS_WIRE_MAGIC_BAD;
        if (p[2] != DS_WIRE_VERSION)
                return DS_WIRE_VERSION_BAD;
        if (p[3] < DS_WIRE_DATA || p[3] > DS_WIRE_TYPE_MAX)
                return DS_WIRE_TYPE_BAD;
        if (get32(p + 28) != header_check(p))
                return DS_WIRE_CHECK_BAD;

        hdr->type = p[3];
        hdr->session = get32(p + 4);
        hdr->seq = get64(p + 8);
        hdr->msg_len = get32(p + 16);
        hdr->frag_off = get32(p + 20);
        hdr->frag_len = get32(p + 24);

        uint32_t limit = hdr->type == DS_WIRE_DATA ? max_msg : DS_WIRE_CTL_MAX;
        if (limit > DS_WIRE_MSG_MAX)
                limit = DS_WIRE_MSG_MAX;
        if (hdr->msg_len > limit)
                return hdr->type == DS_WIRE_DATA ? DS_WIRE_TOO_BIG : DS_WIRE_CTL_BAD;
        /* Control messages may be empty; a data fragment never is. */
        if (hdr->frag_len == 0 && hdr->type == DS_WIRE_DATA)
                return DS_WIRE_LENGTH_BAD;
        if (!(flags & DS_WIRE_STREAM) && hdr->frag_len > avail - DS_WIRE_HDR_LEN)
                return DS_WIRE_LENGTH_BAD;
        /* Compared without adding, so no sum can wrap. */
        if (hdr->frag_off > hdr->msg_len || hdr->frag_len > hdr->msg_len - hdr->frag_off)
                return DS_WIRE_OFFSET_BAD;
        bool whole = hdr->frag_off == 0 && hdr->frag_len == hdr->msg_len;
        if ((flags & DS_WIRE_STREAM) && !whole)
                return DS_WIRE_OFFSET_BAD;
        if (hdr->type != DS_WIRE_DATA && !whole)
                return DS_WIRE_CTL_BAD;
        if (hdr->type != DS_WIRE_DATA && hdr->seq != 0)
                return DS_WIRE_CTL_BAD;
        return DS_WIRE_OK;
}

/* Fixed sizes of the control payloads; hello and ack end in a variable offer. */
#define HELLO_FIXED      45
#define ACK_FIXED        13
#define CREDIT_LEN       8
#define END_LEN          16
#define FINAL_LEN        (8 * (5 + DS_WIRE_FAULTS))
#define FINAL_NO_CPU_LEN (FINAL_LEN - 16) /* before FINAL carried CPU times */

static size_t encode_hello(const struct ds_wire_hello *h, uint8_t *p)
{
        put32(p, h->flags);
        put32(p + 4, h->msg_size);
        put64(p + 8, h->count);
        put32(p + 16, h->duration_ms);
        p[20] = h->flow;
        p[21] = h->op;
        put16(p + 22, h->streams);
        put16(p + 24, h->stream);
        put64(p + 26, h->run_id);
        put32(p + 34, h->window);
        put32(p + 38, h->offer_window);
        p[42] = 0;
        p[43] = 0;
        p[44] = h->offer_len;
        memcpy(p + HELLO_FIXED, h->offer, h->offer_len);
        return HELLO_FIXED + h->offer_len;
}

static enum ds_wire_reject decode_hello(const uint8_t *p, size_t len, struct ds_wire_hello *h)
{
        if (len < HELLO_FIXED)
                return DS_WIRE_CTL_BAD;
        h->flags = get32(p);
        h->msg_size = get32(p + 4);
        h->count = get64(p + 8);
        h->duration_ms = get32(p + 16);
        h->flow = p[20];
        h->op = p[21];
        h->streams = get16(p + 22);
        h->stream = get16(p + 24);
        h->run_id = get64(p + 26);
        h->window = get32(p + 34);
        h->offer_window = get32(p + 38);
        h->offer_len = p[44];
        if (p[42] != 0 || p[43] != 0 || h->offer_len > DS_WIRE_OFFER_MAX ||
            len != HELLO_FIXED + (size_t)h->offer_len)
                return DS_WIRE_CTL_BAD;
        if ((h->flags & ~(uint32_t)DS_HELLO_FLAGS_ALL) || h->msg_size == 0 ||
            h->msg_size > DS_WIRE_MSG_MAX || h->flow > 1 || h->op > 3 || h->streams == 0 ||
            h->stream >= h->streams)
                return DS_WIRE_CTL_BAD;
        memcpy(h->offer, p + HELLO_FIXED, h->offer_len);
        return DS_WIRE_OK;
}

static size_t encode_ack(const struct ds_wire_hello_ack *a, uint8_t *p)
{
        put32(p, a->status);
        put32(p + 4, a->max_msg);
        put32(p + 8, a->offer_window);
        p[12] = a->offer_len;
        memcpy(p + ACK_FIXED, a->offer, a->offer_len);
        return ACK_FIXED + a->offer_len;
}

static enum ds_wire_reject decode_ack(const uint8_t *p, size_t len, struct ds_wire_hello_ack *a)
{
        if (len < ACK_FIXED)
                return DS_WIRE_CTL_BAD;
        a->status = get32(p);
        a->max_msg = get32(p + 4);
        a->offer_window = get32(p + 8);
        a->offer_len = p[12];
        if (a->status > DS_ACK_STATUS_MAX || a->offer_len > DS_WIRE_OFFER_MAX ||
            len != ACK_FIXED + (size_t)a->offer_len)
                return DS_WIRE_CTL_BAD;
        memcpy(a->offer, p + ACK_FIXED, a->offer_len);
        return DS_WIRE_OK;
}

size_t ds_wire_ctl_encode(uint8_t type, const union ds_wire_ctl *ctl, void *out, size_t cap)
{
        if (cap < DS_WIRE_CTL_MAX)
                return 0;
        uint8_t *p = out;
        switch (type) {
        case DS_WIRE_HELLO:
                if (ctl->hello.offer_len > DS_WIRE_OFFER_MAX)
                        return 0;
                return encode_hello(&ctl->hello, p);
        case DS_WIRE_HELLO_ACK:
                if (ctl->ack.offer_len > DS_WIRE_OFFER_MAX)
                        return 0;
                return encode_ack(&ctl->ack, p);
        case DS_WIRE_CREDIT:
                put64(p, ctl->credit.limit);
                return CREDIT_LEN;
        case DS_WIRE_END:
                put64(p, ctl->end.messages);
                put64(p + 8, ctl->end.bytes);
                return END_LEN;
        case DS_WIRE_FINAL:
                put64(p, ctl->final.messages);
                put64(p + 8, ctl->final.bytes);
                for (unsigned i = 0; i < DS_WIRE_FAULTS; i++)
                        put64(p + 16 + 8 * i, ctl->final.faults[i]);
                put64(p + 16 + 8 * DS_WIRE_FAULTS, ctl->final.recv_ns);
                put64(p + 24 + 8 * DS_WIRE_FAULTS, ctl->final.cpu_user_us);
                put64(p + 32 + 8 * DS_WIRE_FAULTS, ctl->final.cpu_sys_us);
                return FINAL_LEN;
        default:
                return 0;
        }
}

enum ds_wire_reject ds_wire_ctl_decode(uint8_t type, const void *payload, size_t len,
                                       union ds_wire_ctl *ctl)
{
        const uint8_t *p = payload;
        if (len > DS_WIRE_CTL_MAX)
                return DS_WIRE_CTL_BAD;
        switch (type) {
        case DS_WIRE_HELLO:
                return decode_hello(p, len, &ctl->hello);
        case DS_WIRE_HELLO_ACK:
                return decode_ack(p, len, &ctl->ack);
        case DS_WIRE_CREDIT:
                if (len != CREDIT_LEN)
                        return DS_WIRE_CTL_BAD;
                ctl->credit.limit = get64(p);
                return DS_WIRE_OK;
        case DS_WIRE_END:
                if (len != END_LEN)
                        return DS_WIRE_CTL_BAD;
                ctl->end.messages = get64(p);
                ctl->end.bytes = get64(p + 8);
                return DS_WIRE_OK;
        case DS_WIRE_FINAL:
                if (len != FINAL_LEN && len != FINAL_NO_CPU_LEN)
                        return DS_WIRE_CTL_BAD;
                ctl->final.messages = get64(p);
                ctl->final.bytes = get64(p + 8);
                for (unsigned i = 0; i < DS_WIRE_FAULTS; i++)
                        ctl->final.faults[i] = get64(p + 16 + 8 * i);
                ctl->final.recv_ns = get64(p + 16 + 8 * DS_WIRE_FAULTS);
                bool cpu = len == FINAL_LEN;
                ctl->final.cpu_user_us =
                    cpu ? get64(p + 24 + 8 * DS_WIRE_FAULTS) : DS_WIRE_CPU_UNSAID;
                ctl->final.cpu_sys_us =
                    cpu ? get64(p + 32 + 8 * DS_WIRE_FAULTS) : DS_WIRE_CPU_UNSAID;
                return DS_WIRE_OK;
        default:
                return DS_WIRE_TYPE_BAD;
        }
}
