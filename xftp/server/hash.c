/* HASH: a file's checksum computed on the server, over RANG's range if one was set. */
#include "channel.h"
#include "transfer.h"
#include "watch.h"

#include <dragstrip/error.h>

#include "hash.h"
#include "xfer.h"

#include <errno.h>
#include <stdint.h>

/* HASH's reply once the hash has ended (rc from xftp_hash_file). */
static void reply_hash(struct session *s, int rc, const char *arg, uint64_t start, uint64_t end,
                       const char *hex, const struct ds_error *err)
{
        if (rc == 0) {
                session_reply(s, "213 %s %llu-%llu %s %s", xftp_hash_name(s->hash_algo),
                              (unsigned long long)start, (unsigned long long)end, hex, arg);
                if (atomic_load(&s->aborted))
                        session_reply(s, "226 ABOR: the hash had ended.");
        } else if (atomic_load(&s->xfer_stop)) { /* ABOR, the client gone, or SIGTERM */
                xfer_reply_cut(s, rc, false, err->text);
        } else {
                session_reply(s, "451 Cannot hash %s: %s", arg, err->text);
        }
}

/* Hashes [start, stop) of xfile and replies. Hashing a large file takes long: the watcher
 * lets ABOR, a hang-up or SIGTERM end it. */
static void run_hash(struct session *s, struct xftp_xfile *xfile, const char *arg, uint64_t start,
                     uint64_t stop)
{
        char hex[XFTP_HASH_HEX_MAX];
        struct ds_error err;
        uint64_t end = 0;

        if (watch_begin(s) < 0) {
                session_reply(s, "451 Cannot start the hash.");
                return;
        }
        int rc = xftp_hash_file(xfile, s->hash_algo, start, stop, s->config->block, &s->xfer_stop,
                                hex, &end, &err);
        watch_end(s);
        reply_hash(s, rc, arg, start, end, hex, &err);
}

void xfer_cmd_hash(struct session *s, const char *arg)
{
        char path[XFTP_STORE_PATH_MAX];
        struct xftp_store_file *file = NULL;
        uint64_t size = 0;

        int rc = xftp_store_path(s->cwd, arg, path, sizeof(path));
        if (rc == 0)
                rc = xftp_store_open_read(s->store, path, &file);
        struct xftp_xfile *xfile = rc == 0 ? xftp_store_xfile(file) : NULL;
        if (rc == 0)
                rc = xfile->ops->size(xfile, &size);
        uint64_t start = s->range_start, stop = s->range_end ? s->range_end : UINT64_MAX;
        if (rc == -EISDIR) {
                session_reply(s, "553 %s is a directory; HASH takes a file.", arg);
        } else if (rc < 0) {
                session_reply_errno(s, rc, arg);
        } else if (start > 0 && start >= size) {
                /* The draft's RANG: a range out of the file is refused by the command it
                 * applies to, as an invalid restart point is. */
                session_reply(s,
                              "554 RANG start %llu lies at or beyond the end of %s (%llu bytes).",
                              (unsigned long long)start, arg, (unsigned long long)size);
        } else if (xfer_budget_take(s, s->config->block)) { /* xftp_hash_file's one buffer */
                run_hash(s, xfile, arg, start, stop);
                xfer_budget_give(s, s->config->block);
        }
        if (file)
                xftp_store_file_close(file, false);
        xfer_reset(s);
}
