/* xftpd's users: a file of lines "name:crypt-hash" (yescrypt "$y$" or SHA-512 "$6$", as
 * mkpasswd or `openssl passwd -6` write them), '#' comments and blank lines allowed. */
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

/* Whether name is acceptable as a user name: 1 to XFTPD_USER_NAME_MAX of [A-Za-z0-9._-],
 * not starting with '-' or '.'. */
bool xftpd_user_name_ok(const char *name);

/* Sets name's password in the file at path (adding the line, or replacing the hash of an
 * existing one), hashing it with yescrypt. The file is rewritten under a temporary name
 * and renamed into place after fsync; a new file is created with mode 0600. Returns 0 or
 * a negative errno with err filled. */
int xftpd_users_add(const char *path, const char *name, const char *password, struct ds_error *err);

#endif
