/* Live counters: what a running tool has moved so far, shared with `tach` and with the
 * tool's own reporter.
 *
 * A tool opens one segment at start. It lives in shared memory as
 * /dev/shm/dragstrip.<pid>, readable by its owner only, with the fixed layout below
 * (docs/live.md), written with relaxed atomics, and is removed by ds_live_close(). After
 * the header come slots: one per stream, or per disk for stripe, claimed and given back
 * while the tool runs. tach maps every such segment read-only and ignores those whose
 * process is gone. */
#ifndef DRAGSTRIP_LIVE_H
#define DRAGSTRIP_LIVE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ds_error;

#define DS_LIVE_MAGIC   0x44534c56u /* "DSLV" */
#define DS_LIVE_VERSION 2u
#define DS_LIVE_PREFIX  "dragstrip." /* in /dev/shm */
#define DS_LIVE_SLOTS   128u         /* streams or disks per segment */

/* Errors counted by receivers, by kind; also the keys of the JSON "errors" object. */
enum ds_fault {
        DS_FAULT_LOST,
        DS_FAULT_DUP,
        DS_FAULT_REORDERED,
        DS_FAULT_CORRUPT,
        DS_FAULT_MALFORMED,
        DS_FAULT_COUNT
};
const char *ds_fault_name(enum ds_fault fault); /* "lost", "dup", ... */

enum ds_live_state { DS_LIVE_STARTING, DS_LIVE_RUNNING, DS_LIVE_DONE };

/* The segment's header, version DS_LIVE_VERSION. Text fields are NUL-terminated. Version 2
 * appended everything from slot_offset on; the fields before it are version 1's. */
struct ds_live_segment {
        uint32_t magic;
        uint32_t version;
        int32_t pid;
        _Atomic uint32_t state; /* enum ds_live_state */
        char tool[16];          /* "ttcp", "blast", ... */
        char role[16];          /* "send", "recv" */
        char link[16];          /* "tcp", "udp", "raw", "verbs", "disk" */
        char peer[64];          /* who is at the other end, if known */
        uint64_t msg_size;      /* bytes per message or I/O */
        uint64_t start_ns;      /* CLOCK_MONOTONIC when the transfer began */
        _Atomic uint64_t messages;
        _Atomic uint64_t bytes;
        _Atomic uint64_t faults[DS_FAULT_COUNT];
        uint32_t slot_offset;   /* where the slots begin, from the segment's start */
        uint32_t slot_size;     /* sizeof(struct ds_live_slot) */
        uint32_t slot_count;    /* slots after the header; 0 in private counters */
        uint32_t fault_count;   /* DS_FAULT_COUNT */
        uint64_t start_unix_ns; /* CLOCK_REALTIME of start_ns, for people */
        uint64_t end_ns;        /* CLOCK_MONOTONIC at ds_live_done, 0 before */
};

enum ds_live_slot_state {
        DS_SLOT_FREE,    /* never used */
        DS_SLOT_CLAIMED, /* being filled in: not yet for readers */
        DS_SLOT_ACTIVE,  /* moving data */
        DS_SLOT_ENDED,   /* its totals are final; may be claimed again */
};
enum ds_live_slot_kind { DS_SLOT_STREAM, DS_SLOT_DISK };

/* One stream's or disk's counters, a cache line pair of its own so that streams on
 * different cores never share one. */
struct ds_live_slot {
        _Atomic uint32_t state;      /* enum ds_live_slot_state */
        _Atomic uint32_t generation; /* bumped at each claim: a reader sees a new occupant */
        uint32_t kind;               /* enum ds_live_slot_kind */
        uint32_t index;              /* stream number, or the disk's place in the set */
        char name[48];               /* the stream's peer, the disk's directory */
        _Atomic uint64_t messages;
        _Atomic uint64_t bytes;
        _Atomic uint64_t faults[DS_FAULT_COUNT];
        uint8_t reserved[128 - 64 - 8 * (2 + DS_FAULT_COUNT)];
};

/* A snapshot of the counters, read with ds_live_read(). */
struct ds_counters {
        uint64_t messages;
        uint64_t bytes;
        uint64_t faults[DS_FAULT_COUNT];
};

struct ds_live;

/* --no-stats: from now on ds_live_open() keeps the counters in private memory, so the
 * tool still reports but publishes nothing. Call it from main() before the first open. */
void ds_live_disable(void);
struct option;
/* Every tool's --no-stats, taken out of argv before its own parsing, so each main() needs
 * one line: argc = ds_live_take_option(argc, argv, shorts, longs), with the option string
 * and long options the tool gives getopt_long. Only an option is taken: never another
 * option's value (`-o --no-stats` where -o takes one) nor a word after "--". Calls
 * ds_live_disable() if it was there; returns the new argc. */
