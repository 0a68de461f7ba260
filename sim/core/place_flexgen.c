/* flexgen-static placement: FlexGen's static split, a fixed share f of every
 * token's KV on the GPU and the rest on the CPU.
 *
 * Nothing is cached across steps: every attended token's CPU share is loaded
 * for the step (a GPU miss whenever f < 1), or, with cpu_attention, attended
 * where it lies by the CPU (FlexGen's CPU delegation: no KV crosses the
 * link); each new token's CPU share is offloaded once. Out of memory when
 * either tier cannot hold its share of every token. f < 0 means the largest
 * share that fits the whole sequence.
 *
 * FlexGen itself splits whole sequences (flexgen/pytorch_backend.py,
 * TorchMixedDevice.init_cache_one_gpu_batch: the batch x heads dimension
 * rounded to whole heads groups), so a stream is all on the GPU (f = 1) or
 * all on the CPU (f = 0); a fractional f is that split averaged over the
 * sequences, which the simulator prices (KV_SPLIT). The two whole forms keep
 * the engine's flags, so an executor can carry them out: f = 1 tokens are
 * KV_GPU; f = 0 tokens are KV_CPU, and every token a step attends, the new
 * one included, is on the GPU for that step only (KV_VISIT): loaded from the
 * CPU, or, the new one, computed there and written through to the CPU.
 * The bytes moved are the same in every form.
 */
#include <math.h>
#include <stdlib.h>

#include "placement.h"

struct flexgen_state {
    uint64_t gpu_part; /* bytes of each token on the GPU */
    uint64_t cpu_part; /* bytes of each token on the CPU */
    int cpu_attention; /* attend CPU shares on the CPU */
    int whole;         /* 1: f is 0 or 1 (whole tokens: KV_GPU / KV_CPU), 0: KV_SPLIT */
    uint32_t *visit;   /* (max_len) this step's visiting tokens (f = 0) */
    uint32_t n_visit;
};

static int flexgen_create(void **state, const struct place_params *p, uint32_t max_len,
                          const struct kv_future *fut, struct alisa_err *e)
{
    (void)fut;
    struct flexgen_state *f = calloc(1, sizeof *f);
    *state = f;
    if (!f || !(f->visit = malloc((max_len ? max_len : 1) * sizeof *f->visit)))
        return err_set(e, ALISA_ENOMEM, "out of memory for flexgen state");
    double frac = place_flexgen_share(p, max_len);
    f->gpu_part = (uint64_t)(frac * (double)p->kv_bytes);
    f->cpu_part = p->kv_bytes - f->gpu_part;
    f->cpu_attention = p->cpu_attention;
    /* CPU delegation attends CPU tokens where they lie: they stay KV_SPLIT */
    f->whole = !f->cpu_part || (!f->gpu_part && !f->cpu_attention);
    return 0;
}

static void flexgen_destroy(void *state)
{
    struct flexgen_state *f = state;
    if (f)
        free(f->visit);
    free(f);
}

/* The whole forms: f = 1, every token on the GPU; f = 0, every token on the
 * CPU and on the GPU only for the steps that attend it. */
static void flexgen_whole(struct flexgen_state *f, struct kv_stream *s,
                          const struct place_params *p, const uint32_t *attended, uint32_t n_att,
                          const uint32_t *retired, uint32_t n_retired, uint32_t pos,
                          struct place_result *out)
{
    for (uint32_t i = 0; i < f->n_visit; i++)
        s->flags[f->visit[i]] &= (uint8_t)~KV_VISIT;
    f->n_visit = s->visits = 0;
    for (uint32_t i = 0; i < n_retired; i++) {
        uint32_t t = retired[i];
        ALISA_ASSERT(s->flags[t] & (KV_GPU | KV_CPU));
        if (s->flags[t] & KV_GPU)
            s->gpu_tokens--;
        else
            s->cpu_tokens--;
        s->flags[t] = KV_EXISTS | KV_GONE;
    }
    int on_gpu = f->cpu_part == 0;
    for (uint32_t i = 0; i < n_att && !on_gpu; i++) {
        uint32_t t = attended[i];
        if (t == pos)
            continue;
        out->gpu_misses++;
        if (f->cpu_attention) {
            out->n_cpu_attend++;
            out->bytes_cpu_attend += f->cpu_part;
            continue;
        }
        out->bytes_h2d += f->cpu_part;
        out->load[out->n_load++] = t;
        s->flags[t] |= KV_VISIT;
        f->visit[f->n_visit++] = t;
    }
    s->gpu_bytes = (uint64_t)s->gpu_tokens * p->kv_bytes;
    s->cpu_bytes = (uint64_t)s->cpu_tokens * p->kv_bytes;
    if (on_gpu ? s->gpu_tokens >= s->gpu_cap || s->gpu_bytes + p->kv_bytes > p->gpu_bytes
               : s->cpu_tokens >= s->cpu_cap || s->cpu_bytes + p->kv_bytes > p->cpu_bytes) {
        out->oom = 1;
        out->oom_cpu = !on_gpu;
        s->visits = f->n_visit;
        return;
    }
    s->flags[pos] |= KV_EXISTS | (on_gpu ? KV_GPU : KV_CPU);
    if (on_gpu) {
        s->gpu_tokens++;
        s->gpu_bytes += p->kv_bytes;
    } else { /* computed on the GPU, attended there this step, written through */
        s->flags[pos] |= KV_VISIT;
        f->visit[f->n_visit++] = pos;
        s->cpu_tokens++;
        s->cpu_bytes += p->kv_bytes;
        out->bytes_d2h += f->cpu_part;
        out->offload[out->n_offload++] = pos;
    }
    s->visits = f->n_visit;
}

