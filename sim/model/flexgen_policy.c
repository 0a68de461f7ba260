/* FlexGen's policy search as a GLPK linear program (contract and sources in
 * flexgen_policy.h). Columns: w (weights' GPU share), c (KV's GPU share), T
 * (ns a layer); rows: T against each of FlexGen's Tgen terms, GPU and CPU
 * memory. Every coefficient is a cost-model term at the mean context.
 */
#include "flexgen_policy.h"

#include <glpk.h>
#include <math.h>
#include <string.h>

const struct flexgen_policy flexgen_default_policy = {1.0, 1.0};

/* The LP's constants for w: per layer and decode step, ns and bytes. */
struct lp_terms {
    double stream_ns;    /* the whole layer's weights over the link */
    double kv_copy_ns;   /* the whole layer's KV at the mean context over the link */
    double gemm_ns;      /* the layer's weight GEMMs */
    double attn_gpu_ns;  /* attention over the whole layer's KV on the GPU */
    double attn_cpu_ns;  /* the same on the CPU, through its FP32 workspace */
    double offload_ns;   /* the new tokens' K and V over the link */
    double weights, layer_weights, kv_peak, gpu_fixed; /* bytes */
};

static void lp_terms(const struct flexgen_workload *w, struct lp_terms *t)
{
    const struct model_shape *m = w->model;
    const struct hw_profile *hw = w->hw;
    struct kv_shape k = kv_shape_of(m, w->precision);
    double kv = (double)cost_kv_bytes(&k), B = w->batch;
    double ctx = (double)w->prompt_len + w->gen_len / 2.0; /* solve_lp's s + n / 2 */
    double kv_mean = B * ctx * kv;
    t->layer_weights = cost_layer_weight_bytes(m);
    t->weights = m->weight_bytes_fp16;
    t->kv_peak = B * ((double)w->prompt_len + w->gen_len) * kv * m->n_layers;
    t->gpu_fixed = B * m->n_layers * (double)cost_kv_fixed_bytes(&k);
    t->stream_ns = t->layer_weights / hw->link_gbps;
    t->kv_copy_ns = kv_mean / hw->link_gbps;
    t->offload_ns = B * kv / hw->link_gbps;
    t->gemm_ns = cost_layer_compute_ns(m, hw, w->batch, 0, 0, w->precision, 0, 0);
    t->attn_gpu_ns = cost_layer_compute_ns(m, hw, w->batch, B * ctx, B * ctx, w->precision, 0, 0) -
                     t->gemm_ns;
    t->attn_cpu_ns = cost_cpu_attention_ns(hw, kv_mean);
}

double flexgen_policy_layer_ns(const struct flexgen_workload *w, const struct flexgen_policy *p)
{
    struct lp_terms t;
    lp_terms(w, &t);
    double ctog = t.stream_ns * (1 - p->w_gpu) + (w->cpu_attention ? 0 : t.kv_copy_ns * (1 - p->cache_gpu));
    double comp = t.gemm_ns + (w->cpu_attention ? t.attn_gpu_ns * p->cache_gpu +
                                                      t.attn_cpu_ns * (1 - p->cache_gpu)
                                                : t.attn_gpu_ns);
    double off = t.offload_ns * (1 - p->cache_gpu);
    return ctog + (comp > off ? comp : off);
}

