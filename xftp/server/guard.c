/* The session table, and dropping root. */
#include "guard.h"
#include "throttle.h"

#include <dragstrip/error.h>
#include <dragstrip/serve.h>

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int guard_sessions_init(struct guard_sessions *table, unsigned max, unsigned max_per_host,
                        struct ds_shared_budget *budget)
{
        *table = (struct guard_sessions){.max = max,
                                         .max_per_host = max_per_host,
                                         .pids = calloc(max, sizeof(*table->pids)),
                                         .hosts = calloc(max, sizeof(*table->hosts)),
                                         .slots = calloc(max, sizeof(*table->slots)),
                                         .slot_taken = calloc(max, sizeof(*table->slot_taken)),
                                         .budget = budget};
        return table->pids && table->hosts && table->slots && table->slot_taken ? 0 : -ENOMEM;
}

const char *guard_sessions_refuse(const struct guard_sessions *table, const struct xftp_addr *peer)
{
        struct throttle_key key = throttle_key_of(peer);
        unsigned same = 0;

        if (table->count >= table->max)
                return "421 Too many sessions; try again later.\r\n";
        for (unsigned i = 0; i < table->count; i++) {
                struct throttle_key other = throttle_key_of(&table->hosts[i]);
                same += memcmp(&other, &key, sizeof(key)) == 0 ? 1 : 0;
        }
        if (same >= table->max_per_host)
                return "421 Too many sessions from your address.\r\n";
        return NULL;
}

unsigned guard_sessions_free_slot(const struct guard_sessions *table)
{
        unsigned slot = 0;

        while (slot < table->max - 1 && table->slot_taken[slot])
                slot++;
        return slot;
}

void guard_sessions_add(struct guard_sessions *table, pid_t pid, const struct xftp_addr *peer,
                        unsigned slot)
{
        table->pids[table->count] = pid;
        table->hosts[table->count] = *peer;
        table->slots[table->count] = slot;
        table->slot_taken[slot] = true;
        table->count++;
}

/* A reaped session's share of the budget comes back here: one killed mid-transfer never
 * gave it back itself. */
static void forget(struct guard_sessions *table, pid_t pid)
{
        for (unsigned i = 0; i < table->count; i++)
                if (table->pids[i] == pid) {
                        if (table->budget)
                                ds_shared_budget_release(table->budget, table->slots[i]);
                        table->slot_taken[table->slots[i]] = false;
                        table->count--;
                        table->pids[i] = table->pids[table->count];
                        table->hosts[i] = table->hosts[table->count];
                        table->slots[i] = table->slots[table->count];
                        return;
                }
}

void guard_sessions_reap(struct guard_sessions *table)
{
        pid_t pid;

        while ((pid = waitpid(-1, NULL, WNOHANG)) > 0)
                forget(table, pid);
}

void guard_sessions_end(struct guard_sessions *table, int grace_ms)
{
        for (unsigned i = 0; i < table->count; i++)
                kill(table->pids[i], SIGTERM);
        /* Not ds_sleep_until: the stop that brought the server here would cut it short. */
        for (int waited = 0; table->count > 0 && waited < grace_ms; waited += 20) {
                guard_sessions_reap(table);
                if (table->count > 0)
                        nanosleep(&(struct timespec){.tv_nsec = 20000000}, NULL);
        }
        for (unsigned i = 0; i < table->count; i++)
                kill(table->pids[i], SIGKILL);
        while (table->count > 0) {
                pid_t pid = waitpid(-1, NULL, 0);
                if (pid < 0)
                        break;
                forget(table, pid);
        }
        free(table->pids);
        free(table->hosts);
        free(table->slots);
        free(table->slot_taken);
}

int guard_drop_privileges(const char *run_as, const char *root_dir, bool allow_root, int own_fd,
                          struct ds_error *err)
{
        struct stat sb;
        struct passwd *pw = NULL;

        if (geteuid() != 0) {
                if (run_as && (!(pw = getpwnam(run_as)) || pw->pw_uid != geteuid()))
                        return ds_fail(err, 0, "--run-as %s: only root can change user", run_as),
                               -EPERM;
                return 0;
        }
        if (run_as) {
                pw = getpwnam(run_as);
                if (!pw)
                        return ds_fail(err, 0, "--run-as %s: no such user", run_as), -ENOENT;
        } else {
                if (stat(root_dir, &sb) < 0)
                        return ds_fail(err, -errno, "--root %s", root_dir);
                pw = getpwuid(sb.st_uid);
                if (!pw)
                        return ds_fail(err, 0, "the owner (uid %u) of %s has no name: use --run-as",
                                       (unsigned)sb.st_uid, root_dir),
                               -ENOENT;
        }
        if (pw->pw_uid == 0 && !allow_root)
                return ds_fail(err, 0,
                               "refusing to serve as root (the store's owner): name a user "
                               "with --run-as, or give --allow-root"),
                       -EPERM;
        if (pw->pw_uid == 0)
                return 0;
        uid_t uid = pw->pw_uid;
        gid_t gid = pw->pw_gid;
        if (own_fd >= 0 && fchown(own_fd, uid, (gid_t)-1) < 0)
                return ds_fail(err, -errno, "giving the transfer log to %s", pw->pw_name);
        if (initgroups(pw->pw_name, gid) < 0 || setgid(gid) < 0 || setuid(uid) < 0)
                return ds_fail(err, -errno, "becoming %s", pw->pw_name);
        if (setuid(0) == 0) /* must fail now */
                return ds_fail(err, 0, "could not give up root"), -EPERM;
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return ds_fail(err, -errno, "no_new_privs");
        return 0;
}
