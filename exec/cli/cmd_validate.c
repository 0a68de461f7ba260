/* `alisa validate`: the simulator's prediction checked against the executor
 * (CPU or CUDA backend). Records a run with timings (record_trace), simulates the
 * recorded trace with the same scheduler options on a calibrated profile
 * (sim_run, system "executor"), and compares decode time step by step and
 * per category. A shell over cli_exec.h and simulate.h; the comparison's
 * arithmetic is validate_compare below, the only place it is done.
 */
#include <getopt.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "infile.h"
#include "outfile.h"
#include "calibrate.h"
#include "catalog.h"
#include "cli.h"
#include "cli_exec.h"
#include "cmds.h"
#include "cpu_ops.h"
#include "simulate.h"
#include "stattest.h"

struct validate_opts {
    const char *model, *tokenizer, *text, *trace, *steps, *timings, *measured;
    struct kv_opts kvo;
    uint32_t P, G, batch, offset, repeat;
    int json;
};

#define VO(f) offsetof(struct validate_opts, f)
static const struct cli_opt validate_own_opts[] = {
    {"model", "M", CLI_STR, VO(model), NULL, 1,
     "as alisa run --model: a catalog or short name, llama2.c\n"
     ".bin, GGUF file or Hugging Face checkpoint directory", 0},
    {"tokenizer", "T", CLI_STR, VO(tokenizer), NULL, 0,
     "tokenizer file (default: the catalog's or the GGUF's)", 0},
    {"text", "FILE", CLI_STR, VO(text), NULL, 1,
     "text", 0},
    {"profile", "FILE", CLI_STR, VO(kvo.profile), NULL, 1,
     "calibrated hardware profile (alisa calibrate -o)", 0},
    {"prompt-len", "P", CLI_U32, VO(P), NULL, 1,
     "prompt tokens per sequence", 0},
    {"gen-len", "G", CLI_U32, VO(G), NULL, 1,
     "decode steps (generated tokens per sequence)", 0},
    {"batch", "B", CLI_U32, VO(batch), NULL, 0,
     "sequences decoded together (default 1)", 0},
    {"offset", "K", CLI_U32, VO(offset), NULL, 0,
     "first token of the first window (default 0)", 0},
    {"trace", "X", CLI_STR, VO(trace), NULL, 0,
     "keep the recorded trace here (default: a temporary file)", 0},
    {"steps", "CSV", CLI_STR, VO(steps), NULL, 0,
     "per-step measured and predicted times", 0},
    {"repeat", "R", CLI_U32, VO(repeat), NULL, 0,
     "run the executor R times (1 to 31, default 1): each step's\n"
     "measured times are those of the run with the median time\n"
     "for that step (odd R: the middle one)", 0},
    {"timings", "FILE", CLI_STR, VO(timings), NULL, 0,
     "the executor's own timing lines (as alisa run --timings\n"
     "writes them: per forward call, per layer and category),\n"
     "run after run, each run closed by a line of the machine's\n"
     "weight-rate samples then and the runs' CPU share", 0},
    {"measured", "FILE", CLI_STR, VO(measured), NULL, 0,
     "re-predict: take the runs from FILE, written by an earlier\n"
     "--timings with the same options, instead of running the\n"
     "executor; --trace names the trace that run kept. The\n"
     "measurement stays, the prediction is the current model's", 0},
    {"json", NULL, CLI_FLAG, VO(json), NULL, 0,
     "print the comparison as JSON", 0},
    {0}};
static const struct cli_group validate_groups[] = {{validate_own_opts, 0},
                                                   KV_GROUPS(struct validate_opts, kvo)};
static const struct cli_command_opts validate_command = {validate_groups, 4, 1, 0};
#undef VO

void cmd_validate_usage(FILE *out)
{
    fprintf(out,
            "usage: alisa validate --model M --text FILE --profile PROFILE --prompt-len P\n"
            "                      --gen-len G [options]\n"
            "\n"
            "Checks the simulator against the executor (--backend cpu, the default, or\n"
            "cuda with a profile from alisa calibrate --backend cuda). The executor runs B windows of\n"
            "P + G tokens of the text teacher-forced, as alisa record does, under the\n"
            "scheduler (--selection, default dense; --placement, default gpu-only;\n"
            "capacities), with per-step timings, and records the trace. The simulator\n"
            "then replays that trace with the same options on the calibrated profile\n"
            "(alisa calibrate; its section unless --hardware names another), system\n"
            "`executor`, and the two are compared over the G decode steps: total time,\n"
            "mean absolute percentage error of the step times, and time per category\n"
            "(compute = GEMMs, attention and the head; transfer = KV moves between the\n"
            "arenas; recompute; schedule = the scheduler's own decisions and\n"
            "observations, priced from the profile's sched_ns_per_token). Prefill runs\n"
            "position by position to record its rows, and is priced so (each position a\n"
            "one-token step of the batch over the context so far); it is compared apart,\n"
            "and with the decode as the whole run (end to end: the paper's throughput).\n"
            "\n"
            "The machine's own speed is sampled too: the model's one-row weight pass\n"
            "(calib_weight_rate, on the executor's backend) for 0.5 s before and after\n"
            "the run and for 0.1 s\n"
            "between decode steps every 2 s of the run (outside the executor's timings),\n"
            "set beside the profile's weight_probe_gbps (the same probe at calibration;\n"
            "profiles without it: the rate their weight tables imply). Each step's\n"
            "prediction scaled by\n"
            "the profile's rate over the machine's rate then (interpolated between\n"
            "samples) gives the normalised error: the cost model's error with the\n"
            "machine's drift since calibration taken out. The plain error is the\n"
            "prediction as a user gets it; both are printed.\n"
            "\n"
            "A measurement can be predicted again: --timings FILE --trace X keep a run's\n"
            "timings, machine samples and trace; --measured FILE --trace X with the\n"
            "same options later compares them with what the model predicts then, so a\n"
            "change to the cost model is judged on the same runs (no executor runs).\n"
            "\n"
            );
    cli_opts_help(out, &validate_command, 21);
    fprintf(out,
            "\n"
            "examples (run as shown by tests/readme_test.sh, on the profile alisa calibrate's\n"
            "example writes):\n"
            "  alisa validate --model stories260K --text "
            "../shared/models/eval-text/tinystories_val_subset.txt --profile profile.ini "
            "--prompt-len 128 --gen-len 64 --batch 8 --selection swa --placement alisa "
            "--gpu-kv-bytes 992k --cpu-kv-bytes 1M\n");
}

