/* main() for the ctest build of a harness: runs every file named on the
 * command line (or every file in a named directory) through
 * LLVMFuzzerTestOneInput once, no mutation. A crash or sanitizer report
 * fails the test; reaching the end prints how many inputs ran. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "fuzz_replay: cannot open %s\n", path);
        return -1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    if (!buf || (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n)) {
        fprintf(stderr, "fuzz_replay: cannot read %s\n", path);
        fclose(f);
        free(buf);
        return -1;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, (size_t)n);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    int ran = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            DIR *d = opendir(argv[i]);
            struct dirent *de;
            while (d && (de = readdir(d)))
                if (de->d_name[0] != '.') {
                    char p[4096];
                    snprintf(p, sizeof p, "%s/%s", argv[i], de->d_name);
                    if (run_file(p))
                        return 1;
                    ran++;
                }
            if (d)
                closedir(d);
        } else {
            if (run_file(argv[i]))
                return 1;
            ran++;
        }
    }
    if (ran == 0) {
        fprintf(stderr, "fuzz_replay: no inputs\n");
        return 1;
    }
    printf("fuzz_replay: %d inputs ran clean\n", ran);
    return 0;
}
