/* stripe ls, stat, verify, rm: looking at striped files and removing them. */
#include <err.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <dragstrip/error.h>
#include <dragstrip/json.h>
#include <dragstrip/size.h>

#include "stripe_cmd.h"

static const char *set_id_text(char out[2 * DS_STRIPE_SET_ID_SIZE + 1], const uint8_t *id)
{
        for (unsigned i = 0; i < DS_STRIPE_SET_ID_SIZE; i++)
                snprintf(out + 2 * i, 3, "%02x", id[i]);
        return out;
}

static void json_info(struct ds_json *json, const struct ds_stripe_info *info)
{
        char id[2 * DS_STRIPE_SET_ID_SIZE + 1];

        ds_json_u64(json, "size", info->size);
        ds_json_u64(json, "width", info->layout.width);
        ds_json_u64(json, "unit", info->layout.unit);
        ds_json_str(json, "set_id", set_id_text(id, info->set_id));
        ds_json_bool(json, "data_checksums", info->data_crc);
}

struct ls_state {
        const struct stripe_cmd *cmd;
        unsigned damaged;
};

static const char *const state_names[] = {
    [DS_STRIPE_OK] = "ok", [DS_STRIPE_DAMAGED] = "damaged", [DS_STRIPE_PARTIAL] = "partial"};

static int ls_one(const struct ds_stripe_entry *entry, void *ctx)
{
        struct ls_state *state = ctx;
        const struct ds_stripe_info *info = entry->info;
        char unit[32];

        state->damaged += entry->state == DS_STRIPE_DAMAGED;
        if (state->cmd->json) {
                struct ds_json json;
                ds_json_begin(&json, stdout);
                ds_json_str(&json, "name", entry->name);
                ds_json_str(&json, "state", state_names[entry->state]);
                if (info)
                        json_info(&json, info);
                else
                        ds_json_str(&json, "problem", entry->problem);
                ds_json_end(&json);
        } else if (info) {
                printf("%-30s %15llu  width %u unit %s\n", entry->name,
                       (unsigned long long)info->size, info->layout.width,
                       ds_size_format(unit, sizeof(unit), info->layout.unit));
        } else {
                printf("%-30s %s: %s\n", entry->name,
                       entry->state == DS_STRIPE_DAMAGED ? "DAMAGED" : "partial", entry->problem);
        }
        return 0;
}

int cmd_ls(const struct stripe_cmd *cmd)
{
        struct ls_state state = {.cmd = cmd};
        struct ds_error err;
        unsigned ndirs;
        char **dirs = cmd_dirs(cmd, cmd->args[0], &ndirs);

        if (ds_stripe_scan((const char *const *)dirs, ndirs, cmd->all ? DS_STRIPE_SCAN_HIDDEN : 0,
                           ls_one, &state, &err) != 0)
                errx(1, "ls: %s", err.text);
        free(dirs);
        return state.damaged ? 1 : 0;
}

/* After a sweep, what still needs a person: damaged files (stripe rm removes them). */
static int fsck_damaged(const struct ds_stripe_entry *entry, void *ctx)
{
        return entry->state == DS_STRIPE_DAMAGED ? ls_one(entry, ctx) : 0;
}

static void fsck_one(const char *path, bool committed, void *ctx)
{
        const struct stripe_cmd *cmd = ctx;

        if (cmd->json) {
                struct ds_json json;
                ds_json_begin(&json, stdout);
                ds_json_str(&json, "path", path);
                ds_json_str(&json, "action", committed ? "put in place" : "removed");
                ds_json_end(&json);
        } else {
                printf("%s %s\n",
                       committed ? "put in place (committed):" : "removed (uncommitted):", path);
        }
}

int cmd_fsck(const struct stripe_cmd *cmd)
{
        struct ls_state state = {.cmd = cmd};
        struct ds_error err;
        unsigned ndirs;
        char **dirs = cmd_dirs(cmd, cmd->args[0], &ndirs);

        if (ds_stripe_fsck((const char *const *)dirs, ndirs, fsck_one, (void *)cmd, &err) < 0)
                errx(1, "fsck: %s", err.text);
        if (ds_stripe_scan((const char *const *)dirs, ndirs, DS_STRIPE_SCAN_HIDDEN, fsck_damaged,
                           &state, &err) != 0)
                errx(1, "fsck: %s", err.text);
        free(dirs);
        return state.damaged ? 1 : 0;
}

