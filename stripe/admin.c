/* Whole-file operations over the directories: verify, unlink, list; and the checks of the
 * names and directory lists callers type. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dragstrip/pool.h>

#include "stripe_int.h"

int ds_stripe_name_check(const char *name, struct ds_error *err)
{
        size_t len = strlen(name);

        if (len == 0 || len > DS_STRIPE_NAME_MAX)
                return stripe_reject(err, -EINVAL, "name of %zu bytes: expected 1 to %u", len,
                                     DS_STRIPE_NAME_MAX);
        if (strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
                return stripe_reject(err, -EINVAL, "name '%s': expected a plain file name, no '/'",
                                     name);
        if (strncmp(name, DS_STRIPE_TMP_PREFIX, strlen(DS_STRIPE_TMP_PREFIX)) == 0)
                return stripe_reject(err, -EINVAL, "name '%s': the prefix %s is reserved", name,
                                     DS_STRIPE_TMP_PREFIX);
        return 0;
}

int ds_stripe_dirs_parse(const char *list, char ***dirs, unsigned *ndirs, struct ds_error *err)
{
        size_t len = strlen(list);
        unsigned count = 1;
        char **array, *copy;

        for (const char *p = list; *p; p++)
                count += *p == ',';
        if (count > DS_STRIPE_MAX_WIDTH)
                return stripe_reject(err, -EINVAL, "%u directories: at most %u", count,
                                     DS_STRIPE_MAX_WIDTH);
        /* One allocation: the pointer array, then a copy of the list cut at the commas. */
        array = malloc((count + 1) * sizeof(char *) + len + 1);
        if (!array)
                return ds_fail(err, -ENOMEM, "directory list");
        copy = (char *)(array + count + 1);
        memcpy(copy, list, len + 1);
        for (unsigned i = 0; i < count; i++) {
                char *comma = strchr(copy, ',');
                if (comma)
                        *comma = '\0';
                if (*copy == '\0') {
                        free(array);
                        return stripe_reject(err, -EINVAL,
                                             "directory list '%s': entry %u is empty (expected "
                                             "DIR1,DIR2,...)",
                                             list, i + 1);
                }
                array[i] = copy;
                copy += strlen(copy) + 1;
        }
        array[count] = NULL;
        *dirs = array;
        *ndirs = count;
        return 0;
}

static int discard(const void *buf, size_t len, uint64_t offset, void *ctx, struct ds_error *err)
{
        (void)buf, (void)len, (void)offset, (void)ctx, (void)err;
        return 0;
}

int ds_stripe_verify(const char *const *dirs, unsigned ndirs, const char *name, bool data,
                     struct ds_stripe_info *info, struct ds_error *err)
{
        return ds_stripe_verify_with(dirs, ndirs, name, NULL, data, info, err);
}

int ds_stripe_verify_with(const char *const *dirs, unsigned ndirs, const char *name,
                          const struct ds_stripe_options *options, bool data,
                          struct ds_stripe_info *info, struct ds_error *err)
{
        struct ds_stripe *stripe;
        struct ds_pool *pool = NULL;
        int rc = ds_stripe_open(&stripe, dirs, ndirs, name, options, err);

        if (rc != 0)
                return rc;
        if (info)
                ds_stripe_stat(stripe, info);
        if (data) {
                rc = ds_stripe_stream_pool(stripe, &pool, err);
                if (rc == 0)
                        rc = ds_stripe_read_stream(stripe, pool, discard, NULL, err);
                if (rc == 0)
                        rc = ds_stripe_check_data(stripe, err);
        }
        if (pool)
                ds_pool_destroy(pool);
        int crc = ds_stripe_close(stripe, rc ? NULL : err);
        return rc ? rc : crc;
}

/* Removes the members of name; the caller holds the directories' lock. */
static int unlink_members(const char *const *dirs, unsigned ndirs, const char *name,
                          struct ds_error *err)
{
        int removed = 0, swept, rc;

        /* Committed members still under temporary names first, so none outlives member 0;
         * a put cut short leaves members no one holds, which go with the name. */
        if ((swept = stripe_sweep(dirs, ndirs, name, NULL, NULL, err)) < 0)
                return swept;
        for (unsigned i = 0; i < ndirs; i++) {
                char *path = stripe_join(dirs[i], "", name);
                if (!path)
                        return ds_fail(err, -ENOMEM, "member path");
                if (stripe_peek(path, NULL) >= 0) {
                        if (unlink(path) != 0) {
                                rc = ds_fail(err, -errno, "remove %s", path);
                                free(path);
                                return rc;
                        }
                        removed++;
                        /* Member 0's removal is the commit: durable before any other. */
                        if (i == 0 && (rc = stripe_sync_dir_of(path, err)) != 0) {
                                free(path);
                                return rc;
                        }
                }
                free(path);
        }
        if (removed == 0 && swept == 0)
                return stripe_reject(err, -ENOENT, "no striped file '%s' in these directories",
                                     name);
        return removed + swept;
}

int ds_stripe_unlink(const char *const *dirs, unsigned ndirs, const char *name,
                     struct ds_error *err)
{
        int lock, rc;

        if ((rc = ds_stripe_name_check(name, err)) != 0 ||
            (rc = ds_stripe_check_dirs(dirs, ndirs, err)) != 0 ||
            (rc = lock = stripe_lock(dirs[0], LOCK_EX, err)) < 0)
                return rc;
        rc = unlink_members(dirs, ndirs, name, err);
        stripe_unlock(lock);
        return rc;
}

struct list_adapter {
        ds_stripe_list_fn fn;
        void *ctx;
};

static int list_one(const struct ds_stripe_entry *entry, void *ctx)
{
        const struct list_adapter *adapter = ctx;

        return adapter->fn(entry->name, entry->info, entry->problem, adapter->ctx);
}

int ds_stripe_list(const char *const *dirs, unsigned ndirs, ds_stripe_list_fn fn, void *ctx,
                   struct ds_error *err)
{
        struct list_adapter adapter = {fn, ctx};

        return ds_stripe_scan(dirs, ndirs, 0, list_one, &adapter, err);
}
