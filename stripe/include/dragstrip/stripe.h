/* Striped files: one logical file kept as N member files, one in each of N directories
 * (one directory per disk), stripe units of U bytes round-robin (see stripe_layout.h and
 * docs/stripe-format.md).
 *
 * Each member has its own worker thread, so a large read or write keeps every disk busy
 * at once. Members are opened with O_DIRECT; pieces that are not 4 KiB-aligned in memory,
 * length and offset go through an ordinary descriptor of the same file. Where O_DIRECT is
 * refused (tmpfs) the member is buffered throughout and ds_stripe_stat() says so.
 *
 * One thread drives a struct ds_stripe: submit, wait, commit and close are not to be
 * called concurrently. */
#ifndef DRAGSTRIP_STRIPE_H
#define DRAGSTRIP_STRIPE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <dragstrip/stripe_header.h>
#include <dragstrip/stripe_layout.h>

struct ds_error;
struct ds_live_segment;
struct ds_pool;

#define DS_STRIPE_TMP_PREFIX ".dstmp." /* members of files not yet committed */
#define DS_STRIPE_NAME_MAX   200u

enum ds_stripe_flags {
        DS_STRIPE_WRITE = 1u << 0,     /* open: allow writes, truncate */
        DS_STRIPE_NO_DIRECT = 1u << 1, /* never use O_DIRECT */
        DS_STRIPE_REPLACE = 1u << 2,   /* create: commit replaces a file of the same name */
        /* No data checksums: create stores none, reads check none. For CPUs where CRC-32C
         * costs more than the disks (an emulated CPU); headers are always checked. */
        DS_STRIPE_NO_CHECKSUM = 1u << 3,
};

struct ds_stripe_options {
        uint64_t unit;                /* create: bytes per unit; 0 means the default 1 MiB */
        unsigned flags;               /* enum ds_stripe_flags */
        unsigned depth;               /* submits in flight at once; 0 means 4 */
        struct ds_live_segment *live; /* counts I/Os and bytes as members finish them */
        /* Stream buffers (ds_stripe_stream_pool) stay within this many bytes whatever the
         * unit; 0 means ds_stripe_default_budget(). */
        uint64_t mem_budget;
        const atomic_bool *stop; /* when set, streams end with -EINTR at the next buffer */
};

/* The default buffer budget: a sixteenth of the machine's memory, at most 256 MiB. */
uint64_t ds_stripe_default_budget(void);

struct ds_stripe_info {
        struct ds_stripe_layout layout;
        uint64_t size;
        uint8_t set_id[DS_STRIPE_SET_ID_SIZE];
        bool data_crc;       /* every member carries a checksum of its data */
        unsigned direct;     /* members doing O_DIRECT */
        int buffered_member; /* first member where O_DIRECT was refused, or -1 */
};

struct ds_stripe;

/* Creates a new striped file NAME over dirs[0..ndirs-1]. Members are written under
 * temporary names; ds_stripe_commit() puts them in place, so a file that is never
 * committed leaves nothing under NAME. Fails with -EEXIST if NAME exists (unless
 * DS_STRIPE_REPLACE). The caller owns *out and ends it with ds_stripe_close(). */
int ds_stripe_create(struct ds_stripe **out, const char *const *dirs, unsigned ndirs,
                     const char *name, const struct ds_stripe_options *options,
                     struct ds_error *err);

/* Opens an existing striped file. Every member is checked before this returns: present,
 * header sound, same set, width equal to ndirs, member i in dirs[i], length as the layout
 * says. Any mismatch fails with an error naming the member and what is wrong. */
int ds_stripe_open(struct ds_stripe **out, const char *const *dirs, unsigned ndirs,
                   const char *name, const struct ds_stripe_options *options, struct ds_error *err);

/* Writes the headers, syncs the members and renames them into place (a created file). */
int ds_stripe_commit(struct ds_stripe *stripe, struct ds_error *err);

/* Waits for I/O in flight, writes headers if the file changed, closes. A created file
 * that was not committed is removed. Returns the first error of any of that. */
int ds_stripe_close(struct ds_stripe *stripe, struct ds_error *err);

/* Starts a read or write of len bytes at logical offset and returns a ticket (>= 0) for
 * ds_stripe_wait(), or a negative errno: -EBUSY when `depth` submits are in flight. Reads
 * stop at the end of the file. buf must stay valid until the wait. */
int ds_stripe_submit_read(struct ds_stripe *stripe, void *buf, size_t len, uint64_t offset,
                          struct ds_error *err);