#define VALIDATE_REPEAT_MAX 31

/* Measured and predicted decode time, totals and per category, seconds. */
struct validation {
    uint32_t repeat;          /* executor runs; measured = the per-step median */
    uint32_t steps;
    double meas_total, pred_total;
    double meas_compute, meas_transfer, meas_recompute, meas_schedule;
    double pred_compute, pred_transfer, pred_recompute, pred_schedule;
    double meas_prefill, pred_prefill;
    double mape, max_ape;     /* per-step absolute percentage errors, % */
    double rate_before, rate_after, rate_profile; /* one-row weight pass, GB/s */
    double rate_min, rate_max; /* over all samples, GB/s */
    double drift;              /* the run's rate / the profile's - 1 (0: no profile rate) */
    double cpu_share;          /* CPU backend: the process's CPU time over the runs' wall time
                                  and its threads (1: it had its cores; 0: not measured) */
    uint32_t rate_samples;
    double norm_total, norm_mape; /* predictions scaled by the machine's drift */
    double spread;            /* the runs' decode totals, (max - min) / median, %: the noise
                                 floor; < 0 with one run */
    /* the step-time distributions, measured against predicted (stattest.h):
     * two-sample KS and Welch's TOST at +-10% (< 0: fewer than 2 steps) */
    double ks_d, ks_p, tost_p;
};

#define VALIDATE_TOST_MARGIN 0.10 /* issue 49: equivalence within +-10% */

static double rel_err(double pred, double meas)
{
    return meas > 0 ? 100.0 * (pred - meas) / meas : 0.0;
}

/* One decode step as measured (from the timings) and predicted (from the
 * timeline), ms. */
struct step_times {
    double meas, meas_compute, meas_transfer, meas_recompute, meas_schedule;
    double pred, pred_compute, pred_transfer, pred_recompute, pred_schedule;
    double rate;      /* the machine's one-row weight rate then, GB/s (0: unknown) */
    double pred_norm; /* pred scaled by rate_profile / rate */
};

/* The machine's one-row weight rate (calib_weight_rate) sampled around and
 * during the executor's run: at step -0.5 (before), j - 0.5 (between decode
 * steps j - 1 and j, once SAMPLE_EVERY_S have passed since the last) and
 * G - 0.5 (after). */
#define SAMPLE_EVERY_S 2.0
#define SAMPLE_AROUND_S 0.5
#define SAMPLE_DURING_S 0.1
#define SAMPLES_MAX 64
struct machine {
    const struct llm_model *m;
    enum llm_backend kind; /* the executor's backend, which the samples run on */
    double next_s; /* sample between steps from this time on */
    uint32_t n;
    double at[SAMPLES_MAX], rate[SAMPLES_MAX];
};

static void machine_sample(struct machine *mc, double at, double min_s)
{
    double r = calib_weight_rate(mc->m, mc->kind, min_s);
    if (mc->n < SAMPLES_MAX && r > 0) { /* NAN: failed */
        mc->at[mc->n] = at;
        mc->rate[mc->n++] = r;
    }
    mc->next_s = cli_now_s() + SAMPLE_EVERY_S;
}

/* record_job's between-steps hook; keeps a slot for the sample after */
static void machine_between(void *ctx, uint32_t step)
{
    struct machine *mc = ctx;
    if (step > 0 && mc->n < SAMPLES_MAX - 1 && cli_now_s() >= mc->next_s)
        machine_sample(mc, step - 0.5, SAMPLE_DURING_S);
}

/* The rate at step j: linear between the samples either side, the nearest
 * past either end; 0 with no samples. */
static double machine_rate_at(const struct machine *mc, double j)
{
    if (mc->n == 0)
        return 0;
    if (j <= mc->at[0])
        return mc->rate[0];
    for (uint32_t i = 1; i < mc->n; i++)
        if (j <= mc->at[i]) {
            double w = (j - mc->at[i - 1]) / (mc->at[i] - mc->at[i - 1]);
            return mc->rate[i - 1] + w * (mc->rate[i] - mc->rate[i - 1]);
        }
    return mc->rate[mc->n - 1];
}

/* Parses the executor's timing lines: prefill into *prefill_s, decode step
 * j (position P + j) into st[j]. Returns 0, or an error naming the line. */
static int parse_timings(const char *buf, uint32_t P, uint32_t G, struct step_times *st,
                         double *prefill_s, struct alisa_err *e)
{
    uint32_t seen = 0, lineno = 0;
    *prefill_s = 0;
    for (const char *line = buf; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        lineno++;
        json_error_t je;
        json_t *j = json_loadb(line, len, 0, &je);
        json_t *layers = j ? json_object_get(j, "layers") : NULL;
        if (!j || !json_is_array(layers)) {
            json_decref(j);
            return err_set(e, ALISA_EINVAL, "timings line %u: not a timing record", lineno);
        }
        uint32_t pos = (uint32_t)json_integer_value(json_object_get(j, "pos"));
        double total = json_number_value(json_object_get(j, "total_us")) * 1e-6;
        if (pos < P) {
            *prefill_s += total;
        } else if (pos - P < G) {
            struct step_times *s = &st[pos - P];
            s->meas = total;
            double head = json_number_value(json_object_get(j, "head_us")) * 1e-6, acc = head;
            for (size_t l = 0; l < json_array_size(layers); l++) {
                json_t *x = json_array_get(layers, l);
                double g = json_number_value(json_object_get(x, "gemm_us")) * 1e-6;
                double a = json_number_value(json_object_get(x, "attention_us")) * 1e-6;
                double t = json_number_value(json_object_get(x, "transfer_us")) * 1e-6;
                double r = json_number_value(json_object_get(x, "recompute_us")) * 1e-6;
                double k = json_number_value(json_object_get(x, "schedule_us")) * 1e-6;
                s->meas_compute += g + a;
                s->meas_transfer += t;
                s->meas_recompute += r;
                s->meas_schedule += k;
                acc += g + a + t + r + k;
            }
            /* the head, and what no category timed (embedding look-up,
             * loop overhead), count as compute */
            s->meas_compute += total - acc + head;
            seen++;
        }
        json_decref(j);
        line = nl ? nl + 1 : NULL;
    }
    if (seen != G)
        return err_set(e, ALISA_EINVAL, "timings: %u decode steps recorded, %u expected", seen, G);
    return 0;
}

