/* FlexGen's policy and its policy search, over our cost terms.
 *
 * A policy, as FlexGen's `Policy` has it (FMInference/FlexGen,
 * flexgen/flex_opt.py): the share of the weights on the GPU (the rest on the
 * CPU, streamed to the GPU layer by layer every step), the share of every
 * token's KV on the GPU (the rest on the CPU: copied to the GPU every step,
 * or, with --cpu-cache-compute, attended by the CPU where it lies), and the
 * activations on the GPU. Disk shares are not modelled.
 *
 * The search is FlexGen's own (flexgen/experimental/cost_model.py,
 * solve_lp): a linear program over the shares minimising the decode time of
 * one layer, T >= ctog + max(compute, offload), where ctog is the weights'
 * CPU share plus (copy path) the KV's CPU share over the link, compute the
 * layer's GEMMs plus attention over the GPU share on the GPU and (CPU path)
 * over the CPU share on the CPU, at the mean context prompt + gen/2, and
 * offload the new token's CPU share; subject to GPU memory (the weights' GPU
 * share, two layers' buffers for the streamed share, the KV's GPU share at
 * the longest context) and CPU memory (the rest). FlexGen fits its own
 * hardware constants; we price with the catalog's (costmodel.h), the terms
 * the simulator runs. gpu_batch_size x num_gpu_batches is not searched: the
 * batch is the workload's, and FlexGen's LP prices a block's compute by its
 * FLOPs (compg = bls x ... / mm_flops), which the split does not change;
 * the simulator's runtime does price it (sim_config.flexgen_gpu_batch: the
 * weights read once per GPU batch), and rounds the cache's GPU share down
 * to whole sequences as FlexGen's cache allocation does. Solved with GLPK.
 */
#ifndef ALISA_FLEXGEN_POLICY_H
#define ALISA_FLEXGEN_POLICY_H

#include <stdint.h>

#include "catalog.h"
#include "costmodel.h"
#include "err.h"

struct flexgen_policy {
    double w_gpu;     /* share of the weights on the GPU, [0, 1] */
    double cache_gpu; /* share of every token's KV on the GPU, [0, 1] */
};

struct flexgen_workload {
    const struct model_shape *model;
    const struct hw_profile *hw;
    uint32_t batch, prompt_len, gen_len;
    enum kv_precision precision;
    int cpu_attention;         /* --cpu-cache-compute */
    double gpu_mem_bytes, cpu_mem_bytes;
};

/* FlexGen's default policy, --percent 100 0 100 0 100 0 (flex_opt.py,
 * add_parser_arguments): everything on the GPU. */
extern const struct flexgen_policy flexgen_default_policy;

/* The LP's policy for w. Returns 0 and sets *feasible (0: no shares fit the
 * memories; *p then all-GPU) and *layer_ns (the LP's per-layer decode time
 * at the optimum), or ALISA_EINVAL when GLPK fails. */
int flexgen_policy_lp(const struct flexgen_workload *w, struct flexgen_policy *p, int *feasible,
                      double *layer_ns, struct alisa_err *e);

/* The LP's objective for a given policy (what the LP minimises), ns per
 * layer and step. Cannot fail. */
double flexgen_policy_layer_ns(const struct flexgen_workload *w, const struct flexgen_policy *p);

#endif
