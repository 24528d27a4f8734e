/* Live counters: what a running tool has moved so far, shared with `tach` and with the
 * tool's own reporter.
 *
 * A tool opens one segment at start. It lives in shared memory as
 * /dev/shm/dragstrip.<pid> with the fixed layout below, written with relaxed atomics,
 * and is removed by ds_live_close(). tach maps every such segment read-only and ignores
 * those whose process is gone. */
#ifndef DRAGSTRIP_LIVE_H
#define DRAGSTRIP_LIVE_H

#include <stdatomic.h>
#include <stdint.h>

struct ds_error;

#define DS_LIVE_MAGIC   0x44534c56u /* "DSLV" */
#define DS_LIVE_VERSION 1u
#define DS_LIVE_PREFIX  "dragstrip." /* in /dev/shm */

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

/* The segment's layout, version DS_LIVE_VERSION. Text fields are NUL-terminated. */
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
};

/* A snapshot of the counters, read with ds_live_read(). */
struct ds_counters {
        uint64_t messages;
        uint64_t bytes;
        uint64_t faults[DS_FAULT_COUNT];
};

struct ds_live;

/* Creates the segment for this process, first removing any left in /dev/shm by processes
 * that are gone (killed before ds_live_close). If shared memory is refused the counters live
 * in private memory instead (the tool still reports; tach just cannot see it) and
 * *shared reports which (shared may be NULL). Returns 0 or a negative errno. */
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

/* The segment itself, for the inline adders above. */
struct ds_live_segment *ds_live_segment(struct ds_live *live);

/* Reads every counter once (relaxed). */
void ds_live_read(const struct ds_live_segment *seg, struct ds_counters *out);

#endif