/* One run of the executor: its timing lines, the machine around it and its
 * prefill time. */
struct exec_run {
    char *buf;
    size_t len;
    struct machine mc;
    double prefill_s;
};

/* Each step's measured times from the run whose total for that step is the
 * median (the lower of the middle two for an even count), so its categories
 * still add up, with the machine's rate in that run then; runs holds run k's
 * step j at k * G + j. Returns the median prefill time. */
static double pick_median(const struct exec_run *ex, const struct step_times *runs,
                          uint32_t repeat, uint32_t G, struct step_times *st)
{
    size_t idx[VALIDATE_REPEAT_MAX];
    double meas[VALIDATE_REPEAT_MAX];
    for (uint32_t j = 0; j < G; j++) {
        for (uint32_t k = 0; k < repeat; k++)
            meas[k] = runs[(size_t)k * G + j].meas;
        gsl_sort_index(idx, meas, 1, repeat);
        size_t k = idx[(repeat - 1) / 2];
        st[j] = runs[k * G + j];
        st[j].rate = machine_rate_at(&ex[k].mc, j);
    }
    double pre[VALIDATE_REPEAT_MAX];
    for (uint32_t k = 0; k < repeat; k++)
        pre[k] = ex[k].prefill_s;
    gsl_sort(pre, 1, repeat);
    return pre[(repeat - 1) / 2];
}

/* The noise floor of one point: how far its runs' total decode times lie
 * apart, (max - min) / median in %, or -1 for a single run. */
static double run_spread(const struct step_times *runs, uint32_t repeat, uint32_t G)
{
    if (repeat < 2)
        return -1;
    double tot[VALIDATE_REPEAT_MAX] = {0};
    for (uint32_t k = 0; k < repeat; k++)
        for (uint32_t j = 0; j < G; j++)
            tot[k] += runs[(size_t)k * G + j].meas;
    gsl_sort(tot, 1, repeat);
    double med = gsl_stats_median_from_sorted_data(tot, 1, repeat);
    return med > 0 ? 100.0 * (tot[repeat - 1] - tot[0]) / med : -1;
}

/* Parses the simulator's timeline CSV (step,end_ms,compute_ms,recompute_ms,
 * transfer_ms,gpu_kv_bytes,cpu_kv_bytes,schedule_ms) into st[j].pred*, step
 * j's time being its end minus the previous step's (the prefill's end for
 * step 0). */
static int parse_timeline(const char *buf, double prefill_s, uint32_t G, struct step_times *st,
                          struct alisa_err *e)
{
    const char *line = strchr(buf, '\n'); /* past the header */
    double prev = prefill_s * 1e3;
    uint32_t n = 0;
    while (line && *++line && n < G) {
        unsigned step;
        double end, c, r, t, gk, ck, k;
        if (sscanf(line, "%u,%lf,%lf,%lf,%lf,%lf,%lf,%lf", &step, &end, &c, &r, &t, &gk, &ck, &k) !=
                8 || step != n)
            return err_set(e, ALISA_EINVAL, "simulator timeline line %u: cannot read", n + 2);
        st[n].pred = (end - prev) * 1e-3;
        st[n].pred_compute = c * 1e-3;
        st[n].pred_recompute = r * 1e-3;
        st[n].pred_transfer = t * 1e-3;
        st[n].pred_schedule = k * 1e-3;
        prev = end;
        n++;
        line = strchr(line, '\n');
    }
    if (n != G)
        return err_set(e, ALISA_EINVAL, "simulator timeline: %u steps, %u expected", n, G);
    return 0;
}

/* Totals, categories and per-step errors into v; with v->rate_profile and
 * each step's rate known, the normalised prediction and its errors too. */
static void validate_compare(struct step_times *st, uint32_t G, struct validation *v)
{
    double ape_sum = 0, norm_ape_sum = 0;
    int norm = v->rate_profile > 0;
    for (uint32_t j = 0; j < G; j++)
        norm = norm && st[j].rate > 0;
    v->steps = G;
    v->max_ape = 0;
    for (uint32_t j = 0; j < G; j++) {
        struct step_times *s = &st[j];
        v->meas_total += s->meas;
        v->pred_total += s->pred;
        v->meas_compute += s->meas_compute;
        v->meas_transfer += s->meas_transfer;
        v->meas_recompute += s->meas_recompute;
        v->meas_schedule += s->meas_schedule;
        v->pred_compute += s->pred_compute;
        v->pred_transfer += s->pred_transfer;
        v->pred_recompute += s->pred_recompute;
        v->pred_schedule += s->pred_schedule;
        double ape = fabs(rel_err(s->pred, s->meas));
        ape_sum += ape;
        v->max_ape = ape > v->max_ape ? ape : v->max_ape;
        s->pred_norm = norm ? s->pred * v->rate_profile / s->rate : 0;
        v->norm_total += s->pred_norm;
        norm_ape_sum += fabs(rel_err(s->pred_norm, s->meas));
    }
    v->mape = G ? ape_sum / G : 0;
    v->norm_mape = G && norm ? norm_ape_sum / G : 0;
}

/* The KS and TOST tests of the measured against the predicted step times
 * into v (-1 each when there are fewer than 2 steps). */
