/* The alisa subcommands: one entry point and one usage printer each. The
 * simulator's live in sim/cli/, the executor's (run, eval, record, model,
 * calibrate, validate, version) in exec/cli/; this header is the only thing
 * the dispatcher (main.c) knows of either. */
#ifndef ALISA_CMDS_H
#define ALISA_CMDS_H

#include <stdint.h>
#include <stdio.h>

int cmd_catalog(int argc, char **argv);
void cmd_catalog_usage(FILE *out);
int cmd_trace(int argc, char **argv);
void cmd_trace_usage(FILE *out);
/* `alisa trace fit`, dispatched by cmd_trace (cmd_trace_fit.c) */
int trace_fit_cmd(int argc, char **argv);

int cmd_policy(int argc, char **argv);
void cmd_policy_usage(FILE *out);
int cmd_plan(int argc, char **argv);
void cmd_plan_usage(FILE *out);
int cmd_fidelity(int argc, char **argv);
void cmd_fidelity_usage(FILE *out);

int cmd_search(int argc, char **argv);
void cmd_search_usage(FILE *out);

int cmd_sim(int argc, char **argv);
void cmd_sim_usage(FILE *out);
int cmd_serve(int argc, char **argv);
void cmd_serve_usage(FILE *out);
int cmd_serve_run(int argc, char **argv);
void cmd_serve_run_usage(FILE *out);

/* What alisa serve and serve-run report alike (cmd_serve.c): the latency
 * lines, their JSON object (new reference, NULL when a figure is not
 * finite), and the per-request CSV (written whole or not at all). */
struct serve_result;
struct wl_params;
struct alisa_err;
typedef struct json_t json_t;
void cli_serve_print_latencies(const struct serve_result *r, double slo_ttft_s, double slo_tpot_s);
json_t *cli_serve_latencies_json(const struct serve_result *r);
/* A stream's "workload" object: {"csv": FILE} when read from one, else the
 * drawing's parameters (rate, burstiness, lengths, seed). */
json_t *cli_serve_workload_json(const char *csv, const struct wl_params *wl);
int cli_serve_write_per_request(const char *path, const struct serve_result *r,
                                struct alisa_err *e);

/* The batching options both check alike: --max-num-seqs, --max-batched-tokens
 * and --block-tokens in range, the objectives >= 0. 0, or the usage error's
 * exit code (one line naming the option). */
int cli_serve_check_batching(void (*usage)(FILE *), uint32_t max_num_seqs,
                             uint32_t max_batched_tokens, uint32_t block_tokens,
                             double slo_ttft_s, double slo_tpot_s);

int cmd_external(int argc, char **argv);
void cmd_external_usage(FILE *out);

int cmd_sweep(int argc, char **argv);
void cmd_sweep_usage(FILE *out);
int cmd_db(int argc, char **argv);
void cmd_db_usage(FILE *out);

int cmd_run(int argc, char **argv);
void cmd_run_usage(FILE *out);
int cmd_eval(int argc, char **argv);
void cmd_eval_usage(FILE *out);
int cmd_record(int argc, char **argv);
void cmd_record_usage(FILE *out);

int cmd_calibrate(int argc, char **argv);
void cmd_calibrate_usage(FILE *out);
int cmd_validate(int argc, char **argv);
void cmd_validate_usage(FILE *out);

int cmd_version(int argc, char **argv);
void cmd_version_usage(FILE *out);

int cmd_model(int argc, char **argv);
void cmd_model_usage(FILE *out);

/* Runs `alisa <argv[0]> ...` in this process (argv[0] is the command name):
 * the dispatcher main() uses, for sweeps running points. */
int cli_run_command(int argc, char **argv);

#endif
