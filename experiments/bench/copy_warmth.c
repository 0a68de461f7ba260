/* One 128-byte memcpy (a token's K or V row of stories260K in the CPU
 * executor's FP32 arenas) timed over working sets of three sizes: 64 MiB
 * (cache-cold, the calibration's copy benchmark strides over 16 MiB), 860
 * KiB (the host arena a flexgen-static validate run of stories260K reloads
 * every step: 7 sequences x 5 layers x ~96 tokens x 256 bytes) and 32 KiB.
 * Prints ns per copy, the best of 5 rounds of 200,000. Not part of the
 * build: gcc -O2 -o /tmp/copy_warmth experiments/bench/copy_warmth.c &&
 * /tmp/copy_warmth (experiments/validation.md, 2026-11-24). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(void)
{
    const size_t span = (size_t)64 << 20, bytes = 128;
    const size_t sets[3] = {span, 860 * 1024, 32 * 1024};
    unsigned char *s = malloc(span), *d = malloc(span);
    if (!s || !d)
        return 1;
    memset(s, 1, span);
    memset(d, 2, span);
    for (int m = 0; m < 3; m++) {
        size_t ws = sets[m];
        const int reps = 200000;
        double best = 1e30;
        for (int k = 0; k < 5; k++) {
            double t0 = now_ns();
            for (int r = 0; r < reps; r++) {
                size_t off = ((size_t)r * 4096 + (size_t)r / (ws / 4096 + 1) * 128) % (ws - bytes + 1);
                memcpy(d + off, s + off, bytes);
            }
            double t = (now_ns() - t0) / reps;
            best = t < best ? t : best;
        }
        printf("working set %zu KiB: %.1f ns per %zu-byte copy\n", ws / 1024, best, bytes);
    }
    free(s);
    free(d);
    return 0;
}
