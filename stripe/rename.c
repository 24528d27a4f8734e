/* Renaming a striped file with the same commit point as a put: member 0's rename.
 *
 * Members 1..W-1 are first hard-linked under the new name's temporary names (where readers
 * of the new name look while a commit is cut short), locked like a put's, and synced; then
 * member 0 is renamed (the commit), then the links take the final names and the old names
 * go. A crash before the commit leaves the old file whole and unlocked links a sweep
 * removes; after it, the new file is whole and the old name has members without member 0,
 * which ls shows as damaged and rm removes. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
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

static int plan(struct rename_member *members, const char *const *dirs, unsigned ndirs,
                const char *from, const char *to, const uint8_t *set_id, struct ds_error *err)
{
        for (unsigned i = 0; i < ndirs; i++) {
                struct rename_member *m = &members[i];
                m->fd = -1;
                m->from = stripe_join(dirs[i], "", from);
                m->to = stripe_join(dirs[i], "", to);
                m->link = stripe_tmp_path(dirs[i], set_id, to);
                if (!m->from || !m->to || !m->link)
                        return ds_fail(err, -ENOMEM, "member path");
        }
        return 0;
}

int ds_stripe_rename(const char *const *dirs, unsigned ndirs, const char *from, const char *to,
                     bool replace, struct ds_error *err)
{
        struct ds_stripe_info info;
        struct rename_member *members;
        int lock, rc;

        if ((rc = ds_stripe_name_check(to, err)) != 0)
                return rc;
        if (strcmp(from, to) == 0)
                return stripe_reject(err, -EINVAL, "rename %s to itself", from);
        /* Only a whole file is renamed: every member present and consistent. */
        if ((rc = ds_stripe_verify(dirs, ndirs, from, false, &info, err)) != 0)
                return rc;
        members = calloc(ndirs, sizeof(*members));
        if (!members)
                return ds_fail(err, -ENOMEM, "rename %s", from);
        /* One act for readers and for commits of either name, as a put's commit is. */
        if ((lock = stripe_lock(dirs[0], LOCK_EX, err)) < 0) {
                free(members);
                return lock;
        }
        rc = plan(members, dirs, ndirs, from, to, info.set_id, err);
        if (rc == 0 && (rc = stripe_sweep(dirs, ndirs, to, NULL, NULL, err)) >= 0)
                rc = stripe_sweep(dirs, ndirs, from, NULL, NULL, err);
        rc = rc < 0 ? rc : 0;
        for (unsigned i = 0; rc == 0 && !replace && i < ndirs; i++)
                if (access(members[i].to, F_OK) == 0)
                        rc = stripe_reject(err, -EEXIST, "%s exists (remove it first, or replace)",
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
                rename_free(members, ndirs);
                stripe_unlock(lock);
                return rc;
        }
        rc = stripe_sync_dir_of(members[0].to, err);
        for (unsigned i = 1; rc == 0 && i < ndirs; i++) {
                if (rename(members[i].link, members[i].to) != 0)
                        rc = ds_fail(err, -errno, "member %u: rename %s to %s", i, members[i].link,
                                     members[i].to);
                else if (unlink(members[i].from) != 0)
                        rc = ds_fail(err, -errno, "member %u: remove %s", i, members[i].from);
        }
        rename_free(members, ndirs);
        stripe_unlock(lock);
        return rc;
}
