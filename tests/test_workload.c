/* Request streams: the same seed gives the same stream, the gaps average
 * 1 / rate whatever the burstiness while their spread follows the Gamma
 * shape, lengths stay in their ranges, a CSV reads back what was written,
 * and every kind of bad CSV is refused with its file, line and value. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"
#include "workload.h"

static struct wl_params params(uint32_t n, double rate, double burstiness, uint64_t seed)
{
    return (struct wl_params){.n_requests = n, .rate = rate, .burstiness = burstiness,
                              .prompt_min = 10, .prompt_max = 20, .output_min = 5,
                              .output_max = 5, .seed = seed};
}

static void test_same_seed_same_stream_other_seed_other(void **state)
{
    (void)state;
    struct alisa_err e = {{0}};
    struct workload a, b, c;
    struct wl_params p = params(500, 3, 1, 7);
    assert_int_equal(workload_generate(&p, &a, &e), 0);
    assert_int_equal(workload_generate(&p, &b, &e), 0);
    p.seed = 8;
    assert_int_equal(workload_generate(&p, &c, &e), 0);
    assert_int_equal(a.n, 500);
    assert_memory_equal(a.req, b.req, a.n * sizeof *a.req);
    int differ = 0;
    for (uint32_t i = 0; i < a.n; i++)
        differ |= a.req[i].arrival_s != c.req[i].arrival_s;
    assert_true(differ);
    assert_true(a.req[0].arrival_s == 0); /* the first request opens the stream */
    for (uint32_t i = 0; i < a.n; i++) {
        assert_true(a.req[i].prompt_len >= 10 && a.req[i].prompt_len <= 20);
        assert_int_equal(a.req[i].output_len, 5);
        if (i)
            assert_true(a.req[i].arrival_s >= a.req[i - 1].arrival_s);
    }
    workload_free(&a);
    workload_free(&b);
    workload_free(&c);
}

/* Gamma(k, 1 / (rate k)) gaps: mean 1 / rate, coefficient of variation
 * 1 / sqrt(k). 20,000 gaps: the sample mean is within 3% and the sample CV
 * within 5% of theirs for every seed (standard errors 0.7% and under 1.5%
 * at these shapes), so the bounds are not a matter of luck. */
static void test_gaps_have_the_rate_and_the_burstiness(void **state)
{
    (void)state;
    const double shapes[] = {0.25, 1, 4};
    for (int k = 0; k < 3; k++) {
        struct alisa_err e = {{0}};
        struct workload w;
        struct wl_params p = params(20001, 5, shapes[k], 11);
        assert_int_equal(workload_generate(&p, &w, &e), 0);
        double sum = 0, sq = 0;
        uint32_t n = w.n - 1;
        for (uint32_t i = 1; i < w.n; i++) {
            double g = w.req[i].arrival_s - w.req[i - 1].arrival_s;
            sum += g;
            sq += g * g;
        }
        double mean = sum / n, cv = sqrt(sq / n - mean * mean) / mean;
        if (fabs(mean - 0.2) > 0.03 * 0.2)
            fail_msg("burstiness %g: mean gap %g, expected 0.2", shapes[k], mean);
        if (fabs(cv - 1 / sqrt(shapes[k])) > 0.05 / sqrt(shapes[k]))
            fail_msg("burstiness %g: CV %g, expected %g", shapes[k], cv, 1 / sqrt(shapes[k]));
        workload_free(&w);
    }
}

static void test_rate_zero_sends_everything_at_once(void **state)
{
    (void)state;
    struct alisa_err e = {{0}};
    struct workload w;
    struct wl_params p = params(50, 0, 1, 3);
    assert_int_equal(workload_generate(&p, &w, &e), 0);
    for (uint32_t i = 0; i < w.n; i++)
        assert_true(w.req[i].arrival_s == 0);
    workload_free(&w);
}

