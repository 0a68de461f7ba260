/* Whole-or-nothing output files that never replace what they should not.
 *
 * A result (a trace, a table, a profile, a log) is written to PATH.part and
 * renamed over PATH only when complete, so a failed or killed run leaves
 * PATH as it was. PATH itself must be absent or a regular file: a symbolic
 * link, FIFO, device node, socket or directory there is refused, never
 * replaced (issue 48: --timeline /dev/full replaced the device node when
 * run as root). "-" writes standard output. Does not lock: two writers of
 * one path race as two `cp` would.
 */
#ifndef ALISA_OUTFILE_H
#define ALISA_OUTFILE_H

#include <stddef.h>
#include <stdio.h>

#include "err.h"

/* Opens path's part file for writing (binary), part[size] receiving its
 * name ("" for "-": then stdout is returned). Refuses, returning NULL with e
 * set ("PATH: is a symbolic link; refusing to replace it ..."), when path
 * exists as anything but a regular file, or its part exists as anything but
 * a regular file (a stale regular part is removed); the part is created
 * exclusively, never through a link. what names the output in messages
 * ("timeline", may be ""). */
FILE *outfile_open(const char *path, char *part, size_t size, const char *what,
                   struct alisa_err *e);

/* Closes f; when failed is 0 and every write succeeded, renames the part
 * over path (checked again just before: a path that became a link or a
 * FIFO meanwhile is refused) and returns 0; otherwise removes the part and
 * returns failed, or an error naming the part. For "-" (part "") flushes
 * stdout and leaves it open. */
int outfile_close(FILE *f, const char *part, const char *path, int failed, struct alisa_err *e);

#endif
