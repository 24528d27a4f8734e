/* The blast/sink wire format (docs/wire.md): one frame header, the control messages, and
 * the one parser that checks everything a peer sends before anyone uses it.
 *
 * Every frame on raw and udp, and every record on a tcp stream, starts with a 32-byte
 * header in network byte order. A data message longer than a frame travels as a train
 * of fragments (raw); control messages always fit in one frame. */
#ifndef DRAGSTRIP_WIRE_H
#define DRAGSTRIP_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DS_WIRE_MAGIC     0x4453u /* "DS" */
#define DS_WIRE_VERSION   1u
#define DS_WIRE_HDR_LEN   32u
#define DS_WIRE_ETHERTYPE 0x88B5u    /* IEEE 802 local experimental */
#define DS_WIRE_CTL_MAX   160u       /* largest control payload */
#define DS_WIRE_MSG_MAX   (1u << 30) /* no message is ever larger, whatever was negotiated */

enum ds_wire_type {
        DS_WIRE_DATA = 1,
        DS_WIRE_HELLO = 2,     /* blast -> sink: the run's options */
        DS_WIRE_HELLO_ACK = 3, /* sink -> blast: accepted (or why not), receiver's offer */
        DS_WIRE_CREDIT = 4,    /* sink -> blast: may send up to this many messages in all */
        DS_WIRE_END = 5,       /* blast -> sink: what was sent */
        DS_WIRE_FINAL = 6,     /* sink -> blast: what was received */
        DS_WIRE_TYPE_MAX = 6,
};

/* Why a frame was rejected; each reason has its own counter. */
enum ds_wire_reject {
        DS_WIRE_OK = 0,
        DS_WIRE_SHORT,     /* fewer bytes than a header */
        DS_WIRE_MAGIC_BAD, /* not ours */
        DS_WIRE_VERSION_BAD,
        DS_WIRE_TYPE_BAD,
        DS_WIRE_CHECK_BAD,   /* header checksum does not match */
        DS_WIRE_LENGTH_BAD,  /* fragment longer than what arrived, or zero */
        DS_WIRE_OFFSET_BAD,  /* fragment does not lie inside its message */
        DS_WIRE_TOO_BIG,     /* message larger than this link accepts */
        DS_WIRE_CTL_BAD,     /* control payload of the wrong size or with a bad field */
        DS_WIRE_SESSION_BAD, /* not the session this link carries */
        DS_WIRE_CLAIM_BAD,   /* a number (seq, END's counts) beyond what was credited or seen */
        DS_WIRE_REJECT_COUNT
};
const char *ds_wire_reject_name(enum ds_wire_reject reason); /* "short", "magic", ... */

struct ds_wire_hdr {
        uint8_t type;      /* enum ds_wire_type */
        uint32_t session;  /* chosen by blast per stream; raw and udp demultiplex on it */
        uint64_t seq;      /* message number in the stream (data); 0 for control */
        uint32_t msg_len;  /* whole message */
        uint32_t frag_off; /* where this frame's payload sits in the message */
        uint32_t frag_len; /* payload bytes in this frame */
};

/* Writes the 32-byte header (with its checksum) to out. */
void ds_wire_encode(void *out, const struct ds_wire_hdr *hdr);

enum ds_wire_parse_flags {
        /* The payload is not in frame (a tcp stream reads it next): frag_len is checked
         * against max_msg only, and fragments are refused. */
        DS_WIRE_STREAM = 1 << 0,
};

/* The one parser. Checks avail bytes of frame as received: magic, version, type,
 * checksum, that frag_len > 0 fits in what arrived (datagrams may carry padding after
 * it), that the fragment lies inside msg_len, msg_len <= max_msg, and that control
 * frames are unfragmented and at most DS_WIRE_CTL_MAX. Returns DS_WIRE_OK with hdr
 * filled (the payload starts at frame + DS_WIRE_HDR_LEN) or the reason to count. */
enum ds_wire_reject ds_wire_parse(const void *frame, size_t avail, uint32_t max_msg, unsigned flags,
                                  struct ds_wire_hdr *hdr);