static int validate_tests(const struct step_times *st, uint32_t G, struct validation *v,
                          struct alisa_err *e)
{
    v->ks_d = v->ks_p = v->tost_p = -1;
    if (G < 2)
        return 0;
    double *m = malloc(2 * (size_t)G * sizeof *m);
    if (!m)
        return err_set(e, ALISA_ENOMEM, "out of memory for %u step times", G);
    double *p = m + G;
    for (uint32_t j = 0; j < G; j++) {
        m[j] = st[j].meas;
        p[j] = st[j].pred;
    }
    int rc = stattest_ks2(m, G, p, G, &v->ks_d, &v->ks_p, e);
    if (!rc)
        rc = stattest_tost(m, G, p, G, VALIDATE_TOST_MARGIN, &v->tost_p, e);
    free(m);
    return rc;
}

static int write_steps(const char *path, const struct step_times *st, uint32_t P, uint32_t G,
                       struct alisa_err *e)
{
    char part[1100];
    FILE *f = outfile_open(path, part, sizeof part, "steps file", e);
    if (!f)
        return ALISA_EIO;
    fprintf(f, "step,pos,measured_ms,predicted_ms,measured_compute_ms,predicted_compute_ms,"
               "measured_transfer_ms,predicted_transfer_ms,measured_recompute_ms,"
               "predicted_recompute_ms,measured_schedule_ms,predicted_schedule_ms,"
               "machine_rate_gbps,normalised_predicted_ms\n");
    for (uint32_t j = 0; j < G; j++) {
        const struct step_times *s = &st[j];
        /* 9 significant digits, not 4 decimals: a loaded machine's rate of
         * 0.011 GB/s rounded to 4 decimals moved a reader's recomputation
         * by 0.5% (issue 41) */
        fprintf(f, "%u,%u,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g\n", j,
                P + j, s->meas * 1e3, s->pred * 1e3, s->meas_compute * 1e3,
                s->pred_compute * 1e3, s->meas_transfer * 1e3, s->pred_transfer * 1e3,
                s->meas_recompute * 1e3, s->pred_recompute * 1e3, s->meas_schedule * 1e3,
                s->pred_schedule * 1e3, s->rate, s->pred_norm * 1e3);
    }
    return outfile_close(f, part, path, 0, e);
}

/* The executor's timing lines as they were captured, run after run, each
 * run closed by its machine line ({"machine": {"at": [...], "rate": [...]},
 * "cpu_share": x}: what read_measured reads back), written whole or not at
 * all (through PATH.part). */
static int write_timings(const char *path, const struct exec_run *ex, uint32_t repeat,
                         double cpu_share, struct alisa_err *e)
{
    char part[1100];
    FILE *f = outfile_open(path, part, sizeof part, "timings file", e);
    if (!f)
        return ALISA_EIO;
    for (uint32_t k = 0; k < repeat; k++) {
        fwrite(ex[k].buf, 1, ex[k].len, f);
        fputs("{\"machine\": {\"at\": [", f);
        for (uint32_t i = 0; i < ex[k].mc.n; i++)
            fprintf(f, "%s%.17g", i ? ", " : "", ex[k].mc.at[i]);
        fputs("], \"rate\": [", f);
        for (uint32_t i = 0; i < ex[k].mc.n; i++)
            fprintf(f, "%s%.17g", i ? ", " : "", ex[k].mc.rate[i]);
        fprintf(f, "]}, \"cpu_share\": %.17g}\n", cpu_share);
    }
    return outfile_close(f, part, path, 0, e);
}

/* One machine line of a --measured file into mc (its samples, at most
 * SAMPLES_MAX, each at a finite step with a positive rate) and
 * *cpu_share. Returns 0, or an error naming path and line. */
static int read_machine_line(json_t *j, const char *path, uint32_t lineno, struct machine *mc,
                             double *cpu_share, struct alisa_err *e)
{
    json_t *mj = json_object_get(j, "machine"), *at = json_object_get(mj, "at"),
           *rate = json_object_get(mj, "rate"), *share = json_object_get(j, "cpu_share");
    if (!json_is_array(at) || !json_is_array(rate) || json_array_size(at) != json_array_size(rate))
        return err_set(e, ALISA_EINVAL, "%s: line %u: field machine: expected \"at\" and "
                       "\"rate\" arrays of one length", path, lineno);
    if (json_array_size(at) > SAMPLES_MAX)
        return err_set(e, ALISA_EINVAL, "%s: line %u: field machine: %zu samples, at most %d",
                       path, lineno, json_array_size(at), SAMPLES_MAX);
    mc->n = 0;
    for (size_t i = 0; i < json_array_size(at); i++) {
        double a = json_number_value(json_array_get(at, i)),
               r = json_number_value(json_array_get(rate, i));
        if (!json_is_number(json_array_get(at, i)) || !json_is_number(json_array_get(rate, i)) ||
            !isfinite(a) || !(r > 0) || !isfinite(r))
            return err_set(e, ALISA_EINVAL, "%s: line %u: field machine: sample %zu is not a step "
                           "and a positive rate", path, lineno, i);
        mc->at[mc->n] = a;
        mc->rate[mc->n++] = r;
    }
    double c = json_number_value(share);
    if (!json_is_number(share) || !(c >= 0) || !isfinite(c))
        return err_set(e, ALISA_EINVAL, "%s: line %u: field cpu_share: expected a number >= 0",
                       path, lineno);
    *cpu_share = c;
    return 0;
}

/* The runs of a --timings file (write_timings) into ex[0 .. *repeat): each
 * run's timing lines as one buffer (parse_timings reads it) and its machine
 * samples; *cpu_share from the last machine line. Returns 0, or an error
 * naming the file and line (a run not closed by its machine line, more
 * than VALIDATE_REPEAT_MAX runs, a line that is not JSON). */
