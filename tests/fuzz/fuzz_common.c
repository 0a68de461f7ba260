/* The harnesses' scratch file, scratch directory of multi-file inputs and
 * byte reader (contract in fuzz.h). */
#include "fuzz.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* The multi-file format (fuzz.h): a header line's name, or 0 when the line
 * at data[i] is no header; *next gets the offset after the line. */
static int header_at(const uint8_t *data, size_t size, size_t i, char name[65], size_t *next)
{
    static const char open_[] = "==> ", close_[] = " <==\n";
    if (size - i < 4 + 1 + 5 || memcmp(data + i, open_, 4) != 0)
        return 0;
    size_t n = 0;
    for (size_t j = i + 4; j < size && n <= 64; j++, n++) {
        char c = (char)data[j];
        if (isalnum((unsigned char)c) || c == '.' || c == '_' || c == '-')
            continue;
        if (n == 0 || size - j < 5 || memcmp(data + j, close_, 5) != 0)
            return 0;
        memcpy(name, data + i + 4, n);
        name[n] = 0;
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
            return 0;
        *next = j + 5;
        return 1;
    }
    return 0;
}

/* Calls fn for each file of a multi-file input, in order: a header at the
 * start, or after a newline that then belongs to the header, not the file. */
static void each_file(const uint8_t *data, size_t size,
                      void (*fn)(const char *name, size_t at, size_t len, void *arg), void *arg)
{
    char name[65], cur[65] = "";
    size_t start = 0, next;
    for (size_t i = 0; i < size; i++) {
        size_t h = i == 0 ? 0 : i + 1; /* where a header would begin */
        if ((i == 0 || data[i] == '\n') && h < size && header_at(data, size, h, name, &next)) {
            if (cur[0])
                fn(cur, start, i - start, arg);
            memcpy(cur, name, sizeof cur);
            start = next;
            i = next - 1;
        }
    }
    if (cur[0])
        fn(cur, start, size - start, arg);
}

static char dir[512];
static char dir_names[FUZZ_MAX_FILES][65];
static int dir_n;

static void empty_dir(void)
{
    char p[1200];
    for (int k = 0; k < dir_n; k++) {
        snprintf(p, sizeof p, "%s/%.64s", dir, dir_names[k]);
        unlink(p);
    }
    dir_n = 0;
}

static void remove_dir(void)
{
    empty_dir();
    if (dir[0])
        rmdir(dir);
}

struct write_arg {
    const uint8_t *data;
};

static void write_one(const char *name, size_t at, size_t len, void *arg)
{
    const struct write_arg *w = arg;
    int known = 0;
    for (int k = 0; k < dir_n; k++)
        known |= strcmp(dir_names[k], name) == 0;
    if (!known) {
        if (dir_n == FUZZ_MAX_FILES)
            return;
        memcpy(dir_names[dir_n++], name, 65);
    }
    char p[1200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f || (len && fwrite(w->data + at, 1, len, f) != len) || fclose(f) != 0) {
        fprintf(stderr, "fuzz: cannot write %s\n", p);
        abort();
    }
}

const char *fuzz_dir(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/alisa-fuzz-dir-%ld", tmp && *tmp ? tmp : "/tmp",
                 (long)getpid());
        if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
            fprintf(stderr, "fuzz: cannot make %s\n", dir);
            abort();
        }
        atexit(remove_dir);
    }
    empty_dir();
    struct write_arg w = {data};
    each_file(data, size, write_one, &w);
    return dir;
}

struct find_arg {
    const char *name;
    size_t at, len;
    int found;
};

static void find_one(const char *name, size_t at, size_t len, void *arg)
{
    struct find_arg *f = arg;
    if (strcmp(name, f->name) == 0) {
        f->at = at;
        f->len = len;
        f->found = 1;
    }
}

int fuzz_dir_find(const uint8_t *data, size_t size, const char *name, size_t *at, size_t *len)
{
    struct find_arg f = {name, 0, 0, 0};
    each_file(data, size, find_one, &f);
    *at = f.at;
    *len = f.len;
    return f.found;
}