/* Control messages, decoded. */
enum ds_hello_flags {
        DS_HELLO_VERIFY = 1 << 0, /* payloads carry the --verify pattern */
        DS_HELLO_EVENTS = 1 << 1, /* verbs: completion events on the receiver too */
        /* each message is one MODE E block, its data first and its header last (xftp's
         * verbs channel): a receiver that frames otherwise refuses the hello */
        DS_HELLO_MODEE = 1 << 2,
        DS_HELLO_FLAGS_ALL = (1 << 3) - 1,
};

#define DS_WIRE_OFFER_MAX 64

struct ds_wire_hello {
        uint32_t flags; /* enum ds_hello_flags */
        uint32_t msg_size;
        uint64_t count;       /* messages in this stream; 0 when bounded by duration */
        uint32_t duration_ms; /* 0 when bounded by count */
        uint8_t flow;         /* enum ds_flow */
        uint8_t op;           /* enum ds_link_op */
        uint16_t streams;     /* streams (QPs) in the run, >= 1 */
        uint16_t stream;      /* this one, < streams */
        uint64_t run_id;      /* the same on every stream of one blast run */
        uint32_t window;      /* messages the sender wants in flight, 0: receiver decides */
        uint32_t offer_window;
        uint8_t offer_len;
        uint8_t offer[DS_WIRE_OFFER_MAX];
};

enum ds_ack_status {
        DS_ACK_OK = 0,
        DS_ACK_TOO_BIG = 1,     /* msg_size beyond what the sink's link carries */
        DS_ACK_UNSUPPORTED = 2, /* an op or flow this link cannot do */
        DS_ACK_BUSY = 3,        /* the sink serves one run at a time (--once) or is full */
        DS_ACK_FAILED = 4,      /* the sink could not set up its buffers */
        DS_ACK_NO_MEMORY = 5,   /* the run's buffers would pass the sink's memory budget */
        DS_ACK_CONFLICT = 6,    /* run and stream already taken, or unlike the run's others */
        DS_ACK_STATUS_MAX = 6,
};

struct ds_wire_hello_ack {
        uint32_t status;  /* enum ds_ack_status */
        uint32_t max_msg; /* the largest message the sink takes (its link, its --max-msg) */
        uint32_t offer_window;
        uint8_t offer_len;
        uint8_t offer[DS_WIRE_OFFER_MAX];
};

struct ds_wire_credit {
        uint64_t limit; /* total messages the sender may have sent so far */
};

struct ds_wire_end {
        uint64_t messages;
        uint64_t bytes;
};

#define DS_WIRE_FAULTS 5 /* lost, dup, reordered, corrupt, malformed (enum ds_fault) */

#define DS_WIRE_CPU_UNSAID UINT64_MAX /* a FINAL without CPU times (an older sink's) */

struct ds_wire_final {
        uint64_t messages;
        uint64_t bytes;
        uint64_t faults[DS_WIRE_FAULTS];
        uint64_t recv_ns;     /* first to last data message, on the receiver's clock */
        uint64_t cpu_user_us; /* the receiver's CPU since its run began, in us, */
        uint64_t cpu_sys_us;  /* or DS_WIRE_CPU_UNSAID when it did not say */
};

union ds_wire_ctl {
        struct ds_wire_hello hello;
        struct ds_wire_hello_ack ack;
        struct ds_wire_credit credit;
        struct ds_wire_end end;
        struct ds_wire_final final;
};

/* Encodes a control payload of type into out (cap bytes, DS_WIRE_CTL_MAX is always
 * enough). Returns its length, or 0 for a type that is not control or a cap too small. */
size_t ds_wire_ctl_encode(uint8_t type, const union ds_wire_ctl *ctl, void *out, size_t cap);

/* Decodes and checks a control payload of len bytes (exact size for the type, known
 * values, offer_len within bounds). Returns DS_WIRE_OK or DS_WIRE_CTL_BAD/TYPE_BAD. */
enum ds_wire_reject ds_wire_ctl_decode(uint8_t type, const void *payload, size_t len,
                                       union ds_wire_ctl *ctl);

#endif