int ds_stripe_submit_write(struct ds_stripe *stripe, const void *buf, size_t len, uint64_t offset,
                           struct ds_error *err);
/* Waits for a ticket; *done (may be NULL) gets the bytes moved. */
int ds_stripe_wait(struct ds_stripe *stripe, int ticket, size_t *done, struct ds_error *err);

/* Submit and wait in one call. */
int ds_stripe_pread(struct ds_stripe *stripe, void *buf, size_t len, uint64_t offset, size_t *done,
                    struct ds_error *err);
int ds_stripe_pwrite(struct ds_stripe *stripe, const void *buf, size_t len, uint64_t offset,
                     struct ds_error *err);

/* Writes the headers if anything changed and fsyncs every member. */
int ds_stripe_fsync(struct ds_stripe *stripe, struct ds_error *err);

/* Sets the logical size, cutting or extending (with zeros) every member to match. */
int ds_stripe_truncate(struct ds_stripe *stripe, uint64_t size, struct ds_error *err);

void ds_stripe_stat(const struct ds_stripe *stripe, struct ds_stripe_info *info);

/* Path of member i as it is on disk now (temporary until commit). */
const char *ds_stripe_member_path(const struct ds_stripe *stripe, unsigned member);

/* After the whole file has been read once, in order, compares what each member gave with
 * the checksum in its header. 0 when every member matched, -EIO naming the first member
 * that did not, -ENODATA when there is nothing to compare (no checksums stored, or the
 * reads did not cover every member in order). */
int ds_stripe_check_data(const struct ds_stripe *stripe, struct ds_error *err);

/* Streams. Both keep every buffer of pool in flight at once (up to the stripe's depth) and
 * go through the file in order from offset 0, so the members' checksums are kept. */

/* Gives the caller the file's bytes in order: len bytes at offset, in a pool buffer that
 * is reused after the call returns. A non-zero return stops the stream and is returned. */
typedef int (*ds_stripe_sink_fn)(const void *buf, size_t len, uint64_t offset, void *ctx,
                                 struct ds_error *err);
/* Fills buf with up to room bytes and sets *len; fewer than room only at the end (0 ends
 * the stream). A non-zero return stops the stream and is returned. */
typedef int (*ds_stripe_source_fn)(void *buf, size_t room, size_t *len, void *ctx,
                                   struct ds_error *err);
int ds_stripe_read_stream(struct ds_stripe *stripe, struct ds_pool *pool, ds_stripe_sink_fn sink,
                          void *ctx, struct ds_error *err);
/* Appends from offset stripe size onward (0 for a new file). */
int ds_stripe_write_stream(struct ds_stripe *stripe, struct ds_pool *pool,
                           ds_stripe_source_fn source, void *ctx, struct ds_error *err);

/* A pool suited to streaming this file: as many buffers as the stripe's depth, each one
 * full stripe (width x unit) or, where that would pass the memory budget, the largest
 * multiple of 4K (of the unit, when one fits) that keeps them all within it, and no larger
 * than an opened file (rounded up to 4K). -ENOMEM when the budget cannot hold depth
 * buffers of 4K. */
int ds_stripe_stream_pool(const struct ds_stripe *stripe, struct ds_pool **pool,
                          struct ds_error *err);

/* Opens NAME read-only (all of ds_stripe_open's checks) and, with data, reads every byte
 * and checks the data checksums. info (may be NULL) gets what was found. */
int ds_stripe_verify(const char *const *dirs, unsigned ndirs, const char *name, bool data,
                     struct ds_stripe_info *info, struct ds_error *err);
/* The same with options (flags, memory budget, stop flag; may be NULL). */
int ds_stripe_verify_with(const char *const *dirs, unsigned ndirs, const char *name,
                          const struct ds_stripe_options *options, bool data,
                          struct ds_stripe_info *info, struct ds_error *err);

/* Removes every member of NAME that carries a stripe header (damaged ones too), member 0
 * first: that is the commit point, so a removal cut short leaves no file that reads, and
 * running it again removes the rest. Temporary members of a put cut short that no running
 * put holds go too. Files without a stripe header and non-regular files are left alone.
 * Returns how many entries were removed or put in place, -ENOENT if none. */
int ds_stripe_unlink(const char *const *dirs, unsigned ndirs, const char *name,
                     struct ds_error *err);

