/* Near names (contract in names.h): one row of the Levenshtein table, case
 * folded; names are short, longer ones count as far. */
#include "names.h"

#include <ctype.h>
#include <stdint.h>
#include <string.h>

size_t names_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b), row[128];
    if (n >= 128 || m >= 128)
        return SIZE_MAX;
    for (size_t j = 0; j <= m; j++)
        row[j] = j;
    for (size_t i = 1; i <= n; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= m; j++) {
            size_t up = row[j];
            size_t sub = diag + (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
            size_t best = up + 1 < row[j - 1] + 1 ? up + 1 : row[j - 1] + 1;
            row[j] = sub < best ? sub : best;
            diag = up;
        }
    }
    return row[m];
}

int names_close(const char *name, size_t d)
{
    size_t len = strlen(name), near_enough = len / 3 > 2 ? len / 3 : 2;
    return d <= near_enough;
}

const char *names_nearest(const char *name, const char *const *candidates, size_t n)
{
    size_t best_d = SIZE_MAX;
    const char *best = NULL;
    for (size_t i = 0; i < n; i++) {
        size_t d = candidates[i] && candidates[i][0] ? names_distance(name, candidates[i]) : SIZE_MAX;
        if (d < best_d) {
            best_d = d;
            best = candidates[i];
        }
    }
    return best && names_close(name, best_d) ? best : NULL;
}