static int read_measured(const char *path, struct exec_run *ex, uint32_t *repeat,
                         double *cpu_share, struct alisa_err *e)
{
    FILE *f = infile_fopen(path, "measured timings", e);
    if (!f)
        return ALISA_EIO;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    uint32_t lineno = 0, k = 0;
    FILE *run = NULL;
    int rc = 0;
    while (!rc && (len = getline(&line, &cap, f)) > 0) {
        lineno++;
        json_error_t je;
        json_t *j = json_loadb(line, (size_t)len, 0, &je);
        if (!j) {
            rc = err_set(e, ALISA_EINVAL, "%s: line %u: not JSON (%s)", path, lineno, je.text);
            break;
        }
        if (k == VALIDATE_REPEAT_MAX)
            rc = err_set(e, ALISA_EINVAL, "%s: line %u: more than %d runs", path, lineno,
                         VALIDATE_REPEAT_MAX);
        else if (!run && !(run = open_memstream(&ex[k].buf, &ex[k].len)))
            rc = err_set(e, ALISA_ENOMEM, "out of memory for %s", path);
        else if (json_object_get(j, "machine")) {
            fclose(run);
            run = NULL;
            rc = read_machine_line(j, path, lineno, &ex[k].mc, cpu_share, e);
            k++;
        } else {
            fwrite(line, 1, (size_t)len, run);
        }
        json_decref(j);
    }
    if (run) {
        fclose(run);
        if (!rc)
            rc = err_set(e, ALISA_EINVAL, "%s: line %u: run %u has no machine line (a file "
                         "alisa validate --timings wrote, whole?)", path, lineno, k + 1);
    }
    if (!rc && ferror(f))
        rc = err_set(e, ALISA_EIO, "%s: cannot read", path);
    if (!rc && k == 0)
        rc = err_set(e, ALISA_EINVAL, "%s: no run in it", path);
    free(line);
    fclose(f);
    *repeat = k;
    return rc;
}

static void print_row(const char *what, double meas, double pred)
{
    if (meas > 0)
        printf("  %-22s %12.3f %12.3f %+9.1f%%\n", what, meas * 1e3, pred * 1e3,
               rel_err(pred, meas));
    else
        printf("  %-22s %12.3f %12.3f %10s\n", what, meas * 1e3, pred * 1e3, "-");
}

/* What the command line asks for. */

#define REPEAT_UNSET UINT32_MAX /* no --repeat given */

/* Parses argv into o. Returns 0, or an exit code (usage printed). */
static int validate_parse(int argc, char **argv, struct validate_opts *o)
{
    *o = (struct validate_opts){.kvo = {.sel = {.sparsity = SEL_SPARSITY_DEFAULT}}, .batch = 1,
                                .repeat = REPEAT_UNSET};
    int req = cli_opts_parse(argc, argv, &validate_command, o, &o->kvo.knobs, cmd_validate_usage,
                             NULL);
    if (req || (req = kv_opts_check(&o->kvo)))
        return req;
    if (!o->P || !o->G)
        return cli_usage_error(cmd_validate_usage, "%s 0: at least 1 token",
                               o->P ? "--gen-len" : "--prompt-len");
    if (!o->batch)
        return cli_usage_error(cmd_validate_usage, "--batch 0: at least 1 sequence");
    if (o->repeat != REPEAT_UNSET && (o->repeat < 1 || o->repeat > VALIDATE_REPEAT_MAX))
        return cli_usage_error(cmd_validate_usage, "--repeat %u: between 1 and %d runs",
                               o->repeat, VALIDATE_REPEAT_MAX);
    if (o->measured && !o->trace)
        return cli_usage_error(cmd_validate_usage, "--measured %s: needs --trace, the trace "
                               "that run kept", o->measured);
    if (o->measured && o->timings)
        return cli_usage_error(cmd_validate_usage, "--measured and --timings: the runs are "
                               "read, not taken");
    if (!o->measured && o->repeat == REPEAT_UNSET) /* --measured: as many as the file holds */
        o->repeat = 1;
    /* always under the scheduler, as the simulator runs */
    if (!o->kvo.selection)
        o->kvo.selection = "dense";
    if (!o->kvo.placement)
        o->kvo.placement = "gpu-only";
    return 0;
}

/* A run's machine samples into v's range, first and last rate. */
static void machine_stats(const struct machine *mc, struct validation *v)
{
    for (uint32_t i = 0; i < mc->n; i++) {
        double q = mc->rate[i];
        v->rate_min = v->rate_samples == 0 || q < v->rate_min ? q : v->rate_min;
        v->rate_max = q > v->rate_max ? q : v->rate_max;
        v->rate_before = v->rate_samples++ == 0 ? q : v->rate_before;
        v->rate_after = q;
    }
}

/* The runs of an earlier --timings file (o->measured) in place of the
 * executor's: each run's timings into runs, its machine samples into v. */
static int validate_reread(struct validate_opts *o, struct exec_run *ex, struct step_times **runs,
                           struct validation *v, struct alisa_err *e)
{
    uint32_t k;
    int rc = read_measured(o->measured, ex, &k, &v->cpu_share, e);
    if (!rc && o->repeat != REPEAT_UNSET && o->repeat != k)
        rc = err_set(e, ALISA_EINVAL, "%s: %u runs, --repeat says %u", o->measured, k, o->repeat);
    if (rc)
        return rc;
    o->repeat = v->repeat = k;
    if (!(*runs = calloc((size_t)k * o->G, sizeof **runs)))
        return err_set(e, ALISA_ENOMEM, "out of memory for timings");
    for (uint32_t r = 0; r < k && !rc; r++) {
        rc = parse_timings(ex[r].buf, o->P, o->G, *runs + (size_t)r * o->G, &ex[r].prefill_s, e);
        if (rc) { /* parse_timings names the line, this names the file and run */
            char inner[sizeof e->msg];
            memcpy(inner, e->msg, sizeof inner);
            rc = err_set(e, rc, "%s: run %u: %s", o->measured, r + 1, inner);
        }
        machine_stats(&ex[r].mc, v);
    }
    return rc;
}