int flexgen_policy_lp(const struct flexgen_workload *w, struct flexgen_policy *p, int *feasible,
                      double *layer_ns, struct alisa_err *e)
{
    struct lp_terms t;
    lp_terms(w, &t);
    const int copy = !w->cpu_attention, cpu = w->cpu_attention;
    const double G = w->gpu_mem_bytes, C = w->cpu_mem_bytes;
    /* every row scaled to O(1): times by the all-on-the-CPU bound of row 1
     * (T is solved in those units), memories by their capacities */
    const double comp0 = t.gemm_ns + (cpu ? t.attn_cpu_ns : t.attn_gpu_ns);
    const double r1 = t.stream_ns + copy * t.kv_copy_ns + comp0;
    const double r2 = t.stream_ns + copy * t.kv_copy_ns + t.offload_ns;
    const double ts = r1 > r2 ? r1 : r2;
    const double gs = G > 1 ? G : 1, cs = C > 1 ? C : 1;
    glp_term_out(GLP_OFF);
    glp_prob *lp = glp_create_prob();
    glp_set_obj_dir(lp, GLP_MIN);
    glp_add_cols(lp, 3);
    glp_set_col_bnds(lp, 1, GLP_DB, 0.0, 1.0); /* w */
    glp_set_col_bnds(lp, 2, GLP_DB, 0.0, 1.0); /* c */
    glp_set_col_bnds(lp, 3, GLP_LO, 0.0, 0.0); /* T / ts */
    glp_set_obj_coef(lp, 3, 1.0);
    glp_add_rows(lp, 4);
    /* 1: T >= ctog + compute, with ctog = stream (1 - w) + copy: kv_copy (1 - c)
     *    and compute = gemm + (cpu: attn_gpu c + attn_cpu (1 - c); else attn_gpu) */
    glp_set_row_bnds(lp, 1, GLP_LO, r1 / ts, 0.0);
    /* 2: T >= ctog + offload (1 - c) */
    glp_set_row_bnds(lp, 2, GLP_LO, r2 / ts, 0.0);
    /* 3: GPU: weights w + two layers' buffers (1 - w) + KV c + INT8 scales */
    glp_set_row_bnds(lp, 3, GLP_UP, 0.0, (G - 2 * t.layer_weights - t.gpu_fixed) / gs);
    /* 4: CPU: weights (1 - w) + KV (1 - c) */
    glp_set_row_bnds(lp, 4, GLP_UP, 0.0, (C - t.weights - t.kv_peak) / cs);
    int ia[1 + 10], ja[1 + 10];
    double ar[1 + 10];
    int n = 0;
#define SET(r, col, v) (n++, ia[n] = (r), ja[n] = (col), ar[n] = (v))
    SET(1, 1, t.stream_ns / ts);
    SET(1, 2, (copy * t.kv_copy_ns + cpu * (t.attn_cpu_ns - t.attn_gpu_ns)) / ts);
    SET(1, 3, 1.0);
    SET(2, 1, t.stream_ns / ts);
    SET(2, 2, (copy * t.kv_copy_ns + t.offload_ns) / ts);
    SET(2, 3, 1.0);
    SET(3, 1, (t.weights - 2 * t.layer_weights) / gs);
    SET(3, 2, t.kv_peak / gs);
    SET(4, 1, -t.weights / cs);
    SET(4, 2, -t.kv_peak / cs);
#undef SET
    glp_load_matrix(lp, n, ia, ja, ar);
    glp_scale_prob(lp, GLP_SF_AUTO);
    glp_smcp parm;
    glp_init_smcp(&parm);
    parm.msg_lev = GLP_MSG_OFF;
    parm.presolve = GLP_ON; /* an infeasible problem is a status, not an error */
    int rc = glp_simplex(lp, &parm), status = glp_get_status(lp);
    *feasible = 0;
    *p = flexgen_default_policy;
    *layer_ns = 0;
    if (rc == 0 && status == GLP_OPT) {
        *feasible = 1;
        /* GLPK meets a bound to its tolerance (1e-7): shares rounded to 1e-9,
         * then no more KV on the GPU than its memory exactly holds, or a
         * whole run would not fit */
        p->w_gpu = round(glp_get_col_prim(lp, 1) * 1e9) / 1e9;
        p->cache_gpu = round(glp_get_col_prim(lp, 2) * 1e9) / 1e9;
        double room = G - 2 * t.layer_weights - t.gpu_fixed - p->w_gpu * (t.weights - 2 * t.layer_weights);
        if (t.kv_peak > 0 && p->cache_gpu * t.kv_peak > room)
            p->cache_gpu = room > 0 ? room / t.kv_peak : 0;
        *layer_ns = flexgen_policy_layer_ns(w, p);
    } else if (rc != 0 && rc != GLP_ENOPFS && rc != GLP_ENODFS) {
        glp_delete_prob(lp);
        return err_set(e, ALISA_EINVAL, "FlexGen's policy LP: GLPK simplex failed (code %d)", rc);
    }
    glp_delete_prob(lp);
    return 0;
}
