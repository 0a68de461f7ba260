/* Whole-or-nothing output files (sim/trace/outfile.h): a complete write
 * replaces the file, a failed one leaves it, and a path that is a symbolic
 * link, FIFO, device node or directory is refused and left as it was, as is
 * a part file that is a link (issue 48). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "outfile.h"
#include "testutil.h"

static void write_text(const char *path, const char *text)
{
    tu_write(path, (const uint8_t *)text, strlen(text));
}

static int has_text(const char *path, const char *text)
{
    size_t n;
    uint8_t *b = tu_read(path, &n);
    int same = n == strlen(text) && memcmp(b, text, n) == 0;
    free(b);
    return same;
}

static void test_outfile_replaces_a_file_only_when_the_write_completes(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "out.csv");
    char part[512];
    struct alisa_err e = {{0}};
    write_text(path, "old\n");
    FILE *f = outfile_open(path, part, sizeof part, "table", &e);
    assert_non_null(f);
    fputs("new\n", f);
    assert_true(has_text(path, "old\n")); /* nothing replaced before close */
    assert_int_equal(outfile_close(f, part, path, 0, &e), 0);
    assert_true(has_text(path, "new\n"));
    assert_int_equal(access(part, F_OK), -1);
    /* a failed run leaves the file and no part */
    f = outfile_open(path, part, sizeof part, "table", &e);
    assert_non_null(f);
    fputs("half", f);
    assert_int_equal(outfile_close(f, part, path, ALISA_EINVAL, &e), ALISA_EINVAL);
    assert_true(has_text(path, "new\n"));
    assert_int_equal(access(part, F_OK), -1);
    /* a stale regular part from a killed run is replaced */
    write_text(part, "stale");
    f = outfile_open(path, part, sizeof part, "", &e);
    assert_non_null(f);
    assert_int_equal(outfile_close(f, part, path, 0, &e), 0);
    assert_true(has_text(path, ""));
    tu_rmdir(dir);
    free(dir);
}

static void test_outfile_refuses_links_fifos_devices_and_directories(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    char target[512], link[512], fifo[512], sub[512], part[600], partlink[600];
    snprintf(target, sizeof target, "%s/target", dir);
    snprintf(link, sizeof link, "%s/link", dir);
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    snprintf(sub, sizeof sub, "%s/sub", dir);
    write_text(target, "keep\n");
    assert_int_equal(symlink(target, link), 0);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(mkdir(sub, 0700), 0);
    const struct {
        const char *path, *kind;
    } cases[] = {{link, "is a symbolic link"}, {fifo, "is a FIFO"}, {"/dev/null", "is a device node"},
                 {sub, "is a directory"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct alisa_err e = {{0}};
        assert_null(outfile_open(cases[i].path, part, sizeof part, "timeline", &e));
        if (!strstr(e.msg, cases[i].path) || !strstr(e.msg, cases[i].kind) ||
            !strstr(e.msg, "refusing to replace it"))
            fail_msg("case %zu: %s", i, e.msg);
    }
    struct stat st;
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(lstat(fifo, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    assert_true(has_text(target, "keep\n"));
    /* a part file planted as a link to the target is not written through */
    char out[512];
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(partlink, sizeof partlink, "%s/out.part", dir);
    assert_int_equal(symlink(target, partlink), 0);
    struct alisa_err e = {{0}};
    assert_null(outfile_open(out, part, sizeof part, "log", &e));
    assert_non_null(strstr(e.msg, "out.part: is a symbolic link"));
    assert_true(has_text(target, "keep\n"));
    /* the path turned into a link between open and close: refused then */
    FILE *f = outfile_open(target, part, sizeof part, "", &e);
    assert_non_null(f);
    char moved[600];
    snprintf(moved, sizeof moved, "%s/moved", dir);
    assert_int_equal(rename(target, moved), 0);
    assert_int_equal(symlink(moved, target), 0);
    assert_int_not_equal(outfile_close(f, part, target, 0, &e), 0);
    assert_int_equal(lstat(target, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_true(has_text(moved, "keep\n"));
    unlink(link), unlink(fifo), unlink(partlink), unlink(target), unlink(moved), rmdir(sub);
    tu_rmdir(dir);
    free(dir);
}

static void test_outfile_dash_is_standard_output(void **state)
{
    (void)state;
    char part[64] = "x";
    struct alisa_err e = {{0}};
    FILE *f = outfile_open("-", part, sizeof part, "", &e);
    assert_ptr_equal(f, stdout);
    assert_string_equal(part, "");
    assert_int_equal(outfile_close(f, part, "-", 0, &e), 0);
    assert_int_equal(fputs("", stdout) >= 0, 1); /* still open */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_outfile_replaces_a_file_only_when_the_write_completes),
        cmocka_unit_test(test_outfile_refuses_links_fifos_devices_and_directories),
        cmocka_unit_test(test_outfile_dash_is_standard_output),
    };
    return tu_result(cmocka_run_group_tests(tests, NULL, NULL));
}
