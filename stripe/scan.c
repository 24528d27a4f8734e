/* What the directories hold: every name with any member, its state, and the leftovers of
 * puts cut short (swept: committed members put in place, uncommitted ones removed). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "stripe_int.h"

#define HEX_LEN (2 * DS_STRIPE_SET_ID_SIZE)

int stripe_peek(const char *path, struct ds_stripe_header *header)
{
        uint8_t block[DS_STRIPE_HEADER_SIZE];
        struct ds_stripe_header ignored;
        int fd = stripe_open_entry(path, O_RDONLY);
        ssize_t n;

        if (fd < 0)
                return -1;
        n = pread(fd, block, sizeof(block), 0);
        close(fd);
        if (n < 8 || memcmp(block, DS_STRIPE_MAGIC, 8) != 0)
                return -1;
        return ds_stripe_header_decode(block, (size_t)n, header ? header : &ignored, NULL) == 0;
}

/* Splits ".dstmp.<set id hex>.NAME" into the set id and NAME; false for any other name. */
static bool parse_tmp(const char *entry, uint8_t set_id[DS_STRIPE_SET_ID_SIZE], const char **name)
{
        size_t prefix = strlen(DS_STRIPE_TMP_PREFIX);

        if (strncmp(entry, DS_STRIPE_TMP_PREFIX, prefix) != 0 ||
            strlen(entry) < prefix + HEX_LEN + 2 || entry[prefix + HEX_LEN] != '.')
                return false;
        for (unsigned i = 0; i < DS_STRIPE_SET_ID_SIZE; i++) {
                unsigned byte;
                if (sscanf(entry + prefix + 2 * i, "%2x", &byte) != 1)
                        return false;
                set_id[i] = (uint8_t)byte;
        }
        *name = entry + prefix + HEX_LEN + 1;
        return true;
}

