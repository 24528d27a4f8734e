/* Error messages for library callers. */
#include <dragstrip/error.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int ds_fail(struct ds_error *err, int neg_errno, const char *fmt, ...)
{
        /* Callers often read errno after a failure; formatting must not disturb it. */
        int saved_errno = errno;

        if (err) {
                va_list ap;
                va_start(ap, fmt);
                int n = vsnprintf(err->text, sizeof(err->text), fmt, ap);
                va_end(ap);
                if (n < 0) {
                        err->text[0] = '\0';
                        n = 0;
                }
                size_t used = (size_t)n < sizeof(err->text) ? (size_t)n : sizeof(err->text) - 1;
                if (neg_errno != 0 && used < sizeof(err->text) - 1)
                        snprintf(err->text + used, sizeof(err->text) - used, ": %s",
                                 strerror(-neg_errno));
        }
        errno = saved_errno;
        return neg_errno;
}
