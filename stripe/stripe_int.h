/* Internals shared by the files of libdsstripe: the open file, its members and the
 * per-member worker queues. Not installed. */
#ifndef DS_STRIPE_INT_H
#define DS_STRIPE_INT_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <dragstrip/error.h>
#include <dragstrip/stripe.h>

/* A failure whose message says it all: no strerror text appended. */
#define stripe_reject(err, code, ...) (ds_fail((err), 0, __VA_ARGS__), (code))

/* What stripe_open_entry() returns for an entry that is not a regular file. */
#define STRIPE_ENOTREG EMEDIUMTYPE

#define QUEUE_CAP     64u /* pieces waiting per member; a submitter blocks beyond this */
#define DEFAULT_DEPTH 4u

struct stripe_slot;

/* One piece of a submit, for one member's worker. */
struct stripe_request {
        struct stripe_slot *slot;
        uint8_t *buf;
        size_t len;
        uint64_t data_offset;
        bool write;
        uint8_t sync; /* enum stripe_sync: an fsync instead of data */
};

enum stripe_sync { SYNC_NONE, SYNC_FILE, SYNC_FILE_AND_DIR };

struct member_queue {
        pthread_mutex_t lock;
        pthread_cond_t not_empty;
        pthread_cond_t not_full;
        struct stripe_request items[QUEUE_CAP];
        unsigned head;
        unsigned count;
        bool stop;
};

/* A running CRC-32C of a member's data, valid while the data arrives in order. */
struct data_crc {
        uint64_t next; /* data offset the next in-order piece starts at */
        uint32_t crc;
        bool ok;
};

struct stripe_member {
        struct ds_stripe *stripe;
        unsigned index;
        char *path;     /* the member's final name */
        char *tmp_path; /* where a created member lives until commit, else NULL */
        int fd;         /* ordinary descriptor: headers and unaligned pieces */
        int fd_direct;  /* O_DIRECT descriptor, -1 when refused or not wanted */
        bool direct_refused;
        struct ds_stripe_header header; /* as last read from or written to disk */
        struct data_crc written;        /* updated by the checker while the engine runs */
        struct data_crc read;           /* updated by the checker while the engine runs */
        pthread_t worker;
        bool worker_running;
        struct member_queue queue;
        /* Checksums run on their own thread, behind the I/O: the worker hands each piece it
         * moved to the checker and starts the next at once, so the disk never waits for a
         * CRC. Pieces reach the checker in queue order, which keeps the running CRCs. */
        pthread_t checker;
        bool checker_running;
        struct member_queue checks;
};

/* One submit in flight. pending, error and err are guarded by the stripe's done_lock. */
struct stripe_slot {
        bool busy;
        bool write;
        uint8_t *buf;
        size_t len; /* clipped to the end of the file for reads */
        uint64_t offset;
        unsigned pending;
        int error;
        struct ds_error err;
};

struct ds_stripe {
        struct ds_stripe_layout layout;
        uint64_t size;
        uint8_t set_id[DS_STRIPE_SET_ID_SIZE];
        unsigned flags;
        bool created;   /* by ds_stripe_create, members under temporary names */
        bool committed; /* renamed into place */
        bool dirty;     /* headers on disk are stale */
        bool writable;
        bool checksums; /* keep running data checksums (not DS_STRIPE_NO_CHECKSUM) */
        struct ds_live_segment *live;
        const atomic_bool *stop;
        uint64_t mem_budget;
        unsigned depth;
        struct stripe_slot *slots;
        pthread_mutex_t done_lock;
        pthread_cond_t done_cond;
        bool engine_running;
        char *lock_dir; /* dirs[0]: its lock makes a commit one act (stripe_lock) */
        unsigned width;
        struct stripe_member members[];
};

/* engine.c */
int stripe_engine_start(struct ds_stripe *stripe, struct ds_error *err);
void stripe_engine_stop(struct ds_stripe *stripe);
int stripe_drain(struct ds_stripe *stripe, struct ds_error *err);
/* fsyncs every member (and, with SYNC_FILE_AND_DIR, the directory entry it has now) on
 * the members' own workers, so every disk syncs at once. No submit may be in flight. */
int stripe_sync_all(struct ds_stripe *stripe, enum stripe_sync what, struct ds_error *err);
void data_crc_reset(struct data_crc *crc);

/* stripe.c */
/* A commit, sweep, rm or mv changes several directory entries of one name; readers must
 * see all of those changes or none. Member 0's directory is the lock: held exclusively
 * (LOCK_EX) across such changes, shared (LOCK_SH) by a reader while it opens the members.
 * Every holder keeps it for renames and opens only, never for data I/O. Returns a
 * descriptor for stripe_unlock() or a negative errno: -EINTR when a stop came first,
 * -ETIMEDOUT after 30 s (someone holds the directory locked for good). */
int stripe_lock(const char *dir0, int op, struct ds_error *err);
void stripe_unlock(int lock_fd);
/* fsync of the directory holding path, so a create, rename or unlink there is durable. */
int stripe_sync_dir_of(const char *path, struct ds_error *err);
char *stripe_join(const char *dir, const char *prefix, const char *name);
/* dir/.dstmp.<set id hex>.name: where a member of that set lives until its commit. */
char *stripe_tmp_path(const char *dir, const uint8_t *set_id, const char *name);
const char *stripe_hex_id(char out[2 * DS_STRIPE_SET_ID_SIZE + 1], const uint8_t *id);
/* Opens a directory entry that must be a regular file, never blocking on a FIFO: a
 * descriptor, or a negative errno (-STRIPE_ENOTREG for anything not a regular file). */
int stripe_open_entry(const char *path, int flags);
int stripe_write_headers(struct ds_stripe *stripe, struct ds_error *err);
/* Opens the members of NAME and checks them; the engine is not started. */
int stripe_probe(struct ds_stripe **out, const char *const *dirs, unsigned ndirs, const char *name,
                 const struct ds_stripe_options *options, struct ds_error *err);
/* The same for a caller that holds stripe_lock(dirs[0]) already. */
int stripe_probe_held(struct ds_stripe **out, const char *const *dirs, unsigned ndirs,
                      const char *name, const struct ds_stripe_options *options,
                      struct ds_error *err);
void stripe_free(struct ds_stripe *stripe);

/* scan.c */
/* Reads the header at the start of path: 1 and *header filled when it is a sound stripe
 * header, 0 when the file starts with the stripe magic but the rest is unsound, -1 when it
 * is no stripe member (absent, not a regular file, no magic). header may be NULL. */
int stripe_peek(const char *path, struct ds_stripe_header *header);
/* Leftovers of puts cut short, for name (every name when NULL): members of a committed
 * set still under a temporary name are renamed into place, temporary members no running
 * put holds are removed. The caller holds stripe_lock(dirs[0], LOCK_EX). Returns how many
 * entries it changed or a negative errno. */
int stripe_sweep(const char *const *dirs, unsigned ndirs, const char *name,
                 ds_stripe_sweep_fn report, void *ctx, struct ds_error *err);

#endif
