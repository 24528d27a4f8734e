/* The users file: load, check a password, add a user. */
#include "users.h"

#include "conf.h"

#include <dragstrip/error.h>

#include "store.h"

#include <crypt.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct user_entry {
        char *name;
        char *hash;
        char *root; /* the user's own store; NULL: the server's */
        bool read_only;
};

struct xftpd_users {
        char *text; /* the file, its lines cut in place */
        struct user_entry *entries;
        unsigned count;
};

/* Compared against when the name is unknown, so that a wrong name costs what a wrong
 * password does. A yescrypt hash of nothing anyone can type. */
static const char decoy_hash[] =
    "$y$j9T$Kg/iAoxDZrTptAOZRqt2m/$S.QiKY6j/kxgCtgbjXLt4S12YURDAdk0S1bZ79mbb8D";

bool xftpd_user_name_ok(const char *name)
{
        size_t len = strlen(name);

        if (len == 0 || len > XFTPD_USER_NAME_MAX || name[0] == '-' || name[0] == '.')
                return false;
        return strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") ==
               len;
}

static bool hash_ok(const char *hash)
{
        return hash[0] == '$' && crypt_checksalt(hash) == CRYPT_SALT_OK;
}

bool xftpd_users_root_ok(const char *root)
{
        for (const char *at = root;; at++) {
                size_t len = strcspn(at, ",");
                if (at[0] != '/' || len >= XFTP_STORE_PATH_MAX)
                        return false;
                at += len;
                if (!*at)
                        return strcspn(root, ":\n") == strlen(root);
        }
}

/* Cuts line at its next ':' and returns what follows, or NULL when there is none. */
static char *next_field(char *field)
{
        char *colon = field ? strchr(field, ':') : NULL;

        if (colon)
                *colon++ = '\0';
        return colon;
}

static int parse_line(struct xftpd_users *users, char *line, const char *path, unsigned lineno,
                      struct ds_error *err)
{
        line[strcspn(line, "\r")] = '\0';
        char *hash = next_field(line), *root = next_field(hash), *flags = next_field(root);

        if (!hash || next_field(flags))
                return ds_fail(err, 0, "%s line %u: expected name:hash[:root[:ro]]", path, lineno),
                       -EINVAL;
        if (root && root[0] && !xftpd_users_root_ok(root))
                return ds_fail(err, 0,
                               "%s line %u: the root of %s is not absolute directories "
                               "separated by commas",
                               path, lineno, line),
                       -EINVAL;
        if (flags && strcmp(flags, "ro") != 0 && flags[0])
                return ds_fail(err, 0, "%s line %u: '%s' is not ro (read-only) or nothing", path,
                               lineno, flags),
                       -EINVAL;
        if (!xftpd_user_name_ok(line))
                return ds_fail(err, 0, "%s line %u: '%s' is not a user name ([A-Za-z0-9._-])", path,
                               lineno, line),
                       -EINVAL;
        if (!hash_ok(hash))
                return ds_fail(err, 0,
                               "%s line %u: the hash of %s is not one crypt(3) knows (use "
                               "mkpasswd or xftpd --add-user)",
                               path, lineno, line),
                       -EINVAL;
        for (unsigned i = 0; i < users->count; i++)
                if (strcmp(users->entries[i].name, line) == 0)
                        return ds_fail(err, 0, "%s line %u: %s appears twice", path, lineno, line),
                               -EINVAL;
        if (users->count == XFTPD_USERS_MAX)
                return ds_fail(err, 0, "%s: more than %u users", path, XFTPD_USERS_MAX), -E2BIG;
        users->entries[users->count++] = (struct user_entry){
            .name = line,
            .hash = hash,
            .root = root && root[0] ? root : NULL,
            .read_only = flags && flags[0],
        };
        return 0;
}

int xftpd_users_load(struct xftpd_users **out, const char *path, struct ds_error *err)
{
        int rc = 0;
        struct xftpd_users *users = calloc(1, sizeof(*users));
        if (!users)
                return ds_fail(err, -ENOMEM, "users file %s", path);
        users->text = xftpd_read_text(path, XFTPD_USERS_BYTES, "users file", &rc, err);
        users->entries = calloc(XFTPD_USERS_MAX, sizeof(*users->entries));
        if (users->text && !users->entries)
                rc = ds_fail(err, -ENOMEM, "users file %s", path);

        unsigned lineno = 0;
        for (char *line = users->text, *next; rc == 0 && line && *line; line = next) {
                next = line + strcspn(line, "\n");
                if (*next)
                        *next++ = '\0';
                lineno++;
                if (line[0] != '#' && line[strspn(line, " \t\r")] != '\0')
                        rc = parse_line(users, line, path, lineno, err);
        }
        if (rc < 0) {
                xftpd_users_free(users);
                return rc;
        }
        *out = users;
        return 0;
}

void xftpd_users_free(struct xftpd_users *users)
{
        if (!users)
                return;
        free(users->entries);
        free(users->text);
        free(users);
}

const char *xftpd_users_root(const struct xftpd_users *users, const char *name, bool *read_only)
{
        *read_only = false;
        for (unsigned i = 0; users && i < users->count; i++)
                if (strcmp(users->entries[i].name, name) == 0) {
                        *read_only = users->entries[i].read_only;
                        return users->entries[i].root;
                }
        return NULL;
}

/* Compares every byte whatever the first difference, as a hash comparison should. */
static bool same_text(const char *a, const char *b)
{
        size_t la = strlen(a), lb = strlen(b);
        unsigned char diff = la != lb;

        for (size_t i = 0; i < la && i < lb; i++)
                diff |= (unsigned char)(a[i] ^ b[i]);
        return diff == 0;
}