/* The executor measured o->repeat times on the model's backend: each run's
 * trace (the last run's stays in o->trace), its per-step timings into
 * runs (repeat, G), and the machine's one-row weight rate around and
 * during it, against what the profile says: how far this machine has moved
 * since calibration. */
static int validate_measure(const struct validate_opts *o, struct loaded *l,
                            enum llm_backend kind, struct exec_run *ex, struct step_times *runs,
                            struct validation *v, struct alisa_err *e)
{
    struct record_job job = {.l = l, .text = o->text, .out = o->trace, .P = o->P, .G = o->G,
                             .batch = o->batch, .offset = o->offset, .threshold = 0,
                             .kv = o->kvo, .between = machine_between,
                             .progress = o->json ? NULL : "validate, executor"};
    int rc = 0;
    /* the CPU the process got while the executor ran: busy work beside it
     * takes cores, which the weight-rate probes (memory) do not see */
    double wall = 0, cpu = 0;
    for (uint32_t k = 0; k < o->repeat && !rc; k++) {
        struct exec_run *x = &ex[k];
        FILE *tf = open_memstream(&x->buf, &x->len);
        if (!tf)
            return err_set(e, ALISA_ENOMEM, "out of memory for timings");
        x->mc.m = l->m;
        x->mc.kind = kind;
        job.timings = tf;
        job.between_ctx = &x->mc;
        machine_sample(&x->mc, -0.5, SAMPLE_AROUND_S);
        fprintf(stderr, "alisa: executor, run %u of %u: %u x (%u + %u) tokens, %s / %s\n", k + 1,
                o->repeat, o->batch, o->P, o->G, o->kvo.selection, o->kvo.placement);
        struct timespec c0, c1;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
        double w0 = cli_now_s();
        rc = record_trace(&job, e);
        wall += cli_now_s() - w0;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
        cpu += (double)(c1.tv_sec - c0.tv_sec) + 1e-9 * (double)(c1.tv_nsec - c0.tv_nsec);
        machine_sample(&x->mc, o->G - 0.5, SAMPLE_AROUND_S);
        fclose(tf);
        if (!rc)
            rc = parse_timings(x->buf, o->P, o->G, runs + (size_t)k * o->G, &x->prefill_s, e);
        machine_stats(&x->mc, v);
    }
    if (kind == LLM_BACKEND_CPU && wall > 0)
        v->cpu_share = cpu / (wall * cpu_threads());
    return rc;
}

/* The simulator on the recorded trace with the same options and
 * capacities (system `executor`): its result into r, its per-step timeline
 * into *sbuf (malloc'd, the caller frees), the device arena's bytes into
 * *gpu_kv. */
static int validate_predict(const struct validate_opts *o, const struct llm_model *m,
                            enum llm_backend kind, const struct hw_profile *hw,
                            struct sim_result *r, char **sbuf, uint64_t *gpu_kv,
                            struct alisa_err *e)
{
    struct model_shape shape;
    llm_model_shape(m, &shape);
    uint64_t cpu_kv;
    /* the executor's arenas: FP32 on the CPU backend, FP16 on the GPU */
    enum kv_precision prec = tiered_precision(o->kvo.int8, kind);
    tiered_capacity(o->kvo.gpu_bytes, o->kvo.cpu_bytes, &m->c, o->batch, o->P + o->G, prec, gpu_kv,
                    &cpu_kv);
    struct sim_config cfg = {.trace = o->trace, .model = &shape, .hw = hw,
                             .system = sim_system_find("executor"), .batch = o->batch,
                             .prompt_len = o->P, .gen_len = o->G, .sel_params = o->kvo.sel,
                             .precision = prec,
                             .gpu_kv_bytes = (double)*gpu_kv, .cpu_mem_bytes = (double)cpu_kv,
                             .prefill_stepwise = 1};
    ALISA_ASSERT(cfg.system);
    if (!(cfg.sel = selection_find(o->kvo.selection)))
        return err_set(e, ALISA_ENOTFOUND, "unknown selection '%s'", o->kvo.selection);
    if (!(cfg.place = placement_find(o->kvo.placement)))
        return err_set(e, ALISA_ENOTFOUND, "unknown placement '%s'", o->kvo.placement);
    int rc = sim_resolve(&cfg, e);
    size_t slen = 0;
    FILE *sf = rc ? NULL : open_memstream(sbuf, &slen);
    if (!rc && !sf)
        rc = err_set(e, ALISA_ENOMEM, "out of memory for the timeline");
    if (!rc)
        rc = sim_run(&cfg, r, sf, e);
    if (sf)
        fclose(sf);
    if (!rc && r->oom)
        rc = err_set(e, ALISA_EINVAL, "the simulator ran out of memory where the executor did "
                     "not: %s", r->oom_reason);
    return rc;
}

