/* Error messages for library callers: the library never prints or exits. */
#ifndef DRAGSTRIP_ERROR_H
#define DRAGSTRIP_ERROR_H

/* What went wrong and where, filled by a failing library call for main() to print. Room
 * for a line that names two long paths (a remote file and its local partial) and still
 * ends with what it says to do. */
struct ds_error {
        char text[1024];
};

/* Formats the message into err (if non-NULL) and returns neg_errno, so a failure path
 * reads `return ds_fail(err, -errno, "connect %s", host);`. When neg_errno is non-zero
 * its strerror text is appended after ": ". */
int ds_fail(struct ds_error *err, int neg_errno, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
