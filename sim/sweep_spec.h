/* Sweep specifications (the .sweep files in experiments/, INI parsed with inih): named
 * parameters, each a list of values, whose product is the set of runs, and
 * fixed parameters alongside. Format in experiments/README.md.
 *
 * Owns parsing, validation (file:line on every error), point enumeration
 * and each point's canonical configuration and hash. Does not run anything:
 * a point is an argv for `alisa sim` or `alisa plan` plus its identity.
 */
#ifndef ALISA_SWEEP_SPEC_H
#define ALISA_SWEEP_SPEC_H

#include <stdint.h>
#include <stdio.h>

#include "err.h"

struct sweep_param {
    char key[160];     /* option name without the leading "--"; a linked [vary] key names
                          several */
    char **values;     /* (n_values) owned strings; "true"/"false" for flags */
    uint32_t n_values;
};

struct sweep_spec {
    char path[512];    /* the spec file */
    char name[64];     /* [sweep] name */
    char command[16];  /* an alisa command (sim, plan, eval, fidelity, validate, run), or
                          "exec": another program, a peer system's benchmark */
    char program[1024]; /* exec: the program, absolute (relative in the spec: to its
                           directory); it is run with the point's options and --json and
                           must print one JSON object */
    struct sweep_param *fixed; /* (n_fixed) one value each */
    uint32_t n_fixed;
    struct sweep_param *vary;  /* (n_vary) the product, first key slowest */
    uint32_t n_vary;
    uint64_t n_points;
    uint32_t timeout_s; /* [sweep] timeout: a point's wall-clock limit in seconds (0: none) */
};

#define SWEEP_HASH_LEN 16 /* hex digits of a point's hash */

struct sweep_point {
    uint64_t index;     /* 0..n_points-1 */
    int argc;
    char **argv;        /* (argc + 1) the command (exec: the program), "--key", "value", ...,
                           "--json", NULL */
    char *config;       /* canonical JSON: {"command", "params": {...sorted}, "sweep"}, and
                           "program" for exec */
    char hash[SWEEP_HASH_LEN + 1]; /* FNV-1a 64 of config, hex */
};

/* Parses path into s (zeroed first). Relative paths of the keys trace,
 * timeline and log are made absolute against the spec's directory. On
 * failure s is empty and e says "path:line: what". */
int sweep_spec_load(struct sweep_spec *s, const char *path, struct alisa_err *e);

/* Overrides one parameter of a loaded spec, as `alisa sweep --set KEY=VALUE`:
 * a [fixed] key takes the value; a [vary] key, alone or linked, takes it in
 * every point (the point count and numbering stay, so --point K is the same
 * point); a key the spec lacks joins [fixed]; "program" replaces an exec
 * spec's program. Relative paths are taken from the working directory. The
 * value must be one word (no whitespace, no comma). Returns 0, or an error
 * naming the key and value; s is unchanged on failure. */
int sweep_spec_set(struct sweep_spec *s, const char *key, const char *value,
                   struct alisa_err *e);

/* Writes arg to f quoted for a POSIX shell: one word whatever it holds
 * (quotes, spaces, newlines, $, backticks), as '...' with each ' written as
 * '\''. Cannot fail (f's errors are f's). */
void sweep_shell_quote(FILE *f, const char *arg);

/* Frees what s owns; s may be zeroed or half-loaded. */
void sweep_spec_free(struct sweep_spec *s);

/* Builds point k (< n_points) into p. */
int sweep_point_make(const struct sweep_spec *s, uint64_t k, struct sweep_point *p,
                     struct alisa_err *e);

/* A point's identity: FNV-1a 64 of text (its canonical config) as
 * SWEEP_HASH_LEN hex digits. */
void sweep_hash(const char *text, char out[SWEEP_HASH_LEN + 1]);

/* Frees what p owns; p may be zeroed. */
void sweep_point_free(struct sweep_point *p);

#endif