bool xftpd_users_check(const struct xftpd_users *users, const char *name, const char *password)
{
        const char *hash = decoy_hash;
        bool known = false;

        for (unsigned i = 0; users && i < users->count; i++)
                if (strcmp(users->entries[i].name, name) == 0) {
                        hash = users->entries[i].hash;
                        known = true;
                }
        struct crypt_data *data = calloc(1, sizeof(*data));
        if (!data)
                return false;
        const char *computed = crypt_r(password, hash, data);
        bool match = computed && computed[0] == '$' && same_text(computed, hash);
        explicit_bzero(data, sizeof(*data));
        free(data);
        return known && match;
}

/* Writes text to a temporary file beside path, syncs it and renames it over path. The
 * file that was there (was; NULL: none) passes on its mode, and as root its owner and
 * group: a users file the server's user may read (for a reload) stays so. */
static int replace_file(const char *path, const char *text, size_t len, const struct stat *was,
                        struct ds_error *err)
{
        char tmp[4096];
        if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >= sizeof(tmp))
                return ds_fail(err, -ENAMETOOLONG, "%s", path);
        int fd =
            open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, was ? was->st_mode & 0777 : 0600);
        if (fd < 0)
                return ds_fail(err, -errno, "create %s", tmp);
        int rc = 0;
        if (was && geteuid() == 0 && fchown(fd, was->st_uid, was->st_gid) < 0)
                rc = ds_fail(err, -errno, "chown %s", tmp);
        if (was && fchmod(fd, was->st_mode & 0777) < 0) /* beyond the umask */
                rc = ds_fail(err, -errno, "chmod %s", tmp);
        for (size_t done = 0; rc == 0 && done < len;) {
                ssize_t n = write(fd, text + done, len - done);
                if (n < 0 && errno != EINTR)
                        rc = ds_fail(err, -errno, "write %s", tmp);
                done += n > 0 ? (size_t)n : 0;
        }
        if (rc == 0 && fsync(fd) < 0)
                rc = ds_fail(err, -errno, "fsync %s", tmp);
        if (close(fd) < 0 && rc == 0)
                rc = ds_fail(err, -errno, "close %s", tmp);
        if (rc == 0 && rename(tmp, path) < 0)
                rc = ds_fail(err, -errno, "rename %s to %s", tmp, path);
        if (rc < 0)
                unlink(tmp);
        return rc;
}

int xftpd_users_add(const char *path, const char *name, const char *password, const char *home,
                    bool read_only, struct ds_error *err)
{
        if (!xftpd_user_name_ok(name))
                return ds_fail(err, 0, "'%s' is not a user name (1 to %u of A-Z a-z 0-9 . _ -)",
                               name, XFTPD_USER_NAME_MAX),
                       -EINVAL;
        if (home && !xftpd_users_root_ok(home))
                return ds_fail(err, 0,
                               "--home %s: expected absolute directories separated by commas",
                               home),
                       -EINVAL;
        /* What follows the hash: given, or else the line's own (a new password keeps them). */
        char fields[XFTP_STORE_PATH_MAX + 8] = "";
        if (home || read_only)
                snprintf(fields, sizeof(fields), ":%s%s", home ? home : "", read_only ? ":ro" : "");
        char salt[CRYPT_GENSALT_OUTPUT_SIZE];
        struct crypt_data data = {0};
        if (!crypt_gensalt_rn("$y$", 0, NULL, 0, salt, sizeof(salt)))
                return ds_fail(err, -errno, "crypt_gensalt (yescrypt)");
        const char *hash = crypt_r(password, salt, &data);
        if (!hash || hash[0] != '$')
                return ds_fail(err, -EINVAL, "crypt (yescrypt)");

        /* The file as it is, checked (a broken file is not rewritten), its other lines and
         * comments kept as they were; name's line is replaced where it stood. */
        struct stat sb;
        bool exists = stat(path, &sb) == 0;
        struct xftpd_users *users = NULL;
        int rc = exists ? xftpd_users_load(&users, path, err) : 0;
        xftpd_users_free(users);
        char *old = exists && rc == 0
                        ? xftpd_read_text(path, XFTPD_USERS_BYTES, "users file", &rc, err)
                        : NULL;
        if (rc < 0)
                return rc;
        size_t cap = (old ? strlen(old) + 1 : 0) + strlen(name) + strlen(hash) + strlen(fields) + 3;
        char *text = malloc(cap);
        size_t used = 0, name_len = strlen(name);
        bool placed = false;
        for (char *line = old, *next; text && line && *line; line = next) {
                next = line + strcspn(line, "\n");
                if (*next)
                        *next++ = '\0';
                bool mine = strncmp(line, name, name_len) == 0 && line[name_len] == ':';
                const char *kept = mine ? strchr(line + name_len + 1, ':') : NULL;
                const char *rest = !mine ? "" : fields[0] || !kept ? fields : kept;
                used += (size_t)snprintf(text + used, cap - used, "%s%s%s%s\n", mine ? name : line,
                                         mine ? ":" : "", mine ? hash : "", rest);
                placed |= mine;
        }
        if (text && !placed)
                used += (size_t)snprintf(text + used, cap - used, "%s:%s%s\n", name, hash, fields);
        explicit_bzero(&data, sizeof(data));
        free(old);
        rc = text ? replace_file(path, text, used, exists ? &sb : NULL, err)
                  : ds_fail(err, -ENOMEM, "users file");
        free(text);
        return rc;
}
