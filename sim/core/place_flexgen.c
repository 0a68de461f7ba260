/* flexgen-static placement: FlexGen's static split, a fixed share f of every
 * token's KV on the GPU (FlexGen splits by heads) and the rest on the CPU.
 *
 * Nothing is cached across steps: every attended token's CPU share is loaded
 * for the step (a GPU miss whenever f < 1), or, with cpu_attention, attended
 * where it lies by the CPU (FlexGen's CPU delegation: no KV crosses the
 * link); each new token's CPU share is offloaded once. Out of memory when
 * either tier cannot hold its share of every token. f < 0 means the largest
 * share that fits the whole sequence.
 */
#include <stdlib.h>

#include "placement.h"

struct flexgen_state {
    uint64_t gpu_part; /* bytes of each token on the GPU */
    uint64_t cpu_part; /* bytes of each token on the CPU */
    int cpu_attention; /* attend CPU shares on the CPU */
};

static int flexgen_create(void **state, const struct place_params *p, uint32_t max_len,
                          const struct kv_future *fut, struct alisa_err *e)
{
    (void)fut;
    struct flexgen_state *f = calloc(1, sizeof *f);
    *state = f;
    if (!f)
        return err_set(e, ALISA_ENOMEM, "out of memory for flexgen state");
    double frac = p->gpu_fraction;
    if (frac < 0) {
        double need = (double)max_len * (double)p->kv_bytes;
        frac = need > 0 ? (double)p->gpu_bytes / need : 1.0;
    }
    if (frac > 1)
        frac = 1;
    f->gpu_part = (uint64_t)(frac * (double)p->kv_bytes);
    f->cpu_part = p->kv_bytes - f->gpu_part;
    f->cpu_attention = p->cpu_attention;
    return 0;
}

static void flexgen_destroy(void *state) { free(state); }

static void flexgen_step(void *state, struct kv_stream *s, const struct place_params *p,
                         const uint32_t *attended, uint32_t n_att, const uint32_t *retired,
                         uint32_t n_retired, uint32_t pos, struct place_result *out)
{
    struct flexgen_state *f = state;
    for (uint32_t i = 0; i < n_retired; i++) {
        uint32_t t = retired[i];
        ALISA_ASSERT(s->flags[t] & KV_SPLIT);
        s->flags[t] = (uint8_t)((s->flags[t] & ~KV_SPLIT) | KV_GONE);
        s->gpu_bytes -= f->gpu_part;
        s->cpu_bytes -= f->cpu_part;
    }
    for (uint32_t i = 0; i < n_att; i++) {
        uint32_t t = attended[i];
        if (t == pos || f->cpu_part == 0)
            continue;
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

const struct placement_ops place_flexgen_ops = {
    .name = "flexgen-static",
    .summary = "FlexGen's static split: a fixed share of every token's KV on the GPU, the "
               "rest on the CPU and loaded every step it is attended",
    .params = "gpu_bytes, cpu_bytes, gpu_fraction (< 0 = largest that fits)",
    .create = flexgen_create,
    .destroy = flexgen_destroy,
    .step = flexgen_step,
};
