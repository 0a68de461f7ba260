/* Declared options (sim/cli/cli_opts.h) on a toy command: every value type
 * lands in its field, groups at their offsets, a custom reader's error and
 * the parser's own (a missing required option, an unknown one, a missing
 * value, a stray argument) are usage errors (exit 2) with one line naming
 * the option, the selection knobs join when asked, and the help is printed
 * from the same table the parser reads (names padded, continuation lines
 * under the column). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli_opts.h"
#include "selection.h"
#include "testutil.h"

struct toy {
    const char *name;
    uint32_t count;
    double share;
    uint64_t bytes;
    int flag, odd;
    struct sel_params sel;
};

static int read_odd(void *field, const char *opt, const char *arg, struct alisa_err *e)
{
    int v = atoi(arg);
    if (v % 2 == 0)
        return err_set(e, ALISA_EINVAL, "%s %s: expected an odd number", opt, arg);
    *(int *)field = v;
    return 0;
}

#define TO(f) offsetof(struct toy, f)
static const struct cli_opt toy_opts[] = {
    {"name", "NAME", CLI_STR, TO(name), NULL, 1, "a name (required)", 0},
    {"count", "N", CLI_U32, TO(count), NULL, 0, "a count", 'c'},
    {"share", "S", CLI_DOUBLE, TO(share), NULL, 0, "a share\nover two lines", 0},
    {"bytes", "N", CLI_BYTES, TO(bytes), NULL, 0, "bytes", 0},
    {"flag", NULL, CLI_FLAG, TO(flag), NULL, 0, "a flag", 0},
    {"odd", "N", CLI_FN, TO(odd), read_odd, 0, "an odd number", 0},
    {0}};
static const struct cli_group toy_groups[] = {{toy_opts, 0}, {cli_budget_opts, TO(sel)}};
static const struct cli_command_opts toy_command = {toy_groups, 2, 1, 1};
#undef TO

static void toy_usage(FILE *f) { fprintf(f, "usage: alisa toy\n"); }

/* Parses a NULL-terminated argument list (after the command's name) into
 * *t, with stderr and stdout sent to /dev/null. */
static int parse(struct toy *t, struct cli_knobs *k, int *next, ...)
{
    char *argv[32] = {"toy"};
    int argc = 1;
    va_list ap;
    va_start(ap, next);
    for (char *a; (a = va_arg(ap, char *));)
        argv[argc++] = a;
    va_end(ap);
    memset(t, 0, sizeof *t);
    t->sel.sparsity = SEL_SPARSITY_DEFAULT;
    memset(k, 0, sizeof *k);
    fflush(stderr);
    FILE *old = stderr;
    stderr = fopen("/dev/null", "w");
    int rc = cli_opts_parse(argc, argv, &toy_command, t, k, toy_usage, next);
    fclose(stderr);
    stderr = old;
    return rc;
}

static void test_every_type_lands_in_its_field(void **state)
{
    (void)state;
    struct toy t;
    struct cli_knobs k;
    int next = -1;
    assert_int_equal(parse(&t, &k, &next, "--name", "x", "-c", "7", "--share", "0.25",
                           "--bytes", "2KiB", "--flag", "--odd", "5", "--budget-tokens", "9",
                           "--sinks", "3", "rest", (char *)NULL),
                     0);
    assert_string_equal(t.name, "x");
    assert_int_equal(t.count, 7);
    assert_true(t.share == 0.25);
    assert_int_equal(t.bytes, 2048);
    assert_int_equal(t.flag, 1);
    assert_int_equal(t.odd, 5);
    assert_int_equal(t.sel.budget_tokens, 9);
    assert_true(t.sel.sparsity == SEL_SPARSITY_DEFAULT); /* untouched: the default */
    assert_int_equal(k.n, 1);
    assert_string_equal(k.name[0], "sinks");
    assert_true(k.value[0] == 3);
    assert_int_equal(next, 16); /* "rest", after the command and 15 option words */
}

static void test_bad_input_is_a_usage_error(void **state)
{
    (void)state;
    struct toy t;
    struct cli_knobs k;
    assert_int_equal(parse(&t, &k, NULL, "--count", "3", (char *)NULL), CLI_EXIT_USAGE);
    assert_int_equal(parse(&t, &k, NULL, "--name", "x", "--count", "3x", (char *)NULL),
                     CLI_EXIT_USAGE);
    assert_int_equal(parse(&t, &k, NULL, "--name", "x", "--odd", "4", (char *)NULL),
                     CLI_EXIT_USAGE);
    assert_int_equal(parse(&t, &k, NULL, "--name", "x", "--frob", (char *)NULL), CLI_EXIT_USAGE);
    assert_int_equal(parse(&t, &k, NULL, "--name", (char *)NULL), CLI_EXIT_USAGE);
    assert_int_equal(parse(&t, &k, NULL, "--name", "x", "--sinks", "two", (char *)NULL),
                     CLI_EXIT_USAGE);
    /* the same command without positionals refuses a stray argument */
    struct cli_command_opts strict = toy_command;
    strict.positionals = 0;
    char *argv[] = {"toy", "--name", "x", "stray", NULL};
    memset(&t, 0, sizeof t);
    FILE *old = stderr;
    stderr = fopen("/dev/null", "w");
    int rc = cli_opts_parse(4, argv, &strict, &t, &k, toy_usage, NULL);
    fclose(stderr);
    stderr = old;
    assert_int_equal(rc, CLI_EXIT_USAGE);
}

static void test_help_comes_from_the_same_table(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cli_opts_help(f, &toy_command, 16);
    fclose(f);
    /* names padded to column 16, continuations under it */
    assert_non_null(strstr(buf, "  --name NAME   a name (required)\n"));
    assert_non_null(strstr(buf, "  --share S     a share\n                over two lines\n"));
    assert_non_null(strstr(buf, "  -c, --count N a count\n"));
    assert_non_null(strstr(buf, "  --flag        a flag\n"));
    assert_non_null(strstr(buf, "  --sparsity S  KV sparsity"));
    assert_non_null(strstr(buf, "  --sinks N     streaming:"));
    assert_non_null(strstr(buf, "  -h, --help    this text\n"));
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_type_lands_in_its_field),
        cmocka_unit_test(test_bad_input_is_a_usage_error),
        cmocka_unit_test(test_help_comes_from_the_same_table),
    };
    return tu_result(cmocka_run_group_tests(tests, NULL, NULL));
}