/* True when a running put holds the temporary member at path (it keeps it locked). */
static bool held(const char *path, bool take)
{
        int fd = stripe_open_entry(path, O_RDONLY | O_NOFOLLOW);
        bool busy;

        if (fd < 0)
                return true; /* gone, or not ours to touch */
        busy = flock(fd, (take ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0;
        if (!busy && take)
                busy = unlink(path) != 0;
        close(fd);
        return busy;
}

/* Does member 0 of name (in dir0) belong to set_id, i.e. is that set committed? */
static bool committed(const char *dir0, const char *name, const uint8_t *set_id)
{
        struct ds_stripe_header h;
        char *path = stripe_join(dir0, "", name);
        bool yes = path && stripe_peek(path, &h) == 1 &&
                   memcmp(h.set_id, set_id, DS_STRIPE_SET_ID_SIZE) == 0;

        free(path);
        return yes;
}

static int sweep_entry(const char *const *dirs, unsigned i, const char *entry, const char *only,
                       ds_stripe_sweep_fn report, void *ctx, struct ds_error *err)
{
        uint8_t set_id[DS_STRIPE_SET_ID_SIZE];
        const char *name;
        char *tmp, *final;
        int changed = 0;

        if (!parse_tmp(entry, set_id, &name) || (only && strcmp(name, only) != 0))
                return 0;
        tmp = stripe_join(dirs[i], "", entry);
        final = stripe_join(dirs[i], "", name);
        if (!tmp || !final) {
                changed = ds_fail(err, -ENOMEM, "member path");
        } else if (i > 0 && committed(dirs[0], name, set_id)) {
                if (rename(tmp, final) != 0 && errno != ENOENT)
                        changed = ds_fail(err, -errno, "rename %s to %s", tmp, final);
                else
                        changed = 1;
                if (changed == 1 && report)
                        report(final, true, ctx);
        } else if (!held(tmp, true)) {
                changed = 1;
                if (report)
                        report(tmp, false, ctx);
        }
        free(tmp);
        free(final);
        return changed;
}

int stripe_sweep(const char *const *dirs, unsigned ndirs, const char *name,
                 ds_stripe_sweep_fn report, void *ctx, struct ds_error *err)
{
        int total = 0;

        for (unsigned i = 0; i < ndirs; i++) {
                DIR *dir = opendir(dirs[i]);
                struct dirent *entry;
                int rc = 0;

                if (!dir)
                        return ds_fail(err, -errno, "open directory %s", dirs[i]);
                while (rc >= 0 && (errno = 0, entry = readdir(dir)) != NULL)
                        if ((rc = sweep_entry(dirs, i, entry->d_name, name, report, ctx, err)) > 0)
                                total += rc;
                if (rc >= 0 && errno != 0)
                        rc = ds_fail(err, -errno, "read directory %s", dirs[i]);
                closedir(dir);
                if (rc < 0)
                        return rc;
        }
        return total;
}

int ds_stripe_fsck(const char *const *dirs, unsigned ndirs, ds_stripe_sweep_fn report, void *ctx,
                   struct ds_error *err)
{
        int lock, rc = ds_stripe_check_dirs(dirs, ndirs, err);

        if (rc != 0 || (rc = lock = stripe_lock(dirs[0], LOCK_EX, err)) < 0)
                return rc;
        rc = stripe_sweep(dirs, ndirs, NULL, report, ctx, err);
        stripe_unlock(lock);
        return rc;
}

/* One name seen in the directories: as a member under its final name, or only as a
 * temporary member (a put not committed), and where that temporary member is. */
struct seen {
        char *name;
        bool member;
        char *tmp_path; /* one temporary member of it, when no final member was seen */
};

struct seen_list {
        struct seen *items;
        size_t count, cap;
};

static int seen_add(struct seen_list *list, const char *name, bool member, const char *dir,
                    const char *entry)
{
        struct seen *s;

        if (list->count == list->cap) {
                size_t cap = list->cap ? 2 * list->cap : 64;
                struct seen *grown = realloc(list->items, cap * sizeof(*grown));
                if (!grown)
                        return -ENOMEM;
                list->items = grown;
                list->cap = cap;
        }
        s = &list->items[list->count];
        *s = (struct seen){.name = strdup(name), .member = member};
        if (!member)
                s->tmp_path = stripe_join(dir, "", entry);
        if (!s->name || (!member && !s->tmp_path)) {
                free(s->name);
                free(s->tmp_path);
                return -ENOMEM;
        }
        list->count++;
        return 0;
}

static void seen_free(struct seen_list *list)
{
        for (size_t i = 0; i < list->count; i++) {
                free(list->items[i].name);
                free(list->items[i].tmp_path);
        }
        free(list->items);
}

static int seen_order(const void *a, const void *b)
{
        const struct seen *x = a, *y = b;
        int by_name = strcmp(x->name, y->name);

        return by_name ? by_name : (int)y->member - (int)x->member; /* members first */
}

static int collect(const char *dirname, unsigned flags, struct seen_list *list,
                   struct ds_error *err)
{
        DIR *dir = opendir(dirname);
        struct dirent *entry;
        int rc = 0;

        if (!dir)
                return ds_fail(err, -errno, "open directory %s", dirname);
        while (rc == 0 && (errno = 0, entry = readdir(dir)) != NULL) {
                uint8_t set_id[DS_STRIPE_SET_ID_SIZE];
                const char *name = entry->d_name;
                char *path;

                if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
                        continue;
                if (parse_tmp(entry->d_name, set_id, &name)) {
                        if (name[0] != '.' || (flags & DS_STRIPE_SCAN_HIDDEN))
                                rc = seen_add(list, name, false, dirname, entry->d_name);
                        continue;
                }
                if (name[0] == '.' && !(flags & DS_STRIPE_SCAN_HIDDEN))
                        continue;
                path = stripe_join(dirname, "", name);
                if (!path)
                        rc = -ENOMEM;
                else if (stripe_peek(path, NULL) >= 0)
                        rc = seen_add(list, name, true, dirname, name);
                free(path);
        }
        if (rc == 0 && errno != 0)
                rc = ds_fail(err, -errno, "read directory %s", dirname);
        else if (rc == -ENOMEM)
                ds_fail(err, rc, "list %s", dirname);
        closedir(dir);
        return rc;
}

static int report_name(const char *const *dirs, unsigned ndirs, const struct seen *s,
                       ds_stripe_scan_fn fn, void *ctx)
{
        struct ds_stripe_entry entry = {.name = s->name};
        struct ds_error problem = {{0}};
        struct ds_stripe_info info;
        struct ds_stripe *stripe;

        if (!s->member) {
                entry.state = DS_STRIPE_PARTIAL;
                entry.leftover = !held(s->tmp_path, false);
                entry.problem = entry.leftover ? "uncommitted: left by a put cut short (stripe "
                                                 "fsck removes it)"
                                               : "uncommitted: a put is writing it";
                return fn(&entry, ctx);
        }
        if (stripe_probe(&stripe, dirs, ndirs, s->name, NULL, &problem) != 0) {
                entry.state = DS_STRIPE_DAMAGED;
                entry.problem = problem.text;
                return fn(&entry, ctx);
        }
        ds_stripe_stat(stripe, &info);
        stripe_free(stripe);
        entry.state = DS_STRIPE_OK;
        entry.info = &info;
        return fn(&entry, ctx);
}

int ds_stripe_scan(const char *const *dirs, unsigned ndirs, unsigned flags, ds_stripe_scan_fn fn,
                   void *ctx, struct ds_error *err)
{
        struct seen_list list = {0};
        int rc = ds_stripe_check_dirs(dirs, ndirs, err);

        for (unsigned i = 0; rc == 0 && i < ndirs; i++)
                rc = collect(dirs[i], flags, &list, err);
        if (rc == 0 && list.count > 0) /* qsort of NULL is undefined, even for none */
                qsort(list.items, list.count, sizeof(*list.items), seen_order);
        for (size_t i = 0; rc == 0 && i < list.count; i++) {
                if (i > 0 && strcmp(list.items[i].name, list.items[i - 1].name) == 0)
                        continue; /* the first of a name says whether any member is final */
                rc = report_name(dirs, ndirs, &list.items[i], fn, ctx);
        }
        seen_free(&list);
        return rc;
}