static void test_bad_parameters_name_themselves(void **state)
{
    (void)state;
    struct alisa_err e = {{0}};
    struct workload w;
    struct wl_params p = params(0, 1, 1, 1);
    assert_int_equal(workload_generate(&p, &w, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "requests 0"));
    p = params(5, -1, 1, 1);
    assert_int_equal(workload_generate(&p, &w, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "rate -1"));
    p = params(5, 1, 0, 1);
    assert_int_equal(workload_generate(&p, &w, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "burstiness 0"));
    p = params(5, 1, 1, 1);
    p.prompt_min = 30;
    assert_int_equal(workload_generate(&p, &w, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "prompt length 30..20"));
    p = params(5, 1, 1, 1);
    p.output_min = p.output_max = 0;
    assert_int_equal(workload_generate(&p, &w, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "output length 0..0"));
    assert_null(w.req);
}

static void test_csv_reads_back_what_was_written(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "req.csv");
    struct alisa_err e = {{0}};
    struct workload a, b;
    struct wl_params p = params(300, 2, 0.5, 5);
    assert_int_equal(workload_generate(&p, &a, &e), 0);
    assert_int_equal(workload_write_csv(path, &a, &e), 0);
    assert_int_equal(workload_read_csv(path, &b, &e), 0);
    assert_int_equal(b.n, a.n);
    assert_memory_equal(a.req, b.req, a.n * sizeof *a.req); /* %.17g round-trips */
    /* columns in any order, others ignored, quoted fields as CSV has them */
    FILE *f = fopen(path, "w");
    fprintf(f, "output_len,note,arrival_s,prompt_len\n3,\"a, b\",0.5,7\n4,x,1.25,8\n");
    fclose(f);
    workload_free(&b);
    assert_int_equal(workload_read_csv(path, &b, &e), 0);
    assert_int_equal(b.n, 2);
    assert_true(b.req[1].arrival_s == 1.25);
    assert_int_equal(b.req[1].prompt_len, 8);
    assert_int_equal(b.req[1].output_len, 4);
    workload_free(&a);
    workload_free(&b);
    tu_rmdir(dir);
    free(dir);
}

/* A byte-order mark, a long column of someone else's and a line at the
 * limit are read; a line over it is refused without holding it. */
static void test_csv_reads_what_spreadsheets_write(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    const char *path = tu_path(dir, "x.csv");
    FILE *f = fopen(path, "w");
    fprintf(f, "\xEF\xBB\xBF" "arrival_s,prompt_len,output_len,note\n0,5,3,");
    for (int i = 0; i < 1000; i++)
        fputc('a', f);
    fprintf(f, "\n");
    fclose(f);
    struct alisa_err e = {{0}};
    struct workload w;
    if (workload_read_csv(path, &w, &e))
        fail_msg("%s", e.msg);
    assert_int_equal(w.n, 1);
    assert_int_equal(w.req[0].output_len, 3);
    workload_free(&w);
    f = fopen(path, "w");
    fprintf(f, "arrival_s,prompt_len,output_len,note\n0,5,3,");
    for (int i = 0; i < WORKLOAD_LINE_MAX; i++)
        fputc('a', f);
    fprintf(f, "\n");
    fclose(f);
    assert_int_equal(workload_read_csv(path, &w, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "line 2: longer than"));
    tu_rmdir(dir);
    free(dir);
}

/* Gaps so long the arrival times leave the doubles: refused by name. */
static void test_non_finite_arrivals_are_refused(void **state)
{
    (void)state;
    struct alisa_err e = {{0}};
    struct workload w;
    struct wl_params p = params(40, 1e-307, 1, 1);
    assert_int_equal(workload_generate(&p, &w, &e), ALISA_EINVAL);
    assert_non_null(strstr(e.msg, "not a finite number"));
    p = params(40, 1e-10, 1e-300, 1);
    assert_int_equal(workload_generate(&p, &w, &e), ALISA_EINVAL);
    assert_null(w.req);
}

