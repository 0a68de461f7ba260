/* `alisa validate`: the simulator's prediction checked against the CPU
 * executor. Records a run with timings (record_trace), simulates the
 * recorded trace with the same scheduler options on a calibrated profile
 * (sim_run, system "executor"), and compares decode time step by step and
 * per category. A shell over cli_exec.h and simulate.h; the comparison's
 * arithmetic is validate_compare below, the only place it is done.
 */
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calibrate.h"
#include "catalog.h"
#include "cli.h"
#include "cli_exec.h"
#include "cmds.h"
#include "simulate.h"

void cmd_validate_usage(FILE *out)
{
    fprintf(out,
            "usage: alisa validate --model M --text FILE --profile PROFILE --prompt-len P\n"
            "                      --gen-len G [options]\n"
            "\n"
            "Checks the simulator against the CPU executor. The executor runs B windows of\n"
            "P + G tokens of the text teacher-forced, as alisa record does, under the\n"
            "scheduler (--selection, default dense; --placement, default gpu-only;\n"
            "capacities), with per-step timings, and records the trace. The simulator\n"
            "then replays that trace with the same options on the calibrated profile\n"
            "(alisa calibrate; its section unless --hardware names another), system\n"
            "`executor`, and the two are compared over the G decode steps: total time,\n"
            "mean absolute percentage error of the step times, and time per category\n"
            "(compute = GEMMs, attention and the head; transfer = KV moves between the\n"
            "arenas; recompute; schedule = the scheduler's own decisions and\n"
            "observations, priced from the profile's sched_ns_per_token). Prefill runs position by position to record its\n"
            "rows and is shown apart, outside the comparison. Before and after the run\n"
            "the model's weight GEMMs are timed once (one row) and set beside the rate\n"
            "the profile implies: how far the machine has moved since calibration.\n"
            "\n"
            "  --model M          catalog name, llama2.c .bin or GGUF file\n"
            "  --tokenizer T      tokenizer file (default: the catalog's or the GGUF's)\n"
            "  --text FILE        text\n"
            "  --profile FILE     calibrated hardware profile (alisa calibrate -o)\n"
            "  --prompt-len P     prompt tokens per sequence\n"
            "  --gen-len G        decode steps (generated tokens per sequence)\n"
            "  --batch B          sequences decoded together (default 1)\n"
            "  --offset K         first token of the first window (default 0)\n"
            "  --trace X          keep the recorded trace here (default: a temporary file)\n"
            "  --steps CSV        per-step measured and predicted times\n"
            "  --json             print the comparison as JSON\n"
            KV_OPT_HELP
            "  -h, --help         this text\n");
}

/* Measured and predicted decode time, totals and per category, seconds. */
struct validation {
    uint32_t steps;
    double meas_total, pred_total;
    double meas_compute, meas_transfer, meas_recompute, meas_schedule;
    double pred_compute, pred_transfer, pred_recompute, pred_schedule;
    double meas_prefill, pred_prefill;
    double mape, max_ape;     /* per-step absolute percentage errors, % */
    double rate_before, rate_after, rate_profile; /* one-row weight pass, GB/s */
};

static double rel_err(double pred, double meas)
{
    return meas > 0 ? 100.0 * (pred - meas) / meas : 0.0;
}

/* One decode step as measured (from the timings) and predicted (from the
 * timeline), ms. */
struct step_times {
    double meas, meas_compute, meas_transfer, meas_recompute, meas_schedule;
    double pred, pred_compute, pred_transfer, pred_recompute, pred_schedule;
};

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

static void validate_compare(const struct step_times *st, uint32_t G, struct validation *v)
{
    double ape_sum = 0;
    v->steps = G;
    v->max_ape = 0;
    for (uint32_t j = 0; j < G; j++) {
        const struct step_times *s = &st[j];
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
    }
    v->mape = G ? ape_sum / G : 0;
}

