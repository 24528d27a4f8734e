/* Renaming a striped file with the same commit point as a put: member 0's rename.
 *
 * Members 1..W-1 are first hard-linked under the new name's temporary names (where readers
 * of the new name look while a commit is cut short), locked like a put's, and synced; then
 * member 0 is renamed (the commit), then the links take the final names and the old names
 * go. A crash before the commit leaves the old file whole and unlocked links a sweep
 * removes; after it, the new file is whole and the old name has members without member 0,
 * which ls shows as damaged and rm removes.
 *
 * The old and new names may sit in different directories of the same disks (member i's
 * directories on one filesystem, as hard links need): the commit point is the same. Before
 * anything, a put of either name cut short after its own commit point is finished (its
 * members still under temporary names are the file's), so a rename never leaves those
 * behind for a sweep to take as leftovers. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stripe_int.h"

struct rename_member {
        char *from, *to, *link;
        int fd; /* the member, locked while its link is a temporary name */
        bool linked;
};

static void rename_free(struct rename_member *members, unsigned ndirs)
{
        for (unsigned i = 0; i < ndirs; i++) {
                if (members[i].fd >= 0)
                        close(members[i].fd);
                free(members[i].from);
                free(members[i].to);
                free(members[i].link);
        }
        free(members);
}

/* Links member i under the new name's temporary name, locked first so that no sweep takes
 * the link for a leftover. */
static int link_member(struct rename_member *m, unsigned i, struct ds_error *err)
{
        m->fd = stripe_open_entry(m->from, O_RDONLY);
        if (m->fd < 0)
                return ds_fail(err, m->fd, "member %u: %s", i, m->from);
        if (flock(m->fd, LOCK_EX | LOCK_NB) != 0)
                return ds_fail(err, -errno, "member %u: lock %s", i, m->from);
        if (link(m->from, m->link) != 0)
                return ds_fail(err, -errno, "member %u: link %s to %s", i, m->from, m->link);
        m->linked = true;
        return stripe_sync_dir_of(m->link, err);
}

static int plan(struct rename_member *members, const char *const *from_dirs, const char *from,
                const char *const *to_dirs, const char *to, unsigned ndirs, const uint8_t *set_id,
                struct ds_error *err)
{
        for (unsigned i = 0; i < ndirs; i++) {
                struct rename_member *m = &members[i];
                m->fd = -1;
                m->from = stripe_join(from_dirs[i], "", from);
                m->to = stripe_join(to_dirs[i], "", to);
                m->link = stripe_tmp_path(to_dirs[i], set_id, to);
                if (!m->from || !m->to || !m->link)
                        return ds_fail(err, -ENOMEM, "member path");
        }
        return 0;
}

/* One name in one directory, however spelt: "renamed" onto itself, the last step (the
 * old name's members go) would remove the file. */
static bool same_entry(const char *from_dir, const char *from, const char *to_dir, const char *to)
{
        struct stat a, b;

        if (strcmp(from, to) != 0)
                return false;
        if (stat(from_dir, &a) != 0 || stat(to_dir, &b) != 0)
                return strcmp(from_dir, to_dir) == 0;
        return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* Checks from (after the sweeps) and reads its set id, under the caller's lock. */
static int whole_file(const char *const *dirs, unsigned ndirs, const char *name,
                      struct ds_stripe_info *info, struct ds_error *err)
{
        struct ds_stripe_options opts = {.flags = DS_STRIPE_NO_DIRECT};
        struct ds_stripe *stripe;
        int rc = stripe_probe_held(&stripe, dirs, ndirs, name, &opts, err);

        if (rc != 0)
                return rc;
        ds_stripe_stat(stripe, info);
        return ds_stripe_close(stripe, err);
}

/* From the links to the end: the new name takes every member, the old one lets go. */
static int finish(struct rename_member *members, unsigned ndirs, bool two_dirs,
                  struct ds_error *err)
{
        int rc = stripe_sync_dir_of(members[0].to, err);

        if (rc == 0 && two_dirs)
                rc = stripe_sync_dir_of(members[0].from, err);
        for (unsigned i = 1; rc == 0 && i < ndirs; i++) {
                if (rename(members[i].link, members[i].to) != 0)
                        rc = ds_fail(err, -errno, "member %u: rename %s to %s", i, members[i].link,
                                     members[i].to);
                else if (unlink(members[i].from) != 0)
                        rc = ds_fail(err, -errno, "member %u: remove %s", i, members[i].from);
        }
        return rc;
}

int ds_stripe_rename_held(const char *const *from_dirs, const char *from,
                          const char *const *to_dirs, const char *to, unsigned ndirs, bool replace,
                          struct ds_error *err)
{
        struct ds_stripe_info info;
        struct rename_member *members;
        int rc;

        if ((rc = ds_stripe_name_check(to, err)) != 0 ||
            (rc = ds_stripe_name_check(from, err)) != 0 ||
            (rc = ds_stripe_check_dirs(to_dirs, ndirs, err)) != 0)
                return rc;
        if (same_entry(from_dirs[0], from, to_dirs[0], to))
                return stripe_reject(err, -EINVAL, "rename %s to itself", from);
        if ((rc = stripe_sweep(to_dirs, ndirs, to, NULL, NULL, err)) < 0 ||
            (rc = stripe_sweep(from_dirs, ndirs, from, NULL, NULL, err)) < 0)
                return rc;
        /* Only a whole file is renamed: every member present and consistent. */
        if ((rc = whole_file(from_dirs, ndirs, from, &info, err)) != 0)
                return rc;
        members = calloc(ndirs, sizeof(*members));
        if (!members)
                return ds_fail(err, -ENOMEM, "rename %s", from);
        rc = plan(members, from_dirs, from, to_dirs, to, ndirs, info.set_id, err);
        for (unsigned i = 0; rc == 0 && !replace && i < ndirs; i++)
                if (access(members[i].to, F_OK) == 0)
                        rc = stripe_reject(err, -EEXIST, "'%s' is taken (%s exists)", to,
                                           members[i].to);
        for (unsigned i = 1; rc == 0 && i < ndirs; i++)
                rc = link_member(&members[i], i, err);
        if (rc == 0 && renameat2(AT_FDCWD, members[0].from, AT_FDCWD, members[0].to,
                                 replace ? 0 : RENAME_NOREPLACE) != 0)
                rc = ds_fail(err, -errno, "member 0: rename %s to %s", members[0].from,
                             members[0].to);
        if (rc != 0) {
                /* Not committed: the links made so far go, the file keeps its name. */
                for (unsigned i = 1; i < ndirs; i++)
                        if (members[i].linked)
                                unlink(members[i].link);
        } else {
                rc = finish(members, ndirs, strcmp(from_dirs[0], to_dirs[0]) != 0, err);
        }
        rename_free(members, ndirs);
        return rc;
}

int ds_stripe_rename(const char *const *dirs, unsigned ndirs, const char *from, const char *to,
                     bool replace, struct ds_error *err)
{
        /* One act for readers and for commits of either name, as a put's commit is. */
        int rc, lock = stripe_lock(dirs[0], LOCK_EX, err);

        if (lock < 0)
                return lock;
        rc = ds_stripe_rename_held(dirs, from, dirs, to, ndirs, replace, err);
        stripe_unlock(lock);
        return rc;
}
