/* Progress of slow work on standard error, for a person watching: a line
 * redrawn in place (what, a bar, done of total, the rate and the time left),
 * at most five times a second, only when standard error is a terminal and
 * the command was not asked for machine output (--json). Piped, logged or
 * in a sweep's child it prints nothing, so outputs and logs stay clean.
 */
#ifndef ALISA_PROGRESS_H
#define ALISA_PROGRESS_H

#include <stdint.h>

struct progress {
    char what[64];   /* "trace gen", "calibrate, run 1 of 2: memory", ... */
    const char *unit; /* what is counted, plural ("points", "tokens") */
    uint64_t total;  /* 0: unknown (no bar, no time left) */
    uint64_t done;
    double start_s, drawn_s;
    int on;          /* drawing at all */
    int drawn;       /* a line is on the screen */
};

/* Starts p; quiet (--json, or a caller's own reason) turns it off, as does
 * a standard error that is not a terminal (or ALISA_PROGRESS=0; =1 forces
 * it on, for tests). Cannot fail. */
void progress_start(struct progress *p, const char *what, const char *unit, uint64_t total,
                    int quiet);

/* done of total are finished; redraws when 0.2 s have passed. */
void progress_set(struct progress *p, uint64_t done);

/* Clears the line (the next output starts on a clean one). */
void progress_end(struct progress *p);

#endif