static int write_steps(const char *path, const struct step_times *st, uint32_t P, uint32_t G,
                       struct alisa_err *e)
{
    char part[1100];
    snprintf(part, sizeof part, "%s.part", path);
    FILE *f = fopen(part, "w");
    if (!f)
        return err_set(e, ALISA_EIO, "%s: cannot create steps file", part);
    fprintf(f, "step,pos,measured_ms,predicted_ms,measured_compute_ms,predicted_compute_ms,"
               "measured_transfer_ms,predicted_transfer_ms,measured_recompute_ms,"
               "predicted_recompute_ms,measured_schedule_ms,predicted_schedule_ms\n");
    for (uint32_t j = 0; j < G; j++) {
        const struct step_times *s = &st[j];
        fprintf(f, "%u,%u,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f\n", j, P + j,
                s->meas * 1e3, s->pred * 1e3, s->meas_compute * 1e3, s->pred_compute * 1e3,
                s->meas_transfer * 1e3, s->pred_transfer * 1e3, s->meas_recompute * 1e3,
                s->pred_recompute * 1e3, s->meas_schedule * 1e3, s->pred_schedule * 1e3);
    }
    if (fclose(f) != 0) {
        remove(part);
        return err_set(e, ALISA_EIO, "%s: write failed", part);
    }
    if (rename(part, path) != 0) {
        remove(part);
        return err_set(e, ALISA_EIO, "%s: cannot rename to %s", part, path);
    }
    return 0;
}

static void print_row(const char *what, double meas, double pred)
{
    if (meas > 0)
        printf("  %-22s %12.3f %12.3f %+9.1f%%\n", what, meas * 1e3, pred * 1e3,
               rel_err(pred, meas));
    else
        printf("  %-22s %12.3f %12.3f %10s\n", what, meas * 1e3, pred * 1e3, "-");
}