static void flexgen_step(void *state, struct kv_stream *s, const struct place_params *p,
                         const uint32_t *attended, uint32_t n_att, const uint32_t *retired,
                         uint32_t n_retired, uint32_t pos, struct place_result *out)
{
    struct flexgen_state *f = state;
    if (f->whole) {
        flexgen_whole(f, s, p, attended, n_att, retired, n_retired, pos, out);
        return;
    }
    for (uint32_t i = 0; i < n_retired; i++) {
        uint32_t t = retired[i];
        ALISA_ASSERT(s->flags[t] & KV_SPLIT);
        s->flags[t] = (uint8_t)((s->flags[t] & ~KV_SPLIT) | KV_GONE);
        s->gpu_bytes -= f->gpu_part;
        s->cpu_bytes -= f->cpu_part;
    }
    for (uint32_t i = 0; i < n_att; i++) {
        uint32_t t = attended[i];
        if (f->cpu_part == 0)
            continue;
        if (t == pos) { /* the new token: its CPU share is attended with the rest
                         * (pytorch_backend.py: k_new written into k_cpu before
                         * the CPU part's attention) */
            if (f->cpu_attention) {
                out->n_cpu_attend++;
                out->bytes_cpu_attend += f->cpu_part;
            }
            continue;
        }
        out->gpu_misses++;
        if (f->cpu_attention) {
            out->n_cpu_attend++;
            out->bytes_cpu_attend += f->cpu_part;
        } else {
            out->bytes_h2d += f->cpu_part;
            out->load[out->n_load++] = t;
        }
    }
    if (s->gpu_bytes + f->gpu_part > p->gpu_bytes || s->cpu_bytes + f->cpu_part > p->cpu_bytes) {
        out->oom = 1;
        return;
    }
    s->flags[pos] |= KV_EXISTS | KV_SPLIT;
    s->gpu_bytes += f->gpu_part;
    s->cpu_bytes += f->cpu_part;
    if (f->cpu_part) {
        out->bytes_d2h += f->cpu_part;
        out->offload[out->n_offload++] = pos;
    }
}

static uint32_t flexgen_split_sequences(const struct place_params *base, uint32_t n_seqs,
                                        uint32_t n_layers, uint32_t max_len, double share,
                                        struct place_params *out)
{
    return place_flexgen_split(base, n_seqs, n_layers, max_len,
                               share < 0 ? place_flexgen_share(base, max_len) : share, out);
}

const struct placement_ops place_flexgen_ops = {
    .name = "flexgen-static",
    .host_tier = 1,
    .summary = "FlexGen's static split: a fixed share of every token's KV on the GPU, the "
               "rest on the CPU and loaded every step it is attended (the executor splits "
               "whole sequences, as FlexGen's code does: --gpu-kv-bytes's share of them)",
    .params = "gpu_bytes, cpu_bytes, gpu_fraction (< 0 = largest that fits)",
    .visits = 1, /* the whole CPU form (f = 0) */
    .create = flexgen_create,
    .destroy = flexgen_destroy,
    .step = flexgen_step,
    .split_sequences = flexgen_split_sequences,
};

double place_flexgen_share(const struct place_params *p, uint32_t max_len)
{
    double frac = p->gpu_fraction;
    if (frac < 0) {
        double need = (double)max_len * (double)p->kv_bytes;
        frac = need > 0 ? (double)p->gpu_bytes / need : 1.0;
    }
    return frac > 1 ? 1 : frac;
}

uint32_t place_flexgen_split(const struct place_params *base, uint32_t n_seqs, uint32_t n_layers,
                             uint32_t max_len, double share, struct place_params *pp)
{
    uint32_t g = share >= 1 ? n_seqs : share > 0 ? (uint32_t)floor(n_seqs * share + 1e-9) : 0;
    uint64_t seq = (uint64_t)max_len * base->kv_bytes; /* one stream's every token */
    for (uint32_t b = 0; b < n_seqs; b++)
        for (uint32_t l = 0; l < n_layers; l++) {
            struct place_params *p = &pp[(size_t)b * n_layers + l];
            *p = *base;
            p->gpu_fraction = b < g ? 1.0 : 0.0;
            p->gpu_bytes = b < g ? seq : 0;
            p->cpu_bytes = b < g ? 0 : seq;
        }
    return g;
}
