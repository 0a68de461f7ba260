/* Near names, for "did you mean" hints: the edit distance of two names and
 * whether it is close enough to suggest. Pure functions, no I/O; used by the
 * catalog's lookups and the sweep spec's option check.
 */
#ifndef ALISA_NAMES_H
#define ALISA_NAMES_H

#include <stddef.h>

/* Levenshtein distance of a and b, case folded; SIZE_MAX when either is
 * 128 characters or longer. Cannot fail. */
size_t names_distance(const char *a, const char *b);

/* 1 when a candidate at distance d from name is near enough to suggest
 * (within a third of name's length, at least 2 edits), else 0. */
int names_close(const char *name, size_t d);

/* The candidate nearest to name when names_close, else NULL (n candidates,
 * NULL entries skipped). Cannot fail. */
const char *names_nearest(const char *name, const char *const *candidates, size_t n);

#endif