int ds_live_take_option(int argc, char **argv, const char *shorts, const struct option *longs);

/* Creates the segment for this process, first removing any left in /dev/shm by processes
 * that are gone (killed before ds_live_close). If shared memory is refused (or publishing
 * is disabled) the counters live in private memory instead (the tool still reports; tach
 * just cannot see it) and *shared reports which (shared may be NULL). Returns 0 or a
 * negative errno. */
int ds_live_open(struct ds_live **out, const char *tool, const char *role, const char *link,
                 int *shared, struct ds_error *err);
/* Unlinks the segment and frees everything. */
void ds_live_close(struct ds_live *live);

void ds_live_set_peer(struct ds_live *live, const char *peer);
void ds_live_set_msg_size(struct ds_live *live, uint64_t msg_size);
/* Marks the transfer as begun (sets start_ns and state RUNNING) or finished. */
void ds_live_start(struct ds_live *live);
void ds_live_done(struct ds_live *live);

/* Hot path: relaxed atomic adds, safe from any number of threads. */
static inline void ds_live_add(struct ds_live_segment *seg, uint64_t messages, uint64_t bytes)
{
        atomic_fetch_add_explicit(&seg->messages, messages, memory_order_relaxed);
        atomic_fetch_add_explicit(&seg->bytes, bytes, memory_order_relaxed);
}
static inline void ds_live_fault(struct ds_live_segment *seg, enum ds_fault fault, uint64_t n)
{
        atomic_fetch_add_explicit(&seg->faults[fault], n, memory_order_relaxed);
}

/* Claims a slot of seg for one stream or disk (lock-free, any thread). Returns NULL when
 * seg has no slot free or is private (--no-stats); the adders below accept NULL. Not for
 * the hot path: once per stream. */
struct ds_live_slot *ds_live_slot_open(struct ds_live_segment *seg, enum ds_live_slot_kind kind,
                                       unsigned index, const char *name);
/* The slot's totals are final; it stays visible until claimed again. NULL is fine. */
void ds_live_slot_close(struct ds_live_slot *slot);

/* Hot path: counts messages and bytes in the segment's totals and in slot (may be NULL).
 * Relaxed atomic adds, no lock, no system call. */
static inline void ds_live_stream_add(struct ds_live_segment *seg, struct ds_live_slot *slot,
                                      uint64_t messages, uint64_t bytes)
{
        ds_live_add(seg, messages, bytes);
        if (slot) {
                atomic_fetch_add_explicit(&slot->messages, messages, memory_order_relaxed);
                atomic_fetch_add_explicit(&slot->bytes, bytes, memory_order_relaxed);
        }
}
static inline void ds_live_slot_fault(struct ds_live_slot *slot, enum ds_fault fault, uint64_t n)
{
        if (slot)
                atomic_fetch_add_explicit(&slot->faults[fault], n, memory_order_relaxed);
}

/* The segment itself, for the inline adders above. */
struct ds_live_segment *ds_live_segment(struct ds_live *live);

/* Reads every counter once (relaxed). */
void ds_live_read(const struct ds_live_segment *seg, struct ds_counters *out);

/* Reading someone else's segment (tach): ds_live_parse checks a mapped segment of len
 * bytes and copies what it says into a view; the text is made printable. */
struct ds_live_view_slot {
        uint32_t position; /* the slot's place in the segment */
        uint32_t index;
        uint32_t generation;
        enum ds_live_slot_kind kind;
        bool ended;
        char name[48];
        struct ds_counters counters;
};

struct ds_live_view {
        int32_t pid;
        enum ds_live_state state;
        char tool[16], role[16], link[16], peer[64];
        uint64_t msg_size;
        uint64_t start_ns;      /* CLOCK_MONOTONIC, 0 before the transfer began */
        uint64_t start_unix_ns; /* CLOCK_REALTIME of the same instant */
        uint64_t end_ns;        /* CLOCK_MONOTONIC when the tool said it was done, or 0 */
        struct ds_counters counters;
        unsigned slot_count; /* slots in use or ended, in slot order */
        struct ds_live_view_slot slots[DS_LIVE_SLOTS];
};

/* Fills view from the len bytes at mem (a segment as mapped, 8-byte aligned; version 1,
 * without slots, or DS_LIVE_VERSION). Returns 0, or -EAGAIN for a segment still being set
 * up (no magic yet; try again later), or -EINVAL with note saying what is wrong (another
 * version, a size that does not fit, bad text): never trusts a size or count in it. */
int ds_live_parse(const void *mem, size_t len, struct ds_live_view *view, char *note,
                  size_t note_len);

#endif
