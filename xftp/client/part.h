/* A download's partial file: ".NAME.xftp-part" beside its destination, how much of it is
 * whole, and its commit under the final name. */
#ifndef XFTP_PART_H
#define XFTP_PART_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ds_error;

/* Writes "dir/.base.xftp-part" for "dir/base" into out ("dir/.bas~TAG.xftp-part" where
 * that name would pass NAME_MAX). Returns 0 or -ENAMETOOLONG (past room). */
int part_name(const char *local, char *out, size_t room);

/* What a partial download is a part of: the remote file as the server named it when the
 * download began. */
struct part_origin {
        uint64_t size;     /* UINT64_MAX: not named */
        char modified[24]; /* MDTM's "YYYYMMDDHHMMSS[.f]"; "": not named */
};

/* Opens the partial download: continued with resume, else created afresh (replacing a
 * partial this tool left, never another file), and records origin on it. A partial of
 * xftp's whose recorded origin differs from origin (or, none recorded, that holds more
 * than origin's size) is started over: why then says why, else it is "". *offset gets
 * where to continue; *marks says whether the file system keeps the whole-mark (MODE E
 * needs it). Returns the descriptor or a negative errno with err filled. */
int part_open(const char *part, bool resume, const struct part_origin *origin, uint64_t *offset,
              bool *marks, char *why, size_t why_room, struct ds_error *err);

/* Records that the partial file *(int *)ctx is whole up to whole (ds_xfer's on_prefix). */
void part_record_whole(uint64_t whole, void *ctx);

/* Cuts the partial file to size, syncs it and renames it to local. Returns 0 or a negative
 * errno with err filled. */
int part_commit(int fd, const char *part, const char *local, uint64_t size, struct ds_error *err);

/* The bytes an unprivileged user may still write on fd's file system; UINT64_MAX when it
 * cannot be told. */
uint64_t part_free_space(int fd);

#endif
