/* The executor's tiered KV cache (contract in tiered.h): a request becomes
 * a scheduler over every (sequence, layer) stream, priced and sized by
 * cost_tiers as the replay is, and a kvstore whose arenas hold the largest
 * stream's slots.
 */
#include "tiered.h"

#include <stdlib.h>
#include <string.h>

int tiered_runs(const struct placement_ops *pl)
{
    return !pl->offline && (!pl->step || pl->visits);
}

enum kv_precision tiered_precision(int int8, enum llm_backend kind)
{
    struct llm_backend_info bi;
    struct alisa_err e = {{0}};
    if (int8)
        return KV_INT8;
    return !llm_backend_info(kind, &bi, &e) && bi.kv_bytes == 2 ? KV_FP16 : KV_FP32;
}

void tiered_capacity(uint64_t gpu_bytes, uint64_t cpu_bytes, const struct llm_config *c,
                     uint32_t batch, uint32_t max_len, enum kv_precision p, uint64_t *gpu_out,
                     uint64_t *cpu_out)
{
    struct kv_shape ks = {c->dim, c->kv_dim, p};
    uint64_t all = (uint64_t)max_len * cost_kv_bytes(&ks) * batch * c->n_layers;
    *gpu_out = gpu_bytes ? gpu_bytes : all;
    *cpu_out = cpu_bytes ? cpu_bytes : all;
}

int tiered_attach(struct tiered *t, const struct tiered_request *r, const struct llm_model *m,
                  struct llm_state *st, uint32_t batch, uint32_t max_len, uint32_t prompt_len,
                  struct alisa_err *e)
{
    memset(t, 0, sizeof *t);
    const struct llm_config *c = &m->c;
    struct scheduler_config sc = {.n_streams = batch * c->n_layers, .layers = c->n_layers,
                                  .max_len = max_len,
                                  .sel_params = r->sel_params,
                                  .sel = r->sel ? r->sel : &sel_dense_ops,
                                  .place = r->place ? r->place : &place_gpu_only_ops,
                                  .keys = 1};
    if (c->window)
        return err_set(e, ALISA_EINVAL, "%s: a sliding window of %u tokens runs without the "
                       "scheduler only (no --selection or --placement): the scheduler's streams "
                       "do not know the window", m->name, c->window);
    if (!tiered_runs(sc.place))
        return err_set(e, ALISA_EINVAL, "placement '%s' is not supported by the executor yet "
                       "(offline bounds need a recorded run)", sc.place->name);
    if (!r->hw && sc.place->host_tier)
        return err_set(e, ALISA_EINVAL, "placement '%s' prices load against recompute: it needs "
                       "a hardware profile", sc.place->name);
    /* priced as stored: K and V as the backend's arenas hold them (FP32 on
     * the CPU, FP16 on the GPU, or INT8), by the one derivation the replay
     * uses (costmodel.h, cost_tiers: the executor's storage) */
    enum kv_precision prec = tiered_precision(r->int8, llm_state_backend(st));
    struct kv_shape ks = {c->dim, c->kv_dim, prec};
    struct place_params *pp = &sc.place_params;
    uint64_t g, h;
    tiered_capacity(r->gpu_bytes, r->cpu_bytes, c, batch, max_len, prec, &g, &h);
    if (!sc.place->host_tier)
        h = 0; /* nothing ever moves there: no host arena */
    struct tier_storage store = {ks, 1, 1};
    if (r->hw) {
        cost_tiers(&store, r->hw, g, h, sc.n_streams, pp);
    } else { /* the same tiers, no prices (nothing is loaded or recomputed) */
        struct hw_profile none = {.link_gbps = 1, .fp16_tflops = 1};
        cost_tiers(&store, &none, g, h, sc.n_streams, pp);
        pp->load_ns = pp->recompute_ns = 0;
    }
    pp->gpu_fraction = -1;
    struct place_params *split = NULL;
    if (sc.place->split_sequences) {
        /* the policy's split by whole sequences (FlexGen's): at the device
         * arena's exact share of the run's KV */
        if (!(split = malloc(sc.n_streams * sizeof *split)))
            return err_set(e, ALISA_ENOMEM, "out of memory");
        double all = (double)batch * c->n_layers * max_len * (double)pp->kv_bytes;
        t->gpu_seqs = sc.place->split_sequences(pp, batch, c->n_layers, max_len,
                                                all > 0 ? g / all : 1.0, split);
        sc.stream_params = split;
    }
    int rc = scheduler_create(&t->sched, &sc, NULL, e);
    free(split);
    /* arenas as large as the largest stream's (FlexGen's split differs by
     * sequence) */
    uint32_t dev = 0, host = 0;
    for (uint32_t i = 0; !rc && i < sc.n_streams; i++) {
        uint32_t ds = scheduler_stream_dev_slots(t->sched, i);
        uint32_t hs = scheduler_stream_host_slots(t->sched, i);
        dev = ds > dev ? ds : dev;
        host = hs > host ? hs : host;
    }
    if (rc || (rc = llm_state_kvstore(st, sc.n_streams, max_len, dev, host, r->int8, &t->ks, e))) {
        scheduler_destroy(t->sched);
        memset(t, 0, sizeof *t);
        return rc;
    }
    llm_state_tiered(st, t->sched, t->ks, prompt_len);
    return 0;
}

void tiered_free(struct tiered *t)
{
    scheduler_destroy(t->sched);
    kvstore_free(t->ks);
    memset(t, 0, sizeof *t);
}
