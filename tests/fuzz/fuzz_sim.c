/* A catalog, a hardware profile and a sweep spec through alisa sim, in
 * this process: models.ini, hardware.ini, software.ini (the catalog
 * directory --catalog names), profile.ini (--profile, when present),
 * spec.sweep and trace, as a multi-file input (fuzz.h). The spec's first
 * two points run as a sweep runs them (sweep_point_make's argv, to
 * cmd_sim), but for what would leave the scratch directory: the catalog,
 * profile and trace are the input's own, --timeline is dropped. Points
 * larger than the harness's bounds (batch over 64, lengths over 512) are
 * skipped, so one input takes milliseconds; the CLI's own bounds are
 * fuzzed by the sweep and catalog harnesses. */
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmds.h"
#include "fuzz.h"
#include "sweep_spec.h"

static int small(const struct sweep_point *p)
{
    for (int i = 1; i + 1 < p->argc; i++) {
        long v = atol(p->argv[i + 1]);
        if ((strcmp(p->argv[i], "--batch") == 0 && v > 64) ||
            ((strcmp(p->argv[i], "--gen-len") == 0 || strcmp(p->argv[i], "--prompt-len") == 0) &&
             v > 512))
            return 0;
    }
    return 1;
}

static void run_point(const struct sweep_point *p, const char *dir)
{
    char trace[600], profile[600];
    snprintf(trace, sizeof trace, "%s/trace", dir);
    snprintf(profile, sizeof profile, "%s/profile.ini", dir);
    char *argv[96];
    int argc = 0;
    argv[argc++] = "sim";
    for (int i = 1; i < p->argc && argc < 88; i++) {
        const char *a = p->argv[i];
        int has_value = i + 1 < p->argc && strncmp(p->argv[i + 1], "--", 2) != 0;
        if (strcmp(a, "--catalog") == 0 || strcmp(a, "--profile") == 0 ||
            strcmp(a, "--timeline") == 0 || strcmp(a, "--trace") == 0) {
            i += has_value;
            continue;
        }
        argv[argc++] = p->argv[i];
    }
    argv[argc++] = "--catalog";
    argv[argc++] = (char *)dir;
    argv[argc++] = "--trace";
    argv[argc++] = trace;
    if (access(profile, R_OK) == 0) {
        argv[argc++] = "--profile";
        argv[argc++] = profile;
    }
    argv[argc] = NULL;
    /* its report to /dev/null; errors and sanitizer reports stay on stderr */
    fflush(stdout);
    int saved = dup(STDOUT_FILENO), null = open("/dev/null", O_WRONLY);
    if (saved >= 0 && null >= 0)
        dup2(null, STDOUT_FILENO);
    optind = 0;
    cmd_sim(argc, argv);
    fflush(stdout);
    if (saved >= 0) {
        dup2(saved, STDOUT_FILENO);
        close(saved);
    }
    if (null >= 0)
        close(null);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *dir = fuzz_dir(data, size);
    char spec[600];
    snprintf(spec, sizeof spec, "%s/spec.sweep", dir);
    struct sweep_spec s;
    struct alisa_err e;
    if (sweep_spec_load(&s, spec, &e) != 0) {
        if (getenv("ALISA_FUZZ_VERBOSE")) /* why a seed stops here */
            fprintf(stderr, "fuzz_sim: %s\n", e.msg);
        return 0;
    }
    if (strcmp(s.command, "sim") == 0)
        for (uint64_t k = 0; k < s.n_points && k < 2; k++) {
            struct sweep_point p;
            if (sweep_point_make(&s, k, &p, &e) != 0)
                continue;
            if (small(&p))
                run_point(&p, dir);
            sweep_point_free(&p);
        }
    sweep_spec_free(&s);
    return 0;
}
