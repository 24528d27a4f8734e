/* xftpd's users: a file of lines "name:crypt-hash[:root[:ro]]" (yescrypt "$y$" or SHA-512
 * "$6$", as mkpasswd or `openssl passwd -6` write them; root: the user's own store, one
 * absolute directory or several separated by commas for a striped store, empty for the
 * server's; ro: read-only), '#' comments and blank lines allowed. */
#ifndef XFTPD_USERS_H
#define XFTPD_USERS_H

#include <stdbool.h>
#include <stddef.h>

struct ds_error;

#define XFTPD_USERS_MAX     10000u     /* entries in a users file */
#define XFTPD_USERS_BYTES   (4u << 20) /* size of a users file */
#define XFTPD_USER_NAME_MAX 32u

struct xftpd_users;

/* Reads and checks the whole file (every line well formed, names valid and unique, hashes
 * of a kind crypt(3) here knows). Returns 0 or a negative errno with err naming the file
 * and line. */
int xftpd_users_load(struct xftpd_users **out, const char *path, struct ds_error *err);
void xftpd_users_free(struct xftpd_users *users);

/* Whether name and password match an entry. Costs one crypt(3) even for an unknown
 * name, so that the time taken does not say which names exist. */
bool xftpd_users_check(const struct xftpd_users *users, const char *name, const char *password);

/* The store of name's entry (NULL: the server's own) and whether it is read-only. */
const char *xftpd_users_root(const struct xftpd_users *users, const char *name, bool *read_only);

/* Whether root can be a user's root: absolute directories separated by commas. */
bool xftpd_users_root_ok(const char *root);

/* Whether name is acceptable as a user name: 1 to XFTPD_USER_NAME_MAX of [A-Za-z0-9._-],
 * not starting with '-' or '.'. */
bool xftpd_user_name_ok(const char *name);

/* Sets name's password in the file at path (adding the line, or replacing the hash of an
 * existing one), hashing it with yescrypt; with home or read_only, its root and ro too
 * (else an existing line keeps its own). The file is rewritten under a temporary name
 * and renamed into place after fsync; a new file is created with mode 0600. Returns 0 or
 * a negative errno with err filled. */
int xftpd_users_add(const char *path, const char *name, const char *password, const char *home,
                    bool read_only, struct ds_error *err);

#endif
