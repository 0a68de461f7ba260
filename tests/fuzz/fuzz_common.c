/* The harnesses' scratch file and byte reader (contract in fuzz.h). */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char path[512];

static void remove_scratch(void)
{
    if (path[0])
        unlink(path);
}

const char *fuzz_file(const uint8_t *data, size_t size, const char *suffix)
{
    if (!path[0]) {
        const char *dir = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/alisa-fuzz-%ld%s", dir && *dir ? dir : "/tmp",
                 (long)getpid(), suffix);
        atexit(remove_scratch);
    }
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        fprintf(stderr, "fuzz: cannot write %s\n", path);
        abort();
    }
    return path;
}

/* written, never read: a store to it cannot be dropped, so neither can the
 * loads of fuzz_read (a static one drew clang's unused-variable warning) */
volatile char fuzz_sink;

void fuzz_read(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        fuzz_sink ^= s[i];
}
