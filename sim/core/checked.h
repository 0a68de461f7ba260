/* Overflow-checked size arithmetic for everything that parses a file: a
 * count or size read from input is multiplied and added through these, so a
 * hostile header cannot wrap a size check into passing.
 *
 * Sticky style: each call leaves *over set once any step overflowed (and
 * returns 0 then), so a whole formula is checked once at its end:
 *   int over = 0;
 *   uint64_t bytes = checked_mul(checked_mul(n, d, &over), 4, &over);
 *   if (over) ... refuse, naming the fields ...
 * Header only; cannot fail.
 */
#ifndef ALISA_CHECKED_H
#define ALISA_CHECKED_H

#include <stdint.h>

static inline uint64_t checked_mul(uint64_t a, uint64_t b, int *over)
{
    uint64_t r;
    if (__builtin_mul_overflow(a, b, &r)) {
        *over = 1;
        return 0;
    }
    return r;
}

static inline uint64_t checked_add(uint64_t a, uint64_t b, int *over)
{
    uint64_t r;
    if (__builtin_add_overflow(a, b, &r)) {
        *over = 1;
        return 0;
    }
    return r;
}

#endif