int cmd_validate(int argc, char **argv)
{
    static const struct option opts[] = {{"model", required_argument, 0, 'm'},
                                         {"tokenizer", required_argument, 0, 't'},
                                         {"text", required_argument, 0, 'x'},
                                         {"profile", required_argument, 0, 'p'},
                                         {"prompt-len", required_argument, 0, 'P'},
                                         {"gen-len", required_argument, 0, 'G'},
                                         {"batch", required_argument, 0, 'b'},
                                         {"offset", required_argument, 0, 'O'},
                                         {"trace", required_argument, 0, 'T'},
                                         {"steps", required_argument, 0, 'S'},
                                         {"json", no_argument, 0, 'j'},
                                         KV_OPT_LIST,
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *model = NULL, *tokenizer = NULL, *text = NULL, *trace = NULL, *steps = NULL;
    struct kv_opts kvo = {.sel = {.sparsity = 0.8}};
    uint32_t P = 0, G = 0, batch = 1, offset = 0;
    int json = 0, bad = 0, ch;
    struct alisa_err e = {{0}};
    cli_reset_getopt();
    while (!bad && (ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        const char *opt = argv[optind - 1];
        int kk = kv_opt(&kvo, ch, opt, optarg, &e);
        if (kk) {
            bad = kk < 0;
            continue;
        }
        switch (ch) {
        case 'm': model = optarg; break;
        case 't': tokenizer = optarg; break;
        case 'x': text = optarg; break;
        case 'p': kvo.profile = optarg; break;
        case 'T': trace = optarg; break;
        case 'S': steps = optarg; break;
        case 'j': json = 1; break;
        case 'P': bad = cli_parse_u32(opt, optarg, &P, &e); break;
        case 'G': bad = cli_parse_u32(opt, optarg, &G, &e); break;
        case 'b': bad = cli_parse_u32(opt, optarg, &batch, &e); break;
        case 'O': bad = cli_parse_u32(opt, optarg, &offset, &e); break;
        default: return cli_option_end(ch, opt, cmd_validate_usage);
        }
    }
    if (bad)
        return cli_usage_error(cmd_validate_usage, "%s", e.msg);
    if (optind < argc)
        return cli_usage_error(cmd_validate_usage, "unexpected argument '%s'", argv[optind]);
    if (!model || !text || !kvo.profile || !P || !G || !batch)
        return cli_usage_error(cmd_validate_usage, "--model, --text, --profile, --prompt-len and "
                               "--gen-len are required");
    if (kvo.backend && strcmp(kvo.backend, "cpu") != 0) {
        err_set(&e, ALISA_EINVAL, "--backend %s: validate runs the cpu backend only (the CUDA "
                "backend has no calibrated profile yet: `alisa calibrate --backend cuda` is not "
                "written)", kvo.backend);
        return cli_fail(&e);
    }
    if (kvo.int8) {
        err_set(&e, ALISA_EINVAL, "--kv-int8: not validated yet (the executor keeps INT8 "
                "parameters per group of 32 tokens, the simulator prices them per stream)");
        return cli_fail(&e);
    }
    /* always under the scheduler, as the simulator runs */
    if (!kvo.selection)
        kvo.selection = "dense";
    if (!kvo.placement)
        kvo.placement = "gpu-only";

    struct catalog cat;
    if (cli_catalog_load(&cat, catalog_default_dir(), kvo.profile, &e))
        return cli_fail(&e);
    const struct hw_profile *hw = kv_opts_hw(&kvo, &cat);
    if (!hw) {
        err_set(&e, ALISA_ENOTFOUND, "--hardware %s: not in the catalog or %s", kvo.hardware,
                kvo.profile);
        catalog_deinit(&cat);
        return cli_fail(&e);
    }
    if (!hw->serial)
        fprintf(stderr, "alisa: warning: profile [%s] is not serial (not from alisa calibrate): "
                "the simulator will overlap copies with compute, which this executor does not\n",
                hw->name);
    struct loaded l;
    if (load_model(&l, model, tokenizer, 1, &e)) {
        catalog_deinit(&cat);
        return cli_fail(&e);
    }
    char tmp[] = "/tmp/alisa-validate-XXXXXX";
    int rc = 0;
    if (!trace) {
        int fd = mkstemp(tmp);
        if (fd < 0)
            rc = err_set(&e, ALISA_EIO, "%s: cannot create a temporary trace", tmp);
        else
            close(fd);
        trace = tmp;
    }
    char *tbuf = NULL, *sbuf = NULL;
    size_t tlen = 0, slen = 0;
    FILE *tf = rc ? NULL : open_memstream(&tbuf, &tlen);
    if (!rc && !tf)
        rc = err_set(&e, ALISA_ENOMEM, "out of memory for timings");
    struct record_job job = {.l = &l, .text = text, .out = trace, .P = P, .G = G, .batch = batch,
                             .offset = offset, .threshold = 0, .kv = kvo, .timings = tf};
    /* the machine's weight-streaming rate around the run, against what the
     * profile says it is: how far this machine has moved since calibration */
    struct validation v = {0};
    v.rate_profile = calib_profile_weight_rate(l.m, hw);
    if (!rc) {
        v.rate_before = calib_weight_rate(l.m);
        fprintf(stderr, "alisa: executor: %u x (%u + %u) tokens, %s / %s\n", batch, P, G,
                kvo.selection, kvo.placement);
        rc = record_trace(&job, &e);
        v.rate_after = calib_weight_rate(l.m);
    }
    if (tf)
        fclose(tf);

    /* the simulator on the recorded trace, the same options and capacities */
    struct model_shape shape;
    llm_model_shape(l.m, &shape);
    uint64_t gpu_kv, cpu_kv;
    kv_opts_capacity(&kvo, &l.m->c, batch, P + G, &gpu_kv, &cpu_kv);
    struct sim_config cfg = {.trace = trace, .model = &shape, .hw = hw,
                             .system = sim_system_find("executor"), .batch = batch,
                             .prompt_len = P, .gen_len = G, .sel_params = kvo.sel,
                             .precision = KV_FP32,
                             .gpu_kv_bytes = (double)gpu_kv, .cpu_mem_bytes = (double)cpu_kv};
    ALISA_ASSERT(cfg.system);
    if (!rc && !(cfg.sel = selection_find(kvo.selection)))
        rc = err_set(&e, ALISA_ENOTFOUND, "unknown selection '%s'", kvo.selection);
    if (!rc && !(cfg.place = placement_find(kvo.placement)))
        rc = err_set(&e, ALISA_ENOTFOUND, "unknown placement '%s'", kvo.placement);
    if (!rc)
        rc = sim_resolve(&cfg, &e);
    struct sim_result r;
    FILE *sf = rc ? NULL : open_memstream(&sbuf, &slen);
    if (!rc && !sf)
        rc = err_set(&e, ALISA_ENOMEM, "out of memory for the timeline");
    if (!rc)
        rc = sim_run(&cfg, &r, sf, &e);
    if (sf)
        fclose(sf);
    if (!rc && r.oom)
        rc = err_set(&e, ALISA_EINVAL, "the simulator ran out of memory where the executor did "
                     "not: %s", r.oom_reason);

    struct step_times *st = rc ? NULL : calloc(G, sizeof *st);
    if (!rc && !st)
        rc = err_set(&e, ALISA_ENOMEM, "out of memory");
    if (!rc)
        rc = parse_timings(tbuf, P, G, st, &v.meas_prefill, &e);
    if (!rc)
        rc = parse_timeline(sbuf, r.prefill_s, G, st, &e);
    if (!rc) {
        validate_compare(st, G, &v);
        v.pred_prefill = r.prefill_s;
    }
    if (!rc && steps)
        rc = write_steps(steps, st, P, G, &e);
    if (!rc && json) {
        json_t *o = json_pack(
            "{s:s, s:s, s:s, s:s, s:f, s:I, s:i, s:i, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:f, "
            "s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:I, s:I, s:f, s:f, s:f, s:f}",
            "model", l.m->name, "profile", hw->name, "selection", kvo.selection, "placement",
            kvo.placement, "sparsity", kvo.sel.sparsity, "gpu_kv_bytes", (json_int_t)cfg.gpu_kv_bytes,
            "batch", (int)batch, "prompt_len", (int)P, "gen_len", (int)G, "steps", (int)v.steps,
            "measured_s", v.meas_total, "predicted_s", v.pred_total, "total_error_pct",
            rel_err(v.pred_total, v.meas_total), "mape_pct", v.mape, "max_ape_pct", v.max_ape,
            "measured_compute_s", v.meas_compute, "predicted_compute_s", v.pred_compute,
            "measured_transfer_s", v.meas_transfer, "predicted_transfer_s", v.pred_transfer,
            "measured_recompute_s", v.meas_recompute, "predicted_recompute_s", v.pred_recompute,
            "measured_schedule_s", v.meas_schedule, "measured_prefill_s", v.meas_prefill,
            "predicted_prefill_s", v.pred_prefill, "recomputed_tokens", r.recomputed_tokens,
            "bytes_h2d", r.bytes_h2d, "bytes_d2h", r.bytes_d2h, "phase2_step",
            (json_int_t)r.phase2_step, "phase3_step", (json_int_t)r.phase3_step,
            "weight_rate_before_gbps", v.rate_before, "weight_rate_after_gbps", v.rate_after,
            "weight_rate_profile_gbps", v.rate_profile, "predicted_schedule_s", v.pred_schedule);
        json_dumpf(o, stdout, JSON_REAL_PRECISION(6));
        printf("\n");
        json_decref(o);
    } else if (!rc) {
        printf("validate: %s, %u x (%u + %u) tokens, %s / %s, profile [%s]\n", l.m->name, batch, P,
               G, kvo.selection, kvo.placement, hw->name);
        printf("  phases: offload from step %lld, drop from step %lld (-1: never); %.0f tokens "
               "recomputed\n", (long long)r.phase2_step, (long long)r.phase3_step,
               r.recomputed_tokens);
        printf("  %-22s %12s %12s %10s\n", "decode, ms", "measured", "predicted", "error");
        print_row("total", v.meas_total, v.pred_total);
        print_row("compute", v.meas_compute, v.pred_compute);
        print_row("transfer", v.meas_transfer, v.pred_transfer);
        print_row("recompute", v.meas_recompute, v.pred_recompute);
        print_row("schedule", v.meas_schedule, v.pred_schedule);
        printf("  per-step error: MAPE %.1f%%, largest %.1f%% over %u steps\n", v.mape, v.max_ape,
               v.steps);
        printf("  prefill (apart)        %12.3f %12.3f\n", v.meas_prefill * 1e3,
               v.pred_prefill * 1e3);
        printf("  machine: one-row weight pass %.2f GB/s before the run, %.2f after; the profile "
               "says %.2f (%+.0f%%)\n", v.rate_before, v.rate_after, v.rate_profile,
               rel_err(v.rate_profile, 0.5 * (v.rate_before + v.rate_after)));
    }
    free(st);
    free(tbuf);
    free(sbuf);
    if (trace == tmp)
        remove(tmp);
    loaded_free(&l);
    catalog_deinit(&cat);
    return rc ? cli_fail(&e) : 0;
}