static void validate_report_json(const struct validate_opts *o, const char *model,
                                 const struct hw_profile *hw, const struct validation *v,
                                 const struct sim_result *r, uint64_t gpu_kv)
{
    json_t *j = json_pack(
        "{s:s, s:s, s:s, s:s, s:f, s:I, s:i, s:i, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:f, "
        "s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:I, s:I, s:f, s:f, s:f, s:f}",
        "model", model, "profile", hw->name, "selection", o->kvo.selection, "placement",
        o->kvo.placement, "sparsity", o->kvo.sel.sparsity, "gpu_kv_bytes", (json_int_t)gpu_kv,
        "batch", (int)o->batch, "prompt_len", (int)o->P, "gen_len", (int)o->G, "steps",
        (int)v->steps, "measured_s", v->meas_total, "predicted_s", v->pred_total,
        "total_error_pct", rel_err(v->pred_total, v->meas_total), "mape_pct", v->mape,
        "max_ape_pct", v->max_ape, "measured_compute_s", v->meas_compute, "predicted_compute_s",
        v->pred_compute, "measured_transfer_s", v->meas_transfer, "predicted_transfer_s",
        v->pred_transfer, "measured_recompute_s", v->meas_recompute, "predicted_recompute_s",
        v->pred_recompute, "measured_schedule_s", v->meas_schedule, "measured_prefill_s",
        v->meas_prefill, "predicted_prefill_s", v->pred_prefill, "recomputed_tokens",
        r->recomputed_tokens, "bytes_h2d", r->bytes_h2d, "bytes_d2h", r->bytes_d2h,
        "phase2_step", (json_int_t)r->phase2_step, "phase3_step", (json_int_t)r->phase3_step,
        "weight_rate_before_gbps", v->rate_before, "weight_rate_after_gbps", v->rate_after,
        "weight_rate_profile_gbps", v->rate_profile, "predicted_schedule_s", v->pred_schedule);
    int norm = v->norm_total > 0;
    json_object_set_new(j, "repeat", json_integer(v->repeat));
    json_object_set_new(j, "weight_rate_samples", json_integer(v->rate_samples));
    json_object_set_new(j, "weight_rate_min_gbps", json_real(v->rate_min));
    json_object_set_new(j, "machine_drift_pct", json_real(100 * v->drift));
    json_object_set_new(j, "cpu_share", json_real(v->cpu_share));
    json_object_set_new(j, "weight_rate_max_gbps", json_real(v->rate_max));
    json_object_set_new(j, "normalised_predicted_s", norm ? json_real(v->norm_total) : json_null());
    json_object_set_new(j, "normalised_total_error_pct",
                        norm ? json_real(rel_err(v->norm_total, v->meas_total)) : json_null());
    json_object_set_new(j, "normalised_mape_pct", norm ? json_real(v->norm_mape) : json_null());
    json_object_set_new(j, "repeat_spread_pct", v->spread >= 0 ? json_real(v->spread) : json_null());
    json_object_set_new(j, "step_ks_d", v->ks_d >= 0 ? json_real(v->ks_d) : json_null());
    json_object_set_new(j, "step_ks_p", v->ks_p >= 0 ? json_real(v->ks_p) : json_null());
    json_object_set_new(j, "step_tost_p", v->tost_p >= 0 ? json_real(v->tost_p) : json_null());
    json_object_set_new(j, "step_tost_margin_pct", json_real(100 * VALIDATE_TOST_MARGIN));
    /* the whole run, as the paper's throughput counts it (issue 49) */
    json_object_set_new(j, "prefill_error_pct", json_real(rel_err(v->pred_prefill, v->meas_prefill)));
    json_object_set_new(j, "measured_end_to_end_s", json_real(v->meas_prefill + v->meas_total));
    json_object_set_new(j, "predicted_end_to_end_s", json_real(v->pred_prefill + v->pred_total));
    json_object_set_new(j, "end_to_end_error_pct",
                        json_real(rel_err(v->pred_prefill + v->pred_total,
                                          v->meas_prefill + v->meas_total)));
    json_dumpf(j, stdout, JSON_REAL_PRECISION(6));
    printf("\n");
    json_decref(j);
}

static void validate_report_text(const struct validate_opts *o, const char *model,
                                 const struct hw_profile *hw, const struct validation *v,
                                 const struct sim_result *r)
{
    printf("validate: %s, %u x (%u + %u) tokens, %s / %s, profile [%s]\n", model, o->batch, o->P,
           o->G, o->kvo.selection, o->kvo.placement, hw->name);
    char p2[32] = "never", p3[32] = "never";
    if (r->phase2_step >= 0)
        snprintf(p2, sizeof p2, "from step %lld", (long long)r->phase2_step);
    if (r->phase3_step >= 0)
        snprintf(p3, sizeof p3, "from step %lld", (long long)r->phase3_step);
    printf("  phases: offload %s, drop %s; %.0f tokens recomputed\n", p2, p3,
           r->recomputed_tokens);
    printf("  %-22s %12s %12s %10s\n", "decode, ms", "measured", "predicted", "error");
    print_row("total", v->meas_total, v->pred_total);
    print_row("compute", v->meas_compute, v->pred_compute);
    print_row("transfer", v->meas_transfer, v->pred_transfer);
    print_row("recompute", v->meas_recompute, v->pred_recompute);
    print_row("schedule", v->meas_schedule, v->pred_schedule);
    printf("  per-step error: MAPE %.1f%%, largest %.1f%% over %u steps\n", v->mape, v->max_ape,
           v->steps);
    if (v->ks_p >= 0)
        printf("  step times, measured against predicted: KS D %.3f (p %.3g: %s), TOST at "
               "+-%.0f%% p %.3g (%s at 0.05)\n", v->ks_d, v->ks_p,
               v->ks_p < 0.05 ? "distributed differently" : "not told apart", 100 * VALIDATE_TOST_MARGIN,
               v->tost_p, v->tost_p < 0.05 ? "equivalent" : "not shown equivalent");
    if (v->repeat > 1)
        printf("  measured: each step the median of %u executor runs; their decode totals lie "
               "%.1f%% apart (max - min over the median: the noise floor)\n", v->repeat,
               v->spread);
    printf("  %-22s %12s %12s %10s\n", "whole run, ms", "measured", "predicted", "error");
    print_row("prefill", v->meas_prefill, v->pred_prefill);
    print_row("end to end", v->meas_prefill + v->meas_total, v->pred_prefill + v->pred_total);
    printf("  machine: one-row weight pass %.2f GB/s before the run, %.2f after, %.2f to %.2f "
           "over %u samples; the profile says %.2f (%+.0f%%)\n", v->rate_before, v->rate_after,
           v->rate_min, v->rate_max, v->rate_samples, v->rate_profile,
           rel_err(v->rate_profile, 0.5 * (v->rate_before + v->rate_after)));
    if (v->norm_total > 0)
        printf("  normalised (each step's prediction x profile rate / machine rate then): "
               "total %.3f ms, error %+.1f%%, MAPE %.1f%%\n", v->norm_total * 1e3,
               rel_err(v->norm_total, v->meas_total), v->norm_mape);
}