int cmd_stat(const struct stripe_cmd *cmd)
{
        const char *name = cmd->args[1];
        struct ds_stripe *stripe;
        struct ds_stripe_info info;
        struct ds_error err;
        char id[2 * DS_STRIPE_SET_ID_SIZE + 1], unit[32];
        unsigned ndirs;
        char **dirs = cmd_dirs(cmd, cmd->args[0], &ndirs);

        cmd_name(cmd, name);
        if (ds_stripe_open(&stripe, (const char *const *)dirs, ndirs, name, NULL, &err) != 0)
                errx(1, "stat: %s", err.text);
        ds_stripe_stat(stripe, &info);
        if (cmd->json) {
                struct ds_json json;
                ds_json_begin(&json, stdout);
                ds_json_str(&json, "name", name);
                json_info(&json, &info);
                ds_json_u64(&json, "direct_members", info.direct);
                ds_json_end(&json);
        } else {
                printf("name      %s\nsize      %llu\nwidth     %u\nunit      %s\n"
                       "set id    %s\nchecksums %s\n",
                       name, (unsigned long long)info.size, info.layout.width,
                       ds_size_format(unit, sizeof(unit), info.layout.unit),
                       set_id_text(id, info.set_id), info.data_crc ? "yes" : "no");
                for (unsigned i = 0; i < ndirs; i++)
                        printf(
                            "member %-2u %s (%llu data bytes)\n", i,
                            ds_stripe_member_path(stripe, i),
                            (unsigned long long)ds_stripe_member_bytes(&info.layout, i, info.size));
        }
        if (ds_stripe_close(stripe, &err) != 0)
                errx(1, "stat: %s", err.text);
        free(dirs);
        return 0;
}

int cmd_verify(const struct stripe_cmd *cmd)
{
        const char *name = cmd->args[1];
        struct ds_stripe_options options = cmd_options(cmd);
        struct ds_stripe_info info;
        struct ds_error err;
        unsigned ndirs;
        char **dirs = cmd_dirs(cmd, cmd->args[0], &ndirs);
        int rc;

        cmd_name(cmd, name);
        rc = ds_stripe_verify_with((const char *const *)dirs, ndirs, name, &options, cmd->data,
                                   &info, &err);
        bool interrupted = rc == -EINTR && cmd_interrupted;

        if (cmd->json) {
                struct ds_json json;
                ds_json_begin(&json, stdout);
                ds_json_str(&json, "name", name);
                ds_json_bool(&json, "ok", rc == 0);
                ds_json_bool(&json, "data_checked", cmd->data && rc == 0);
                if (interrupted)
                        ds_json_bool(&json, "interrupted", true);
                else if (rc != 0)
                        ds_json_str(&json, "error", err.text);
                ds_json_end(&json);
        }
        if (interrupted && !cmd->json)
                printf("%s: interrupted by signal %d, not verified\n", name, ds_stop_signal());
        if (interrupted)
                return ds_stop_status();
        if (rc != 0)
                errx(1, "verify: %s", err.text);
        if (!cmd->json)
                printf("%s: ok, %llu bytes over %u members%s\n", name,
                       (unsigned long long)info.size, info.layout.width,
                       cmd->data ? ", every byte read, data checksums match" : "");
        free(dirs);
        return 0;
}

int cmd_rm(const struct stripe_cmd *cmd)
{
        struct ds_error err;
        unsigned ndirs;
        char **dirs;
        int removed;

        cmd_name(cmd, cmd->args[1]);
        dirs = cmd_dirs(cmd, cmd->args[0], &ndirs);
        removed = ds_stripe_unlink((const char *const *)dirs, ndirs, cmd->args[1], &err);

        if (removed < 0)
                errx(1, "rm: %s", err.text);
        if (cmd->json) {
                struct ds_json json;
                ds_json_begin(&json, stdout);
                ds_json_str(&json, "name", cmd->args[1]);
                ds_json_u64(&json, "members_removed", (uint64_t)removed);
                ds_json_end(&json);
        }
        free(dirs);
        return 0;
}

int cmd_mv(const struct stripe_cmd *cmd)
{
        struct ds_error err;
        unsigned ndirs;
        char **dirs;

        cmd_name(cmd, cmd->args[1]);
        cmd_name(cmd, cmd->args[2]);
        dirs = cmd_dirs(cmd, cmd->args[0], &ndirs);
        int rc = ds_stripe_rename((const char *const *)dirs, ndirs, cmd->args[1], cmd->args[2],
                                  cmd->force, &err);
        if (rc == -EEXIST) /* never `rm` a member: that damages the set */
                errx(1,
                     "mv: %s: replace it with 'stripe mv -f', or remove the whole set with "
                     "'stripe rm %s %s'",
                     err.text, cmd->args[0], cmd->args[2]);
        if (rc != 0)
                errx(1, "mv: %s", err.text);
        free(dirs);
        return 0;
}