/* Renames the striped file from to to, with the commit point of a put: a crash at any
 * instant leaves from whole or to whole (the old name may then keep members without
 * member 0, which ls shows as damaged and rm removes). Only a file that opens cleanly is
 * renamed. -EEXIST when to exists, unless replace. */
int ds_stripe_rename(const char *const *dirs, unsigned ndirs, const char *from, const char *to,
                     bool replace, struct ds_error *err);
/* The same from one set of directories to another (a move to another directory of the
 * same disks: from_dirs[i] and to_dirs[i] on one filesystem), for a caller that holds
 * ds_stripe_lock(exclusive) of from_dirs[0] and of to_dirs[0] (once when they are the
 * same directory; two callers take two such locks in one order, e.g. by inode). */
int ds_stripe_rename_held(const char *const *from_dirs, const char *from,
                          const char *const *to_dirs, const char *to, unsigned ndirs, bool replace,
                          struct ds_error *err);

/* The lock that makes each commit, rm and mv in a set of directories one act: member 0's
 * directory, dir0, flocked (exclusive or shared) while names change or members open. A
 * caller of ds_stripe_rename_held() (a rename across directories) holds it
 * exclusively around that. Returns a descriptor for ds_stripe_unlock() or a negative
 * errno: -EINTR when a stop (stop.h) came first, -ETIMEDOUT when it stayed held 30 s. */
int ds_stripe_lock(const char *dir0, bool exclusive, struct ds_error *err);
void ds_stripe_unlock(int lock_fd);

/* Calls fn for each striped file in the directories, in name order, with its info, or
 * with problem set (and info NULL) when it does not open cleanly or is not committed (as
 * ds_stripe_scan() without hidden names). A non-zero return from fn stops the walk and is
 * returned. */
typedef int (*ds_stripe_list_fn)(const char *name, const struct ds_stripe_info *info,
                                 const char *problem, void *ctx);
int ds_stripe_list(const char *const *dirs, unsigned ndirs, ds_stripe_list_fn fn, void *ctx,
                   struct ds_error *err);

enum ds_stripe_state {
        DS_STRIPE_OK,      /* opens cleanly: every member present and consistent */
        DS_STRIPE_DAMAGED, /* some member under the final name, but the file does not open */
        DS_STRIPE_PARTIAL, /* only temporary members: a put running or cut short */
};

struct ds_stripe_entry {
        const char *name;
        enum ds_stripe_state state;
        const struct ds_stripe_info *info; /* DS_STRIPE_OK only */
        const char *problem;               /* otherwise: why, one line */
        bool leftover; /* DS_STRIPE_PARTIAL that no running put holds: fsck removes it */
};

#define DS_STRIPE_SCAN_HIDDEN 1u /* names starting with '.' too */

/* Calls fn for every name that has any member (final or temporary) in any of the
 * directories, in name order, with its state. Opens nothing that is not a regular file.
 * A non-zero return from fn stops the walk and is returned. */
typedef int (*ds_stripe_scan_fn)(const struct ds_stripe_entry *entry, void *ctx);
int ds_stripe_scan(const char *const *dirs, unsigned ndirs, unsigned flags, ds_stripe_scan_fn fn,
                   void *ctx, struct ds_error *err);

/* Finishes or undoes what crashes left: members of committed files still under temporary
 * names are put in place, temporary members that no running put holds are removed, and
 * report (may be NULL) hears of each (committed: put in place, else removed). Returns how
 * many entries it changed, or a negative errno. */
typedef void (*ds_stripe_sweep_fn)(const char *path, bool committed, void *ctx);
int ds_stripe_fsck(const char *const *dirs, unsigned ndirs, ds_stripe_sweep_fn report, void *ctx,
                   struct ds_error *err);

/* Splits "a,b,c" into a NULL-terminated array of directory names (one allocation; free()
 * it). Rejects empty entries and more than DS_STRIPE_MAX_WIDTH. */
int ds_stripe_dirs_parse(const char *list, char ***dirs, unsigned *ndirs, struct ds_error *err);

/* Checks a striped set before use: 1 to DS_STRIPE_MAX_WIDTH directories, each one, no two
 * the same (by identity, not spelling: one directory per disk). 0, or a negative errno. */
int ds_stripe_check_dirs(const char *const *dirs, unsigned ndirs, struct ds_error *err);

/* Checks a file name for use as NAME: non-empty, no '/', not "." or "..", not starting
 * with DS_STRIPE_TMP_PREFIX, at most DS_STRIPE_NAME_MAX bytes. */
int ds_stripe_name_check(const char *name, struct ds_error *err);

#endif
