/* Error messages and the always-on assert.
 *
 * Owns the formatting of struct alisa_err; does not decide exit codes (main
 * does). Invariant: a message never exceeds the buffer and is always
 * NUL-terminated.
 */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int err_set(struct alisa_err *e, int status, const char *fmt, ...)
{
    if (!e)
        return status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return status;
}

int err_prefix(struct alisa_err *e, int status, const char *fmt, ...)
{
    if (!e)
        return status;
    char prefix[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    char old[sizeof e->msg];
    memcpy(old, e->msg, sizeof old);
    /* Truncation is acceptable: the message stays NUL-terminated. */
    size_t n = strlen(prefix);
    if (n > sizeof e->msg - 3)
        n = sizeof e->msg - 3;
    memcpy(e->msg, prefix, n);
    memcpy(e->msg + n, ": ", 2);
    size_t room = sizeof e->msg - n - 3;
    size_t k = strnlen(old, room);
    memcpy(e->msg + n + 2, old, k);
    e->msg[n + 2 + k] = 0;
    return status;
}

const char *err_status_name(int status)
{
    switch (status) {
    case ALISA_OK: return "ok";
    case ALISA_EINVAL: return "invalid";
    case ALISA_EIO: return "I/O";
    case ALISA_ENOMEM: return "out of memory";
    case ALISA_ECORRUPT: return "corrupt";
    case ALISA_ENOTFOUND: return "not found";
    }
    return "unknown";
}

void alisa_assert_fail(const char *expr, const char *file, int line)
{
    fprintf(stderr, "alisa: internal error: %s:%d: assertion failed: %s\n", file, line, expr);
    abort();
}
