/* Error reporting shared by every module: a status code plus a one-line message.
 *
 * Library code never prints or exits. A failing call fills a caller-owned
 * struct alisa_err with "what, where, the value, a hint" and returns a negative
 * status; only main() turns that into "alisa: error: <msg>" and an exit code.
 * ALISA_ASSERT is for invariants: always on, prints file:line, aborts.
 */
#ifndef ALISA_ERR_H
#define ALISA_ERR_H

#include <stddef.h>

enum alisa_status {
    ALISA_OK = 0,
    ALISA_EINVAL = -1,   /* bad argument or impossible configuration */
    ALISA_EIO = -2,      /* file could not be opened, read or written */
    ALISA_ENOMEM = -3,   /* allocation failed */
    ALISA_ECORRUPT = -4, /* file content is malformed, truncated or corrupt */
    ALISA_ENOTFOUND = -5 /* a named thing (model, profile, key) does not exist */
};

struct alisa_err {
    char msg[512]; /* NUL-terminated, empty when no error was set */
};

/* Formats the message into e (may be NULL: the message is dropped) and returns
 * status unchanged, so callers write `return err_set(e, ALISA_EIO, ...)`.
 * Cannot fail; long messages are truncated. */
int err_set(struct alisa_err *e, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefixes the existing message with "prefix: " (for adding the file name or
 * position at an outer layer). Returns status unchanged. Cannot fail. */
int err_prefix(struct alisa_err *e, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Name of a status for messages ("corrupt", "I/O", ...). Cannot fail. */
const char *err_status_name(int status);

void alisa_assert_fail(const char *expr, const char *file, int line)
    __attribute__((noreturn));

/* Always-on invariant check: a wrong-but-fast simulator is worthless. */
#define ALISA_ASSERT(expr) \
    ((expr) ? (void)0 : alisa_assert_fail(#expr, __FILE__, __LINE__))

#endif