static void expect_refused(const char *dir, const char *text, const char *msg)
{
    const char *path = tu_path(dir, "bad.csv");
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    struct alisa_err e = {{0}};
    struct workload w;
    int rc = workload_read_csv(path, &w, &e);
    if (rc == 0)
        fail_msg("accepted: %s", text);
    if (!strstr(e.msg, msg) || !strstr(e.msg, "bad.csv"))
        fail_msg("'%s': expected '%s' in '%s'", text, msg, e.msg);
    assert_null(w.req);
    assert_int_equal(w.n, 0);
}

static void test_bad_csv_names_file_line_and_value(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp();
    expect_refused(dir, "", "empty");
    expect_refused(dir, "arrival_s,prompt_len,output_len\n", "no requests");
    expect_refused(dir, "arrival_s,prompt_len\n0,5\n", "line 1: no column output_len");
    expect_refused(dir, "arrival_s,prompt_len,prompt_len,output_len\n", "named twice");
    expect_refused(dir, "arrival_s,prompt_len,output_len\n0,5,5\n1,x,5\n", "line 3: prompt_len 'x'");
    expect_refused(dir, "arrival_s,prompt_len,output_len\n0,5,0\n", "line 2: output_len '0'");
    expect_refused(dir, "arrival_s,prompt_len,output_len\n0,-5,3\n", "prompt_len '-5'");
    expect_refused(dir, "arrival_s,prompt_len,output_len\n0,99999999999,3\n", "99999999999");
    expect_refused(dir, "arrival_s,prompt_len,output_len\nnan,5,3\n", "arrival_s 'nan'");
    expect_refused(dir, "arrival_s,prompt_len,output_len\n-1,5,3\n", "arrival_s '-1'");
    expect_refused(dir, "arrival_s,prompt_len,output_len\n2,5,3\n1,5,3\n",
                   "line 3: arrival_s 1 before");
    expect_refused(dir, "arrival_s,prompt_len,output_len\n0,5,3,9\n", "more fields");
    expect_refused(dir, "arrival_s,prompt_len,output_len\n0,5\n", "line 2: no output_len");
    expect_refused(dir, "arrival_s,prompt_len,output_len\n0,\"5,3\n", "line 2");
    /* lines as the file numbers them: blank lines and quoted newlines count */
    expect_refused(dir, "arrival_s,prompt_len,output_len,note\n\n0,5,3,x\n\n\n1,5,z,y\n",
                   "line 6: output_len 'z'");
    expect_refused(dir, "note,arrival_s,prompt_len,output_len\n\"a\nb\",0,5,3\nc,1,5,-3\n",
                   "line 4: output_len '-3'");
    /* numbers as a CSV writes them (spaces around a field are libcsv's to
     * trim): no hex, infinities or signs on lengths */
    expect_refused(dir, "arrival_s,prompt_len,output_len\n0x1p-2,5,3\n", "arrival_s '0x1p-2'");
    expect_refused(dir, "arrival_s,prompt_len,output_len\ninf,5,3\n", "arrival_s 'inf'");
    expect_refused(dir, "arrival_s,prompt_len,output_len\n0,+5,3\n", "prompt_len '+5'");
    tu_rmdir(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_seed_same_stream_other_seed_other),
        cmocka_unit_test(test_gaps_have_the_rate_and_the_burstiness),
        cmocka_unit_test(test_rate_zero_sends_everything_at_once),
        cmocka_unit_test(test_bad_parameters_name_themselves),
        cmocka_unit_test(test_csv_reads_back_what_was_written),
        cmocka_unit_test(test_bad_csv_names_file_line_and_value),
        cmocka_unit_test(test_csv_reads_what_spreadsheets_write),
        cmocka_unit_test(test_non_finite_arrivals_are_refused),
    };
    return tu_result(cmocka_run_group_tests(tests, NULL, NULL));
}