/* The catalog with the profile, and the profile's hardware in it. */
static int validate_profile(struct validate_opts *o, struct catalog *cat,
                            const struct hw_profile **hw, struct alisa_err *e)
{
    int rc = kv_opts_catalog(&o->kvo, cat, hw, e);
    if (rc)
        return rc;
    if (!(*hw)->serial)
        fprintf(stderr, "alisa: warning: profile [%s] is not serial (not from alisa calibrate): "
                "the simulator will overlap copies with compute, which this executor does not\n",
                (*hw)->name);
    return 0;
}

/* Warns, with the figures, when the machine ran the executor at a speed the
 * profile's noise does not cover (issue 41: a held-out point read -92% on a
 * loaded machine against -3.6% quiet): the error then mixes the model's and
 * the machine's. The JSON carries machine_drift_pct beside it. */
static void validate_warn_drift(struct validation *v, const struct hw_profile *hw)
{
    if (v->rate_profile <= 0 || v->rate_samples == 0)
        return;
    double run = 0.5 * (v->rate_before + v->rate_after);
    double noise = hw->weight_probe_spread > CALIB_QUIET_SPREAD ? hw->weight_probe_spread
                                                                : CALIB_QUIET_SPREAD;
    v->drift = run / v->rate_profile - 1;
    if (fabs(v->drift) > noise)
        fprintf(stderr, "alisa validate: warning: this machine's weight rate was %.3g GB/s during "
                "the run (%.3g to %.3g), %+.0f%% from the profile's %.3g, beyond its noise of "
                "%.0f%%: other work is using the cores or the machine differs from calibration, "
                "and the error below carries it (check uptime)\n", run, v->rate_min, v->rate_max,
                100 * v->drift, v->rate_profile, 100 * noise);
    /* one thread that got under 90% of a core was made to wait: other work
     * shares the cores (with more threads, idle waits lower the share by
     * themselves, so it is reported, not judged) */
    if (v->cpu_share > 0 && cpu_threads() == 1 && v->cpu_share < 0.9)
        fprintf(stderr, "alisa validate: warning: the executor had %.0f%% of a core while it "
                "ran (its one thread waited for the CPU the rest of the time): other work is "
                "using the cores, and the error below carries it (check uptime)\n",
                100 * v->cpu_share);
}

int cmd_validate(int argc, char **argv)
{
    struct validate_opts o;
    int rc = validate_parse(argc, argv, &o);
    if (rc)
        return rc;
    struct alisa_err e = {{0}};
    enum llm_backend kind;
    char said[512];
    if (llm_backend_choose(o.kvo.backend ? o.kvo.backend : "cpu", &kind, said, sizeof said, &e))
        return cli_fail(&e);
    struct catalog cat;
    const struct hw_profile *hw;
    if (validate_profile(&o, &cat, &hw, &e))
        return cli_fail(&e);
    struct loaded l;
    if (load_model(&l, o.model, o.tokenizer, 1, &o.kvo, &e)) {
        catalog_deinit(&cat);
        return cli_fail(&e);
    }
    char what[64];
    snprintf(what, sizeof what, "--prompt-len %u + --gen-len %u", o.P, o.G);
    if ((rc = loaded_context_check(&l, (uint64_t)o.P + o.G, cmd_validate_usage, what)) ||
        (rc = loaded_batch_check(&l, o.batch, (uint64_t)o.P + o.G, cmd_validate_usage))) {
        catalog_deinit(&cat);
        return rc;
    }
    char tmp[] = "/tmp/alisa-validate-XXXXXX";
    if (!o.trace) {
        int fd = mkstemp(tmp);
        if (fd < 0)
            rc = err_set(&e, ALISA_EIO, "%s: cannot create a temporary trace", tmp);
        else
            close(fd);
        o.trace = tmp;
    }
    /* every run's slot, so that a --measured file's runs need no count first */
    struct exec_run *ex = rc ? NULL : calloc(VALIDATE_REPEAT_MAX, sizeof *ex);
    struct step_times *runs =
        rc || o.measured ? NULL : calloc((size_t)o.repeat * o.G, sizeof *runs);
    struct step_times *st = rc ? NULL : calloc(o.G, sizeof *st);
    if (!rc && (!ex || (!runs && !o.measured) || !st))
        rc = err_set(&e, ALISA_ENOMEM, "out of memory for timings");
    struct validation v = {.repeat = o.repeat};
    v.rate_profile = calib_profile_weight_rate(l.m, hw);
    char *sbuf = NULL;
    struct sim_result r;
    uint64_t gpu_kv = 0;
    if (!rc && o.measured)
        rc = validate_reread(&o, ex, &runs, &v, &e);
    else if (!rc)
        rc = validate_measure(&o, &l, kind, ex, runs, &v, &e);
    if (!rc)
        rc = validate_predict(&o, l.m, kind, hw, &r, &sbuf, &gpu_kv, &e);
    if (!rc) {
        v.meas_prefill = pick_median(ex, runs, o.repeat, o.G, st);
        v.spread = run_spread(runs, o.repeat, o.G);
        rc = parse_timeline(sbuf, r.prefill_s, o.G, st, &e);
    }
    if (!rc) {
        validate_compare(st, o.G, &v);
        v.pred_prefill = r.prefill_s;
        validate_warn_drift(&v, hw);
        rc = validate_tests(st, o.G, &v, &e);
    }
    if (!rc && o.steps)
        rc = write_steps(o.steps, st, o.P, o.G, &e);
    if (!rc && o.timings)
        rc = write_timings(o.timings, ex, o.repeat, v.cpu_share, &e);
    if (!rc && o.json)
        validate_report_json(&o, l.m->name, hw, &v, &r, gpu_kv);
    else if (!rc)
        validate_report_text(&o, l.m->name, hw, &v, &r);
    free(st);
    for (uint32_t k = 0; ex && k < VALIDATE_REPEAT_MAX; k++)
        free(ex[k].buf);
    free(ex);
    free(runs);
    free(sbuf);
    if (o.trace == tmp)
        remove(tmp);
    loaded_free(&l);
    catalog_deinit(&cat);
    return rc ? cli_fail(&e) : 0;
}
