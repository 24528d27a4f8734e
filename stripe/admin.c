/* Whole-file operations over the directories: verify, unlink, list; and the checks of the
 * names and directory lists callers type. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dragstrip/pool.h>

#include "stripe_int.h"

int ds_stripe_name_check(const char *name, struct ds_error *err)
{
        size_t len = strlen(name);

        if (len == 0 || len > DS_STRIPE_NAME_MAX)
                return stripe_reject(err, -EINVAL, "name '%s': expected 1 to %u bytes", name,
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
        struct ds_stripe *stripe;
        struct ds_pool *pool = NULL;
        int rc = ds_stripe_open(&stripe, dirs, ndirs, name, NULL, err);

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

/* True when path starts with the stripe magic, whatever the rest of its header says. */
static bool has_magic(const char *path)
{
        char magic[8];
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        bool yes;

        if (fd < 0)
                return false;
        yes = pread(fd, magic, sizeof(magic), 0) == (ssize_t)sizeof(magic) &&
              memcmp(magic, DS_STRIPE_MAGIC, sizeof(magic)) == 0;
        close(fd);
        return yes;
}

int ds_stripe_unlink(const char *const *dirs, unsigned ndirs, const char *name,
                     struct ds_error *err)
{
        int removed = 0, rc;

        if ((rc = ds_stripe_name_check(name, err)) != 0)
                return rc;
        for (unsigned i = 0; i < ndirs; i++) {
                char *path;
                if (asprintf(&path, "%s/%s", dirs[i], name) < 0)
                        return ds_fail(err, -ENOMEM, "member path");
                if (has_magic(path)) {
                        if (unlink(path) != 0) {
                                rc = ds_fail(err, -errno, "remove %s", path);
                                free(path);
                                return rc;
                        }
                        removed++;
                }
                free(path);
        }
        if (removed == 0)
                return stripe_reject(err, -ENOENT, "no striped file '%s' in these directories",
                                     name);
        return removed;
}

static int list_entry(const char *const *dirs, unsigned ndirs, const char *name,
                      ds_stripe_list_fn fn, void *ctx)
{
        struct ds_stripe *stripe;
        struct ds_stripe_info info;
        struct ds_error problem = {{0}};
        int rc = stripe_probe(&stripe, dirs, ndirs, name, NULL, &problem);

        if (rc != 0)
                return fn(name, NULL, problem.text, ctx);
        ds_stripe_stat(stripe, &info);
        stripe_free(stripe);
        return fn(name, &info, NULL, ctx);
}

int ds_stripe_list(const char *const *dirs, unsigned ndirs, ds_stripe_list_fn fn, void *ctx,
                   struct ds_error *err)
{
        DIR *dir;
        struct dirent *entry;
        int rc = 0;

        if (ndirs < 1)
                return stripe_reject(err, -EINVAL, "no directories");
        dir = opendir(dirs[0]);
        if (!dir)
                return ds_fail(err, -errno, "open directory %s", dirs[0]);
        while (rc == 0 && (errno = 0, entry = readdir(dir)) != NULL) {
                char *path;
                bool member;

                if (entry->d_name[0] == '.')
                        continue; /* ".", "..", and uncommitted members */
                if (asprintf(&path, "%s/%s", dirs[0], entry->d_name) < 0) {
                        rc = ds_fail(err, -ENOMEM, "member path");
                        break;
                }
                member = has_magic(path);
                free(path);
                if (member)
                        rc = list_entry(dirs, ndirs, entry->d_name, fn, ctx);
        }
        if (rc == 0 && errno != 0)
                rc = ds_fail(err, -errno, "read directory %s", dirs[0]);
        closedir(dir);
        return rc;
}
