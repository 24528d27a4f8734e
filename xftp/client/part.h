/* A download's partial file: ".NAME.xftp-part" beside its destination, how much of it is
 * whole, and its commit under the final name. */
#ifndef XFTP_PART_H
#define XFTP_PART_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

struct ds_error;

/* Writes "dir/.base.xftp-part" for "dir/base" into out ("dir/.bas~TAG.xftp-part" where
 * that name would pass NAME_MAX). Returns 0 or -ENAMETOOLONG (past room). */
int part_name(const char *local, char *out, size_t room);

/* Whether name (a last part) has the shape of a partial's: ".NAME.xftp-part". A file of
 * that name in a tree would take another file's partial under its name, so it is not
 * copied there. */
bool part_name_like(const char *name);

/* What a partial download is a part of: the remote file as the server named it when the
 * download began. */
struct part_origin {
        uint64_t size;     /* UINT64_MAX: not named */
        char modified[24]; /* MDTM's "YYYYMMDDHHMMSS[.f]"; "": not named */
};

/* Opens the partial download: continued with resume, else created afresh (replacing a
 * partial this tool left or an empty file, never another file), and records origin on it.
 * A partial of xftp's whose recorded origin differs from origin (or, none recorded, that
 * holds more than origin's size) is started over: why then says why, else it is "".
 * *offset gets where to continue; *marks says whether the file system keeps the whole-mark
 * (MODE E needs it); *theirs, how many of its first bytes xftp has no record of writing
 * (continued only with resume, and counted so in later runs until the file is whole):
 * nothing says they are the remote's. Such a partial is never started over. The
 * descriptor holds an exclusive flock() on the partial until it is closed: a partial
 * another transfer holds is -EBUSY (one the holder named or removed meanwhile is opened
 * anew). Returns the descriptor or a negative errno with err filled. */
int part_open(const char *part, bool resume, const struct part_origin *origin, uint64_t *offset,
              bool *marks, uint64_t *theirs, char *why, size_t why_room, struct ds_error *err);

/* A partial whose first theirs bytes (part_open) proved not the remote's: cut back to
 * them and its marks off, as its owner left it (not xftp's to remove). */
void part_give_back(int fd, uint64_t theirs);

/* Where a partial download is whole, recorded on it as the data comes: at most every
 * XFTP_RESUME_POINT_EVERY_NS (xfer.h), each time after the bytes below the point are made
 * durable (fdatasync). */
struct part_whole {
        int fd;
        bool marks;           /* the file keeps user.xftp.whole; else its size is its point */
        uint64_t whole;       /* the contiguous prefix written so far */
        uint64_t recorded;    /* the point the file says: the attribute, or the size synced */
        uint64_t recorded_ns; /* when it was last tried */
        int failed;           /* a sync's negative errno: no point moves after it */
        bool final;           /* part_whole_final has run */
};
/* Records that the partial download ((struct part_whole *)ctx) is whole up to whole, when
 * XFTP_RESUME_POINT_EVERY_NS has passed since the last record (xftp_xfer's on_prefix).
 * Returns 0, or a failed sync's negative errno (w->failed): the download ends at once. */
int part_record_whole(uint64_t whole, void *ctx);
/* Records the last point (durable first) on a partial left for --resume, once: a second
 * call does nothing. After a failed sync (w->failed) neither records: the error is told
 * once, so the next sync would pass over the lost pages, and the download must fail
 * rather than take its name; the partial is cut back to the point recorded. Returns the
 * negative errno of a sync this call made that failed (the transfer's own words do not
 * name it), else 0. */
int part_whole_final(struct part_whole *w);
/* The bytes a partial left for --resume keeps, of the whole prefix written: after a failed
 * sync only the point last recorded (the pages above it may be lost), else all of them. */
uint64_t part_whole_kept(const struct part_whole *w, uint64_t prefix);

/* Cuts the partial file to size, gives it the mode of a new file and, when modified is
 * not NULL, that modification time; syncs it and renames it to local. Returns 0 or a
 * negative errno with err filled. */
int part_commit(int fd, const char *part, const char *local, uint64_t size,
                const struct timespec *modified, struct ds_error *err);

/* Whole partial files that wait to take their names together: one syncfs makes them all
 * durable, then they are renamed, then one more syncfs makes the names durable. A tree of
 * many small files pays two syncs per batch instead of two fsyncs per file, and a file
 * still appears under its name only whole and on disk. Threads may share a batch.
 *
 * A flush runs in whichever thread fills the batch, for files of every thread: each file
 * it cannot name (left under its partial's name), or whose name it cannot make durable,
 * is told to unnamed, in that thread, with its final name and why. */
typedef void part_unnamed_fn(void *ctx, const char *local, const struct ds_error *why);
struct part_batch {
        pthread_mutex_t lock;
        struct part_pending *items;
        size_t count, room;
        uint64_t bytes;
        int fs_fd; /* a file on the batch's file system, for syncfs; -1 before the first */
        dev_t dev;
        size_t files_max; /* a batch is flushed when it holds this many files */
        size_t held_max;  /* descriptors its files may keep open, here and in flushes */
        size_t held;      /* under way; a file beyond held_max is committed on its own */
        part_unnamed_fn *unnamed;
        void *unnamed_ctx;
        /* A syncfs tells a writeback error once, to whichever flush runs it, though the
         * pages lost may be of a file that joins a later batch: flushes run one at a time,
         * and after a failed one no file takes its name. */
        pthread_mutex_t flushing;
        int failed; /* the failed sync's negative errno */
};

void part_batch_init(struct part_batch *batch, part_unnamed_fn *unnamed, void *ctx);
/* As part_commit, but the sync and the rename wait for the batch (done at once for a file
 * on another file system). The batch is flushed when it holds many files or bytes. fd
 * stays the caller's. Returns 0 (the file in the batch, or named at once) or a negative
 * errno with err filled: this file's own failure before it joined the batch. */
int part_commit_later(struct part_batch *batch, int fd, const char *part, const char *local,
                      uint64_t size, const struct timespec *modified, struct ds_error *err);
/* Syncs and renames what the batch holds; its failures go to unnamed. */
void part_batch_flush(struct part_batch *batch);
/* Flushes nothing: frees what the batch holds (call part_batch_flush first). */
void part_batch_free(struct part_batch *batch);

/* The bytes an unprivileged user may still write on fd's file system; UINT64_MAX when it
 * cannot be told. */
uint64_t part_free_space(int fd);

#endif
