/* Serving simulation (contract in serve.h): the trace held in memory, one
 * placement replay per (trace sequence, prompt length) through the
 * scheduler core, shared by the requests that need it and freed when the
 * last of them finishes, and vLLM V1's iteration loop over the request
 * stream, each iteration priced layer by layer.
 */
#include "serve.h"

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "batcher.h"
#include "replay.h"
#include "scheduler.h"
#include "trace.h"
#include "trace_gen.h"

/* The placement runs kept for reuse once no request holds them. */
#define SERVE_CACHE_BYTES (256.0 * (1 << 20))

/* The most the trace's rows may take in memory, dense. */
#define SERVE_TRACE_MAX_BYTES (8ull << 30)

/* ---- the trace, in memory ---- */

struct mem_trace {
    struct trace_header h;
    uint32_t S, L;
    uint32_t *len;        /* (S) positions with rows end here (prompt + generated) */
    uint32_t *row_start;  /* (S) first recorded position */
    float ***rows;        /* [s][pos] -> (L, pos + 1) weights, NULL before row_start */
};

static void mem_trace_free(struct mem_trace *t)
{
    for (uint32_t s = 0; t->rows && s < t->S; s++) {
        for (uint32_t p = 0; t->rows[s] && p < t->len[s]; p++)
            free(t->rows[s][p]);
        free(t->rows[s]);
    }
    free(t->rows);
    free(t->len);
    free(t->row_start);
    memset(t, 0, sizeof *t);
}

static int mem_trace_load(const char *path, struct mem_trace *t, struct alisa_err *e)
{
    memset(t, 0, sizeof *t);
    struct trace_reader *r;
    int rc = trace_reader_open(&r, path, e);
    if (rc)
        return rc;
    t->h = *trace_reader_header(r);
    t->S = t->h.n_seqs;
    t->L = t->h.n_layers;
    t->len = calloc(t->S, sizeof *t->len);
    t->row_start = calloc(t->S, sizeof *t->row_start);
    t->rows = calloc(t->S, sizeof *t->rows);
    if (!t->len || !t->row_start || !t->rows) {
        trace_reader_destroy(r);
        mem_trace_free(t);
        return err_set(e, ALISA_ENOMEM, "%s: out of memory for %u sequences", path, t->S);
    }
    double bytes = 0;
    for (uint32_t s = 0; s < t->S; s++) {
        const struct trace_seq *q = trace_reader_seq(r, s);
        t->len[s] = q->prompt_len + q->gen_len;
        t->row_start[s] = q->row_start;
        for (uint32_t p = q->row_start; p < t->len[s]; p++)
            bytes += (double)t->L * (p + 1) * sizeof(float);
    }
    if (bytes > (double)SERVE_TRACE_MAX_BYTES) {
        trace_reader_destroy(r);
        mem_trace_free(t);
        return err_set(e, ALISA_EINVAL, "%s: its rows take %.1f GiB dense, over the %.0f GiB a "
                       "serving run holds in memory (use fewer or shorter sequences)", path,
                       bytes / (1u << 30), (double)(SERVE_TRACE_MAX_BYTES >> 30));
    }
    for (uint32_t s = 0; s < t->S && !rc; s++)
        if (!(t->rows[s] = calloc(t->len[s] ? t->len[s] : 1, sizeof *t->rows[s])))
            rc = err_set(e, ALISA_ENOMEM, "%s: out of memory for sequence %u", path, s);
    struct trace_step st;
    while (!rc && (rc = trace_reader_next(r, &st, e)) == 1) {
        rc = 0;
        size_t n = (size_t)t->L * st.n_ctx;
        float *row = malloc(n * sizeof *row);
        if (!row) {
            rc = err_set(e, ALISA_ENOMEM, "%s: out of memory for position %u", path, st.pos);
            break;
        }
        memcpy(row, st.w, n * sizeof *row);
        free(t->rows[st.seq][st.pos]);
        t->rows[st.seq][st.pos] = row;
    }
    trace_reader_destroy(r);
    if (rc)
        mem_trace_free(t);
    return rc;
}

/* ---- one request's placement, replayed ---- */

/* One trace layer at one position of a replay: what processing that
 * position (a prompt token, or the decode step whose query it is) did. */
struct pos_stat {
    float attended;   /* decode: tokens attended */
    float resident;   /* tokens on the GPU tier after */
    float recomputed; /* tokens recomputed */
    float retired;    /* decode: tokens the selection retired */
    float h2d, d2h;   /* bytes moved */
    float host, dropped; /* tokens on the host only, and dropped, after it */
};

struct placement_run {
    uint32_t seq, prompt, len;  /* positions 0 .. len - 1 */
    uint32_t refs;              /* unfinished requests using it */
    uint64_t released;          /* when its last request finished (a count) */
    struct pos_stat *st;        /* (len, L) */
    struct pos_stat *st_d;      /* (len, L) the same positions under the dense selection: the
                                   selection's dense leading model layers (dense_m > 0), or NULL */
    double *gpu_at, *cpu_at;    /* (len) the request's bytes on each tier after the position,
                                   every model layer, the GPU's in whole blocks */
    double gpu_peak, cpu_peak;  /* their largest: more than a pool holds, it can never run */
    struct placement_run *next;
};

/* What runs of one configuration share (serve_search_rate's runs): the
 * trace in memory, the synthetic extension's parameters and the cached
 * placement replays. */
struct serve_shared {
    struct mem_trace t;
    int loaded;
    struct trace_gen_params ext;
    int have_ext;
    struct placement_run *runs;
    double cached_bytes;        /* the runs' memory */
    uint64_t releases;
};

struct serve {
    const struct serve_config *cfg;
    const struct workload *w;
    struct serve_result *r;
    struct serve_shared *sh;
    struct kv_shape ks;
    double kvb;                 /* a token's KV bytes in one layer */
    uint32_t Lm, bt;
    uint32_t *tl_of;            /* (Lm) trace layer of each model layer */
    double *mult;               /* (L) model layers reading each trace layer (its selecting
                                   ones when dense_m > 0) */
    uint32_t dense_m;           /* the selection's dense leading model layers (Quest's and
                                   InfiniGen's first two), replayed apart with the dense
                                   selection, as alisa sim replays them */
    double *mult_d;             /* (L) dense leading model layers reading each trace layer */
    int analytic;               /* dense on the GPU alone: no replay needed */
    struct sched_prices sp;     /* the selection's scheduler prices (0 where unmeasured) */
    int gathers;                /* the selection attends a subset */
    int executor;               /* the profile was measured on the executor (its prompt rows
                                   fetch earlier tokens one by one) */
    float *row;                 /* (max_len) a synthetic row */
    uint32_t max_len;
    double host_ns;
};

static void run_free(struct placement_run *p)
{
    if (!p)
        return;
    free(p->st);
    free(p->st_d);
    free(p->gpu_at);
    free(p->cpu_at);
    free(p);
}

static double run_bytes(const struct serve *v, const struct placement_run *p)
{
    return (double)p->len * ((p->st_d ? 2 : 1) * v->sh->t.L * sizeof *p->st + 2 * sizeof(double));
}

/* The GPU bytes of `tokens` tokens of one layer held in whole blocks. */
static double gpu_block_bytes(const struct serve *v, double tokens)
{
    return ceil(tokens / v->bt) * v->bt * v->kvb;
}

/* p's footprint after each position, every model layer: its selecting
 * layers' from p->st and cpu_layer, its dense leading layers' from p->st_d
 * and cpu_layer_d (cpu_layer NULL: no host bytes). */
static void run_totals(struct serve *v, struct placement_run *p, const double *cpu_layer,
                       const double *cpu_layer_d)
{
    const uint32_t L = v->sh->t.L;
    for (uint32_t pos = 0; pos < p->len; pos++) {
        double g = 0, c = 0;
        for (uint32_t l = 0; l < L; l++) {
            const size_t i = (size_t)pos * L + l;
            g += v->mult[l] * gpu_block_bytes(v, p->st[i].resident);
            c += v->mult[l] * (cpu_layer ? cpu_layer[i] : 0);
            if (p->st_d) {
                g += v->mult_d[l] * gpu_block_bytes(v, p->st_d[i].resident);
                c += v->mult_d[l] * (cpu_layer_d ? cpu_layer_d[i] : 0);
            }
        }
        p->gpu_at[pos] = g;
        p->cpu_at[pos] = c;
        p->gpu_peak = g > p->gpu_peak ? g : p->gpu_peak;
        p->cpu_peak = c > p->cpu_peak ? c : p->cpu_peak;
    }
}

/* The row of trace sequence s at pos for every layer, or NULL (a prompt
 * position before the trace's first recorded row). */
static const float *trace_row(const struct serve *v, uint32_t s, uint32_t pos)
{
    return pos < v->sh->t.len[s] ? v->sh->t.rows[s][pos] : NULL;
}

/* One pass of p's positions through sch: prompt rows feed prefill, later
 * ones decode steps. With rec (the future pass of an offline placement) the
 * decode plans are recorded; else their effects fill st (len, L) and
 * cpu_layer.
 * The synthetic rows past the trace come from fresh streams of the same
 * seeds, so both passes see the same rows. */
static int replay_pass(struct serve *v, struct placement_run *p, struct scheduler *sch,
                       struct kv_futures *rec, struct pos_stat *st, double *cpu_layer,
                       uint32_t gpu_tokens, struct alisa_err *e)
{
    const uint32_t L = v->sh->t.L, s = p->seq, tlen = v->sh->t.len[s];
    int rc = 0;
    struct gen_stream **gs = calloc(L, sizeof *gs);
    if (!gs)
        return err_set(e, ALISA_ENOMEM, "out of memory for a %u-token replay", p->len);
    for (uint32_t l = 0; l < L && !rc && p->len > tlen; l++) {
        rc = gen_stream_create(&gs[l], &v->sh->ext, l, p->len,
                               v->sh->t.h.seed + 1 + (uint64_t)s * L + l, e);
        if (!rc)
            gen_stream_skip_to(gs[l], tlen);
    }
    struct scheduler_plan plan;
    for (uint32_t pos = 0; pos < p->len && !rc; pos++) {
        const float *rows = trace_row(v, s, pos);
        for (uint32_t l = 0; l < L && !rc; l++) {
            const float *row = rows ? rows + (size_t)l * (pos + 1) : NULL;
            if (pos >= tlen) {
                gen_stream_row(gs[l], pos, v->row);
                row = v->row;
            }
            if (pos < p->prompt) {
                scheduler_prefill(sch, l, pos, row, p->prompt, &plan);
            } else {
                if ((rc = scheduler_step(sch, l, pos, row, &plan)))
                    break;
                if (!plan.place.oom)
                    scheduler_observe_dense(sch, l, row);
            }
            if (plan.place.oom) {
                rc = err_set(e, ALISA_EINVAL, "placement %s cannot place trace sequence %u's "
                             "position %u with %u GPU tokens per layer (--gpu-tokens: the hot "
                             "buffer must hold a step's attended tokens)",
                             v->cfg->place->name, s, pos, gpu_tokens);
                break;
            }
            if (rec) {
                if (pos >= p->prompt && kv_futures_record(rec, &plan))
                    rc = err_set(e, ALISA_ENOMEM, "out of memory recording the future selection");
                continue;
            }
            struct pos_stat *q = &st[(size_t)pos * L + l];
            q->attended = pos < p->prompt ? 0 : (float)plan.n_attended;
            q->resident = (float)plan.census.gpu;
            q->recomputed = (float)plan.place.n_recompute;
            q->retired = pos < p->prompt ? 0 : (float)plan.n_retired;
            q->h2d = (float)plan.place.bytes_h2d;
            q->d2h = (float)plan.place.bytes_d2h;
            q->host = (float)plan.census.cpu;
            q->dropped = (float)plan.census.dropped;
            cpu_layer[(size_t)pos * L + l] = (double)plan.cpu_bytes;
        }
    }
    for (uint32_t l = 0; l < L; l++)
        gen_stream_destroy(gs[l]);
    free(gs);
    return rc;
}

/* One replay of p's positions through the scheduler core with its tiers,
 * under selection sel (layers: scheduler_config.layers, 0 when every trace
 * layer selects), into st and cpu_layer (len, L); an offline bound
 * (belady, oracle-cost) first gets the request's own future from a pass of
 * the selection alone (its future is the trace's: known to the simulator,
 * not to any real system). */
static int replay_one(struct serve *v, struct placement_run *p, const struct selection_ops *sel,
                      const struct sel_params *selp, uint32_t layers, struct pos_stat *st,
                      double *cpu_layer, uint32_t gpu_tokens, struct alisa_err *e)
{
    const struct serve_config *cfg = v->cfg;
    const uint32_t L = v->sh->t.L;
    struct scheduler_config sc = {.sel = sel, .sel_params = *selp, .place = cfg->place,
                                  .n_streams = L, .layers = layers, .max_len = p->len};
    struct tier_storage store = {v->ks, 0, 1};
    /* an offloading placement's hot buffer, or the whole request */
    uint64_t gpu = (uint64_t)(cfg->place->host_tier ? gpu_tokens : p->len) * (uint64_t)v->kvb +
                   cost_kv_fixed_bytes(&v->ks);
    /* the host pool is shared and checked by the serving loop; a stream's
     * own CPU tier holds all it could ever put there */
    uint64_t cpu = (uint64_t)p->len * ((uint64_t)v->kvb + cost_act_bytes(&v->ks));
    cost_tiers(&store, cfg->hw, gpu, cpu, 1, &sc.place_params);
    sc.place_params.gpu_fraction = -1;
    struct kv_futures *fs = NULL;
    const struct kv_future *fut = NULL;
    struct scheduler *sch = NULL;
    int rc = 0;
    if (cfg->place->offline) {
        struct scheduler_config sc1 = sc;
        sc1.place = &place_gpu_only_ops;
        sc1.place_params.gpu_bytes = (uint64_t)p->len * sc.place_params.kv_bytes;
        if (!(rc = kv_futures_create(&fs, L, e)) && !(rc = scheduler_create(&sch, &sc1, NULL, e)))
            rc = replay_pass(v, p, sch, fs, NULL, NULL, gpu_tokens, e);
        scheduler_destroy(sch);
        sch = NULL;
        if (!rc && !(fut = kv_futures_build(fs, p->len, e)))
            rc = ALISA_ENOMEM;
    }
    if (!rc && !(rc = scheduler_create(&sch, &sc, fut, e)))
        rc = replay_pass(v, p, sch, NULL, st, cpu_layer, gpu_tokens, e);
    scheduler_destroy(sch);
    kv_futures_free(fs);
    return rc;
}

/* A request's placement: its selecting layers replayed under the
 * selection, and when the selection attends its leading model layers
 * densely (dense_m > 0) those replayed again under the dense selection
 * with the same placement and tiers, as alisa sim replays them (the
 * trace's layers stand for model layers of either kind). */
static int replay_run(struct serve *v, struct placement_run *p, uint32_t gpu_tokens,
                      struct alisa_err *e)
{
    const struct serve_config *cfg = v->cfg;
    const uint32_t L = v->sh->t.L;
    const size_t n = (size_t)p->len * L;
    double *cpu_layer = calloc(n, sizeof *cpu_layer), *cpu_layer_d = NULL;
    if (v->dense_m) {
        cpu_layer_d = calloc(n, sizeof *cpu_layer_d);
        p->st_d = calloc(n, sizeof *p->st_d);
    }
    int rc = 0;
    if (!cpu_layer || (v->dense_m && (!cpu_layer_d || !p->st_d)))
        rc = err_set(e, ALISA_ENOMEM, "out of memory for a %u-token replay", p->len);
    /* with dense leading layers apart, every trace layer selects */
    if (!rc)
        rc = replay_one(v, p, cfg->sel, &cfg->sel_params, v->dense_m ? 0 : L, p->st, cpu_layer,
                        gpu_tokens, e);
    const struct sel_params none = {0};
    if (!rc && v->dense_m)
        rc = replay_one(v, p, &sel_dense_ops, &none, 0, p->st_d, cpu_layer_d, gpu_tokens, e);
    if (!rc)
        run_totals(v, p, cpu_layer, cpu_layer_d);
    free(cpu_layer);
    free(cpu_layer_d);
    return rc;
}

/* The placement run of a request (sequence s, prompt P, len positions),
 * shared with the requests of the same sequence and lengths (only those: a
 * placement may plan by the request's length, alisa's greedy schedule does,
 * and the synthetic rows are drawn for it). */
static int run_get(struct serve *v, uint32_t s, uint32_t P, uint32_t len, uint32_t gpu_tokens,
                   struct placement_run **out, struct alisa_err *e)
{
    for (struct placement_run *p = v->sh->runs; p; p = p->next)
        if (p->seq == s && p->prompt == P && p->len == len) {
            p->refs++;
            *out = p;
            return 0;
        }
    struct placement_run *p = calloc(1, sizeof *p);
    if (!p)
        return err_set(e, ALISA_ENOMEM, "out of memory for a placement replay");
    *p = (struct placement_run){.seq = s, .prompt = P, .len = len, .refs = 1};
    p->st = calloc((size_t)len * v->sh->t.L, sizeof *p->st);
    p->gpu_at = malloc(len * sizeof *p->gpu_at);
    p->cpu_at = malloc(len * sizeof *p->cpu_at);
    int rc = 0;
    if (!p->st || !p->gpu_at || !p->cpu_at)
        rc = err_set(e, ALISA_ENOMEM, "out of memory for a %u-token replay", len);
    else if (v->analytic) { /* every token on the GPU, every token attended */
        for (uint32_t pos = 0; pos < len; pos++)
            for (uint32_t l = 0; l < v->sh->t.L; l++)
                p->st[(size_t)pos * v->sh->t.L + l] = (struct pos_stat){
                    .attended = pos < P ? 0 : (float)(pos + 1), .resident = (float)(pos + 1)};
        run_totals(v, p, NULL, NULL);
    } else {
        rc = replay_run(v, p, gpu_tokens, e);
        v->r->replays++;
    }
    if (rc) {
        run_free(p);
        return rc;
    }
    p->next = v->sh->runs;
    v->sh->runs = p;
    v->sh->cached_bytes += run_bytes(v, p);
    *out = p;
    return 0;
}

/* A run no request holds stays cached (the next request of the same
 * sequence and prompt reuses it) until the cache passes its budget; then
 * the ones held by no request go, least recently released first. */
static void run_release(struct serve *v, struct placement_run *p)
{
    if (--p->refs)
        return;
    p->released = ++v->sh->releases;
    while (v->sh->cached_bytes > SERVE_CACHE_BYTES) {
        struct placement_run **oldest = NULL;
        for (struct placement_run **q = &v->sh->runs; *q; q = &(*q)->next)
            if ((*q)->refs == 0 && (!oldest || (*q)->released < (*oldest)->released))
                oldest = q;
        if (!oldest)
            break;
        struct placement_run *gone = *oldest;
        *oldest = gone->next;
        v->sh->cached_bytes -= run_bytes(v, gone);
        run_free(gone);
    }
}

/* ---- the serving loop ---- */

/* A request's share of the shell: its trace sequence, its placement replay
 * and the pool bytes it holds (the batcher keeps its tokens). */
struct rq {
    uint32_t seq;
    double gpu_held, cpu_held;
    struct placement_run *run;
};

static void stat_of(double *x, uint32_t n, struct serve_stat *s)
{
    memset(s, 0, sizeof *s);
    if (!n)
        return;
    gsl_sort(x, 1, n);
    s->mean = gsl_stats_mean(x, 1, n);
    s->p50 = gsl_stats_quantile_from_sorted_data(x, 1, n, 0.50);
    s->p90 = gsl_stats_quantile_from_sorted_data(x, 1, n, 0.90);
    s->p99 = gsl_stats_quantile_from_sorted_data(x, 1, n, 0.99);
    s->max = x[n - 1];
}

/* The trace sequence request i reads: i mod S among those long enough. */
static int map_request(const struct serve *v, uint32_t i, uint32_t prompt, uint32_t need,
                       uint32_t *seq, struct alisa_err *e)
{
    const struct mem_trace *t = &v->sh->t;
    uint32_t fit = 0, rows = 0; /* long enough; with rows from the request's prompt on */
    for (uint32_t s = 0; s < t->S; s++) {
        rows += t->row_start[s] <= prompt;
        fit += t->row_start[s] <= prompt && t->len[s] >= need;
    }
    if (rows == 0 && !v->analytic)
        return err_set(e, ALISA_EINVAL, "%s: request %u's decode starts at position %u, before "
                       "every trace sequence's first recorded row (a trace with its prompt rows "
                       "recorded: alisa trace gen --prompt-rows)", v->cfg->trace, i, prompt);
    if (fit == 0 && !(v->cfg->extend || v->analytic))
        return err_set(e, ALISA_EINVAL, "%s: request %u needs %u positions (prompt + output - 1), "
                       "longer than every trace sequence (pass --extend to continue them with "
                       "synthetic rows)", v->cfg->trace, i, need);
    uint32_t k = i % (fit ? fit : rows ? rows : t->S);
    for (uint32_t s = 0; s < t->S; s++)
        if (fit ? t->row_start[s] <= prompt && t->len[s] >= need
                : !rows || t->row_start[s] <= prompt) {
            if (k == 0) {
                *seq = s;
                return 0;
            }
            k--;
        }
    ALISA_ASSERT(0);
    return 0;
}

struct layer_load {
    double attended, resident, recomputed, h2d, d2h, pairs, keys, copies_h2d, copies_d2h;
    double retired, prompt_rows, prompt_context; /* the scheduler's and arenas' work */
    double prompt_host, prompt_dropped; /* what prompt rows read off the device */
};

/* Adds what item s of request q did in trace layer l (its replay's st)
 * to x. */
static void load_add(struct layer_load *x, const struct pos_stat *st, uint32_t L, uint32_t l,
                     const struct batcher_item *s, int decode)
{
    double h2d = 0, d2h = 0;
    /* a decode step moves what its replay moved; a prompt chunk (the
     * prompt, or a preempted request's tokens computed again) computes
     * every token, loading nothing, and offloads what its replay had
     * offloaded by then */
    for (uint32_t pos = s->first; pos < s->first + s->n; pos++) {
        const struct pos_stat *ps = &st[(size_t)pos * L + l];
        d2h += ps->d2h;
        if (decode) {
            h2d += ps->h2d;
            x->recomputed += ps->recomputed;
            x->attended += ps->attended;
            x->resident += ps->resident;
            x->retired += ps->retired;
        } else {
            x->prompt_rows += 1;
            x->prompt_context += pos + 1.0;
            x->prompt_host += ps->host;
            x->prompt_dropped += ps->dropped;
        }
    }
    if (!decode) { /* causal attention of the chunk over everything before it */
        x->pairs += (double)s->n * s->first + (double)s->n * (s->n + 1) / 2;
        x->keys += (double)s->first + s->n;
    }
    x->h2d += h2d;
    x->d2h += d2h;
    x->copies_h2d += h2d > 0; /* one packed copy per request and direction */
    x->copies_d2h += d2h > 0;
}

/* Prices one iteration (serve.h: an alisa sim decode step's layers); ll
 * holds a layer_load per trace layer, and with dense_m > 0 one more per
 * trace layer for the dense leading layers. */
static double price_iteration(struct serve *v, const struct batcher_item *it, uint32_t n_it,
                              const struct rq *rq, struct layer_load *ll, double *compute_ns,
                              double *transfer_ns)
{
    const struct serve_config *cfg = v->cfg;
    const uint32_t L = v->sh->t.L;
    const struct workload *w = v->w;
    memset(ll, 0, (v->dense_m ? 2 : 1) * L * sizeof *ll);
    struct iteration_shape base = {0};
    double decode_context = 0; /* summed over the decoding requests */
    for (uint32_t k = 0; k < n_it; k++) {
        const struct batcher_item *s = &it[k];
        const struct rq *q = &rq[s->id];
        const uint32_t P = w->req[s->id].prompt_len;
        base.rows += s->n;
        base.sampled += s->samples;
        int decode = s->n == 1 && s->first >= P;
        base.decodes += decode;
        decode_context += decode ? s->first + 1.0 : 0;
        for (uint32_t l = 0; l < L; l++) {
            load_add(&ll[l], q->run->st, L, l, s, decode);
            if (v->dense_m)
                load_add(&ll[L + l], q->run->st_d, L, l, s, decode);
        }
    }
    const struct hw_profile *hw = cfg->hw;
    double le = 0, ce = 0, ce_prev = 0, oe = 0, busy = 0, link = 0;
    for (uint32_t l = 0; l < v->Lm; l++) {
        const struct layer_load *x = &ll[(l < v->dense_m ? L : 0) + v->tl_of[l]];
        struct iteration_shape is = base;
        is.attended = x->attended;
        is.resident = x->resident;
        is.prefill_pairs = x->pairs;
        is.prefill_keys = x->keys;
        is.dense_cache = cfg->dense_cache; /* priced so where hw measured it */
        /* a selection's dense leading layers attend whole, gathering nothing */
        double C = cost_iteration_layer_ns(v->cfg->model, hw, &is, cfg->precision,
                                           v->gathers && l >= v->dense_m, l == v->Lm - 1);
        double K = 0, S = 0;
        if (!v->analytic) {
            /* the scheduler's own time and the arenas' bookkeeping where the
             * profile prices them, as alisa sim prices a decode step's (the
             * scheduler before the layer, the bookkeeping with its copies),
             * a prompt row's bookkeeping as alisa sim's stepwise prefill */
            const double d = base.decodes;
            if (d > 0) {
                S = cost_schedule_ns(&v->sp, d, decode_context / d, x->attended / d, x->retired);
                K += cost_kvstore_ns(hw, d, decode_context / d);
            }
            if (x->prompt_rows > 0)
                K += cost_kvstore_ns(hw, x->prompt_rows, x->prompt_context / x->prompt_rows);
            /* the executor's prompt rows read every earlier token where it
             * lies, as alisa sim's stepwise prefill prices them */
            if (v->executor && x->prompt_rows > 0)
                C += cost_prompt_fetch_ns(cfg->model, hw, x->prompt_host, x->prompt_dropped,
                                          cfg->precision);
        }
        if (v->host_ns > C)
            C = v->host_ns;
        C += S; /* after the launches' floor, as alisa sim's T_COMPUTE */
        double R = cost_recompute_gpu_ns(cfg->model, hw, x->recomputed, cfg->precision);
        double relay = cfg->sw && cfg->sw->pageable_relay ? cost_pageable_relay_ns(hw, x->h2d) : 0;
        double Ld = (x->h2d > 0 ? cost_transfer_ns(hw, x->h2d, x->copies_h2d) + relay : 0) + K;
        double O = x->d2h > 0 ? cost_transfer_ns(hw, x->d2h, x->copies_d2h) : 0;
        v->r->bytes_h2d += x->h2d;
        v->r->bytes_d2h += x->d2h;
        v->r->recomputed_tokens += x->recomputed;
        busy += R + C;
        link += Ld + O;
        if (hw->serial) {
            ce += Ld + R + C + O;
            continue;
        }
        /* the layer's loads wait for the link and, with prefetch, for the
         * compute two layers back (double buffering), else the previous;
         * a selection that reads the layer's own row waits for its query
         * (as sim's prefetches) unless its method speculates a layer ahead */
        int wait = cfg->no_prefetch || (cfg->sel->needs_present && !cfg->sel->present_ahead);
        double ls = le > (wait ? ce : ce_prev) ? le : (wait ? ce : ce_prev);
        le = ls + Ld;
        ce_prev = ce;
        ce = (ce > le ? ce : le) + R + C;
        oe = (oe > ce ? oe : ce) + O;
    }
    *compute_ns = busy;
    *transfer_ns = link;
    return ce > oe ? ce : oe;
}

/* The KV pools and what the requests hold of them. */
struct pool {
    double gpu, cpu;           /* capacity, bytes */
    double gpu_used, cpu_used;
};

/* Whether request q can grow to its footprint after position last. */
static int kv_fits(const struct pool *pl, const struct rq *q, uint32_t last)
{
    return pl->gpu_used + (q->run->gpu_at[last] - q->gpu_held) <= pl->gpu &&
           pl->cpu_used + (q->run->cpu_at[last] - q->cpu_held) <= pl->cpu;
}

/* Grows (or shrinks) q's allocation to its footprint after position last. */
static void kv_take(struct pool *pl, struct rq *q, uint32_t last)
{
    pl->gpu_used += q->run->gpu_at[last] - q->gpu_held;
    pl->cpu_used += q->run->cpu_at[last] - q->cpu_held;
    q->gpu_held = q->run->gpu_at[last];
    q->cpu_held = q->run->cpu_at[last];
}

static void kv_free(struct pool *pl, struct rq *q)
{
    pl->gpu_used -= q->gpu_held;
    pl->cpu_used -= q->cpu_held;
    q->gpu_held = q->cpu_held = 0;
}

static int pools(struct serve *v, double *gpu_pool, double *cpu_pool, uint32_t *gpu_tokens)
{
    const struct serve_config *cfg = v->cfg;
    const struct model_shape *m = cfg->model;
    struct serve_result *r = v->r;
    double util = cfg->gpu_mem_utilization > 0 ? cfg->gpu_mem_utilization : SERVE_GPU_MEM_UTILIZATION;
    double gmem = cfg->gpu_mem_bytes > 0 ? cfg->gpu_mem_bytes : cfg->hw->gpu_mem_gib * 1073741824.0;
    uint32_t seqs = cfg->max_num_seqs ? cfg->max_num_seqs : SERVE_MAX_NUM_SEQS;
    uint32_t tokens = cfg->max_batched_tokens ? cfg->max_batched_tokens : SERVE_MAX_BATCHED_TOKENS;
    *gpu_pool = cfg->kv_pool_bytes > 0
                    ? cfg->kv_pool_bytes
                    : util * gmem - m->weight_bytes_fp16 - cost_prefill_peak_act_bytes(m, tokens, seqs);
    *cpu_pool = cfg->cpu_mem_bytes > 0 ? cfg->cpu_mem_bytes : cfg->hw->host_dram_gib * 1073741824.0;
    r->gpu_kv_capacity_bytes = *gpu_pool > 0 ? *gpu_pool : 0;
    r->cpu_kv_capacity_bytes = cfg->place->host_tier ? *cpu_pool : 0;
    if (*gpu_pool <= 0) {
        r->oom = 1;
        snprintf(r->oom_reason, sizeof r->oom_reason,
                 "the weights (%.1f GB) and a %u-token prefill's activations leave no KV room "
                 "in %.0f%% of %.1f GB", m->weight_bytes_fp16 / 1e9, tokens, util * 100,
                 gmem / 1e9);
        return 0;
    }
    *gpu_tokens = cfg->gpu_tokens;
    if (cfg->place->host_tier && !*gpu_tokens) {
        double share = *gpu_pool / ((double)seqs * v->Lm * v->kvb);
        share = floor(share / v->bt) * v->bt;
        /* no request holds more than its own tokens */
        *gpu_tokens = share < v->max_len ? (uint32_t)share : v->max_len;
        if (*gpu_tokens == 0) {
            r->oom = 1;
            snprintf(r->oom_reason, sizeof r->oom_reason,
                     "the GPU KV pool (%.2f GB) holds less than a block per layer for each of %u "
                     "requests (lower --max-num-seqs or set --gpu-tokens)", *gpu_pool / 1e9,
                     seqs);
        }
    }
    r->gpu_tokens = cfg->place->host_tier ? *gpu_tokens : 0;
    return 0;
}

static void shared_free(struct serve_shared *sh)
{
    while (sh->runs) {
        struct placement_run *p = sh->runs;
        sh->runs = p->next;
        run_free(p);
    }
    mem_trace_free(&sh->t);
    memset(sh, 0, sizeof *sh);
}

/* The batcher's view of the pools (struct batcher_memory): a request's
 * footprint after a position is its placement replay's, fetched at its
 * first admission. */
struct mem_ctx {
    struct serve *v;
    struct pool *pl;
    struct rq *rq;
    uint32_t gpu_tokens;
    struct alisa_err *e;
    uint32_t never; /* a request whose peak no pool holds, or UINT32_MAX */
};

static int mem_fits(void *user, uint32_t id, uint32_t last)
{
    struct mem_ctx *c = user;
    struct rq *q = &c->rq[id];
    const struct wl_request *w = &c->v->w->req[id];
    int rc;
    if (!q->run && (rc = run_get(c->v, q->seq, w->prompt_len, w->prompt_len + w->output_len - 1,
                                 c->gpu_tokens, &q->run, c->e)))
        return rc;
    if (q->run->gpu_peak > c->pl->gpu || q->run->cpu_peak > c->pl->cpu) {
        c->never = id; /* it would preempt itself for ever: the run stops, out of memory */
        return ALISA_ENOMEM;
    }
    return kv_fits(c->pl, q, last);
}

static void mem_take(void *user, uint32_t id, uint32_t last)
{
    struct mem_ctx *c = user;
    kv_take(c->pl, &c->rq[id], last);
}

static void mem_release(void *user, uint32_t id)
{
    struct mem_ctx *c = user;
    kv_free(c->pl, &c->rq[id]);
}

/* What one run holds beside struct serve. */
struct serve_state {
    struct batcher_config bc;
    struct rq *rq;                /* (n) */
    uint32_t *plen, *olen;        /* (n) */
    struct batcher_item *items;   /* (max_num_seqs) */
    struct layer_load *ll;        /* (trace layers, twice with dense_m > 0) */
    double *x;                    /* (n) serve_metrics' scratch */
    struct batcher *bt;
    struct pool pl;
    uint32_t gpu_tokens;
};

static void serve_state_free(struct serve *v, struct serve_state *s)
{
    /* the requests are gone: every replay is free for the next run */
    for (struct placement_run *p = v->sh->runs; p; p = p->next)
        p->refs = 0;
    batcher_destroy(s->bt);
    free(s->rq);
    free(s->plen);
    free(s->olen);
    free(s->items);
    free(s->ll);
    free(s->x);
    free(v->tl_of);
    free(v->mult);
    free(v->mult_d);
    free(v->row);
}

/* v's shape of the run (KV bytes, layer map, the longest request), the
 * buffers, the synthetic extension's parameters when asked, the pools. */
static int serve_setup(struct serve *v, struct serve_state *s, struct alisa_err *e)
{
    const struct serve_config *cfg = v->cfg;
    const struct workload *w = v->w;
    const uint32_t n = w->n;
    v->ks = kv_shape_of(cfg->model, cfg->precision);
    v->kvb = (double)cost_kv_bytes(&v->ks);
    v->Lm = cfg->model->n_layers;
    v->bt = cfg->block_tokens ? cfg->block_tokens : SERVE_BLOCK_TOKENS;
    v->analytic = !cfg->place->host_tier && !cfg->sel->budgeted;
    v->gathers = cfg->sel->gathers;
    if (cfg->dense_cache && (cfg->sel->budgeted || cfg->sel->gathers || cfg->place->host_tier))
        return err_set(e, ALISA_EINVAL, "the dense cache holds and attends every token on the "
                       "device: not selection %s under placement %s", cfg->sel->name,
                       cfg->place->name);
    /* (analytic then: no scheduler or arenas are priced, as the dense
     * cache has none) */
    v->executor = cost_executor_profile(cfg->hw);
    v->host_ns = cost_layer_host_ns(cfg->sw, cfg->sel->name);
    int rc = v->analytic ? 0 : cost_schedule_prices(cfg->hw, cfg->sel->name, &v->sp, e);
    if (rc)
        return rc;
    s->bc = (struct batcher_config){
        .max_num_seqs = cfg->max_num_seqs ? cfg->max_num_seqs : SERVE_MAX_NUM_SEQS,
        .max_batched_tokens = cfg->max_batched_tokens ? cfg->max_batched_tokens
                                                      : SERVE_MAX_BATCHED_TOKENS,
        .no_chunked_prefill = cfg->no_chunked_prefill};
    v->r->n = n;
    v->r->req = calloc(n, sizeof *v->r->req);
    s->rq = calloc(n, sizeof *s->rq);
    s->plen = malloc((n ? n : 1) * sizeof *s->plen);
    s->olen = malloc((n ? n : 1) * sizeof *s->olen);
    s->items = malloc((size_t)s->bc.max_num_seqs * sizeof *s->items);
    if (!v->analytic && cfg->sel->dense_layers) {
        v->dense_m = cfg->sel->dense_layers(&cfg->sel_params);
        v->dense_m = v->dense_m < v->Lm ? v->dense_m : v->Lm;
    }
    v->tl_of = malloc(v->Lm * sizeof *v->tl_of);
    v->mult = calloc(v->sh->t.L, sizeof *v->mult);
    v->mult_d = calloc(v->sh->t.L, sizeof *v->mult_d);
    s->ll = malloc((v->dense_m ? 2 : 1) * v->sh->t.L * sizeof *s->ll);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t need = w->req[i].prompt_len + w->req[i].output_len - 1;
        v->max_len = need > v->max_len ? need : v->max_len;
    }
    v->row = malloc((size_t)(v->max_len + 1) * sizeof *v->row);
    s->x = malloc((n ? n : 1) * sizeof *s->x);
    if (!v->r->req || !s->rq || !s->plen || !s->olen || !s->items || !v->tl_of || !v->mult ||
        !v->mult_d || !s->ll || !v->row || !s->x)
        return err_set(e, ALISA_ENOMEM, "out of memory for %u requests", n);
    for (uint32_t l = 0; l < v->Lm; l++) {
        v->tl_of[l] = (uint32_t)((uint64_t)l * v->sh->t.L / v->Lm);
        (l < v->dense_m ? v->mult_d : v->mult)[v->tl_of[l]] += 1;
    }
    if (cfg->extend && !v->analytic && !v->sh->have_ext) {
        if ((rc = replay_extension_params(cfg->trace, &v->sh->ext, e)))
            return rc;
        v->sh->have_ext = 1;
    }
    return pools(v, &s->pl.gpu, &s->pl.cpu, &s->gpu_tokens);
}

/* Each request checked against the model's context and the budget, mapped
 * to its trace sequence, its result row started; the batcher made. */
static int serve_requests(struct serve *v, struct serve_state *s, struct alisa_err *e)
{
    const struct serve_config *cfg = v->cfg;
    const struct model_shape *m = cfg->model;
    const struct workload *w = v->w;
    int rc = 0;
    for (uint32_t i = 0; i < w->n && !rc; i++) {
        const struct wl_request *q = &w->req[i];
        if ((uint64_t)q->prompt_len + q->output_len > m->max_seq && m->max_seq > 0)
            rc = err_set(e, ALISA_EINVAL, "request %u: prompt %u + output %u tokens, over %s's "
                         "context of %u", i, q->prompt_len, q->output_len, m->name, m->max_seq);
        else if (cfg->no_chunked_prefill &&
                 q->prompt_len + q->output_len - 1 > s->bc.max_batched_tokens)
            /* a preempted request runs its prompt and output again in one
             * iteration; vLLM without chunked prefill sets the budget to the
             * model's context (EngineArgs._set_default_args) */
            rc = err_set(e, ALISA_EINVAL, "request %u: %u prompt + %u output tokens do not fit "
                         "--max-batched-tokens %u without chunked prefill (a preempted request "
                         "runs them all in one iteration)", i, q->prompt_len, q->output_len,
                         s->bc.max_batched_tokens);
        else
            rc = map_request(v, i, q->prompt_len, q->prompt_len + q->output_len - 1,
                             &s->rq[i].seq, e);
        v->r->req[i] = (struct serve_request){.arrival_s = q->arrival_s,
                                              .prompt_len = q->prompt_len,
                                              .output_len = q->output_len,
                                              .trace_seq = s->rq[i].seq};
        s->plen[i] = q->prompt_len;
        s->olen[i] = q->output_len;
    }
    return rc ? rc : batcher_create(&s->bt, &s->bc, w->n, s->plen, s->olen, e);
}

/* The batcher's error or stuck request as the run's out-of-memory result:
 * 1 when the run stops there (rc cleared when it was a request that never
 * fits), 0 to go on. */
static int serve_oom(struct serve *v, struct serve_state *s, const struct mem_ctx *mc,
                     uint32_t stuck, int *rc)
{
    const struct workload *w = v->w;
    struct serve_result *r = v->r;
    if (*rc) {
        if (mc->never != UINT32_MAX) {
            const struct placement_run *p = s->rq[mc->never].run;
            *rc = 0;
            r->oom = 1;
            snprintf(r->oom_reason, sizeof r->oom_reason,
                     "request %u (%u + %u tokens) can never run: it needs %.3g GB of GPU KV "
                     "(pool %.3g GB) and %.3g GB of host KV (%.3g GB) at its peak",
                     mc->never, w->req[mc->never].prompt_len, w->req[mc->never].output_len,
                     p->gpu_peak / 1e9, s->pl.gpu / 1e9, p->cpu_peak / 1e9, s->pl.cpu / 1e9);
        }
        return 1;
    }
    if (stuck == UINT32_MAX)
        return 0;
    const struct placement_run *p = s->rq[stuck].run;
    uint32_t last = w->req[stuck].prompt_len + batcher_generated(s->bt, stuck) - 1;
    r->oom = 1;
    snprintf(r->oom_reason, sizeof r->oom_reason,
             "request %u (%u + %u tokens) does not fit alone: it needs %.2f GB of GPU KV "
             "(pool %.2f GB) and %.2f GB of host KV (%.2f GB)", stuck, w->req[stuck].prompt_len,
             w->req[stuck].output_len, p->gpu_at[last] / 1e9, s->pl.gpu / 1e9,
             p->cpu_at[last] / 1e9, s->pl.cpu / 1e9);
    return 1;
}

/* The iterations, from the first arrival until every request is done (or
 * the run is out of memory); *running_sum the running requests summed over
 * them. */
static int serve_iterate(struct serve *v, struct serve_state *s, FILE *timeline,
                         double *running_sum, struct alisa_err *e)
{
    const struct workload *w = v->w;
    struct serve_result *r = v->r;
    const uint32_t n = w->n;
    struct mem_ctx mc = {v, &s->pl, s->rq, s->gpu_tokens, e, UINT32_MAX};
    const struct batcher_memory mem = {&mc, mem_fits, mem_take, mem_release};
    if (timeline)
        fputs(SERVE_TIMELINE_HEADER, timeline);
    double t = n ? w->req[0].arrival_s : 0;
    uint32_t next_arrival = 0, done = 0;
    int rc = 0;
    while (done < n && !rc) {
        while (next_arrival < n && w->req[next_arrival].arrival_s <= t)
            batcher_arrive(s->bt, next_arrival++);
        if (batcher_running(s->bt) == 0 && batcher_waiting(s->bt) == 0) {
            t = w->req[next_arrival].arrival_s;
            continue;
        }
        uint32_t n_it = 0, preempted = 0, stuck = UINT32_MAX, tokens = 0, prefill_tokens = 0;
        rc = batcher_plan(s->bt, &mem, s->items, &n_it, &preempted, &stuck);
        if (serve_oom(v, s, &mc, stuck, &rc))
            break;
        r->preemptions += preempted;
        if (n_it == 0) { /* everything running was preempted: plan again at once */
            ALISA_ASSERT(preempted > 0);
            continue;
        }
        double compute_ns, transfer_ns;
        double dur = price_iteration(v, s->items, n_it, s->rq, s->ll, &compute_ns, &transfer_ns);
        double start = t;
        t += dur * 1e-9;
        r->compute_s += compute_ns * 1e-9;
        r->transfer_s += transfer_ns * 1e-9;
        r->stall_s += (dur - compute_ns > 0 ? dur - compute_ns : 0) * 1e-9;
        r->iterations++;
        *running_sum += batcher_running(s->bt);
        if (s->pl.gpu_used > r->peak_gpu_kv_bytes)
            r->peak_gpu_kv_bytes = s->pl.gpu_used;
        if (s->pl.cpu_used > r->peak_cpu_kv_bytes)
            r->peak_cpu_kv_bytes = s->pl.cpu_used;
        for (uint32_t k = 0; k < n_it; k++) {
            tokens += s->items[k].n;
            if (s->items[k].first < w->req[s->items[k].id].prompt_len)
                prefill_tokens += s->items[k].n;
        }
        batcher_done(s->bt, &mem, s->items, n_it);
        for (uint32_t k = 0; k < n_it; k++) {
            const struct batcher_item *it = &s->items[k];
            if (it->first_token)
                r->req[it->id].first_token_s = t;
            if (it->finished) {
                r->req[it->id].finish_s = t;
                run_release(v, s->rq[it->id].run);
                s->rq[it->id].run = NULL;
                done++;
            }
        }
        if (timeline)
            fprintf(timeline, "%u,%.9f,%.9f,%u,%u,%u,%u,%u,%.0f,%.0f\n", r->iterations - 1,
                    start, t, batcher_running(s->bt), batcher_waiting(s->bt), tokens,
                    prefill_tokens, preempted, s->pl.gpu_used, s->pl.cpu_used);
    }
    return rc;
}

/* serve_run over sh: the trace loaded on the first run, the replays kept
 * for the next (every run of one sh must have the same cfg but its
 * workload). */
static int serve_run_shared(struct serve_shared *sh, const struct serve_config *cfg,
                            const struct workload *w, struct serve_result *r, FILE *timeline,
                            struct alisa_err *e)
{
    memset(r, 0, sizeof *r);
    struct serve v = {.cfg = cfg, .w = w, .r = r, .sh = sh};
    struct serve_state s = {0};
    double running_sum = 0;
    int rc = 0;
    if (!sh->loaded && (rc = mem_trace_load(cfg->trace, &sh->t, e)))
        return rc;
    sh->loaded = 1;
    if (!(rc = serve_setup(&v, &s, e)) && !r->oom && !(rc = serve_requests(&v, &s, e)))
        rc = serve_iterate(&v, &s, timeline, &running_sum, e);
    if (!rc && s.bt)
        for (uint32_t i = 0; i < w->n; i++)
            r->req[i].preemptions = batcher_preemptions(s.bt, i);
    r->repeated_prefill_tokens = s.bt ? (double)batcher_lost_tokens(s.bt) : 0;
    if (!rc && !r->oom) {
        serve_metrics(r, cfg->slo_ttft_s, cfg->slo_tpot_s, s.x);
        r->mean_running = r->iterations ? running_sum / r->iterations : 0;
    }
    serve_state_free(&v, &s);
    if (rc)
        serve_result_free(r);
    return rc;
}

int serve_run(const struct serve_config *cfg, const struct workload *w, struct serve_result *r,
              FILE *timeline, struct alisa_err *e)
{
    struct serve_shared sh = {0};
    int rc = serve_run_shared(&sh, cfg, w, r, timeline, e);
    shared_free(&sh);
    return rc;
}

void serve_result_free(struct serve_result *r)
{
    free(r->req);
    r->req = NULL;
    r->n = 0;
}

/* One run of p's stream at rate into *r; whether it attains. */
static int run_at(struct serve_shared *sh, const struct serve_config *cfg,
                  const struct wl_params *p, double rate, double attain, struct serve_result *r,
                  int *ok, struct alisa_err *e)
{
    struct wl_params q = *p;
    q.rate = rate;
    struct workload w;
    int rc = workload_generate(&q, &w, e);
    if (!rc)
        rc = serve_run_shared(sh, cfg, &w, r, NULL, e);
    workload_free(&w);
    *ok = !rc && !r->oom && r->slo_attained >= attain;
    return rc;
}

int serve_search_rate(const struct serve_config *cfg, const struct wl_params *p, double attain,
                      double lo, double hi, double tol, double *rate, uint32_t *runs,
                      struct serve_result *r, struct alisa_err *e)
{
    memset(r, 0, sizeof *r);
    *rate = 0;
    *runs = 0;
    if (!(cfg->slo_ttft_s > 0) && !(cfg->slo_tpot_s > 0))
        return err_set(e, ALISA_EINVAL, "a rate search needs an objective (--slo-ttft or "
                       "--slo-tpot)");
    if (!(lo > 0) || !(hi > lo) || !isfinite(hi))
        return err_set(e, ALISA_EINVAL, "rate search %g:%g: expected 0 < low < high requests/s",
                       lo, hi);
    if (!(attain > 0 && attain <= 1) || !(tol > 0))
        return err_set(e, ALISA_EINVAL, "rate search: attainment %g in (0, 1], tolerance %g > 0",
                       attain, tol);
    struct serve_shared sh = {0}; /* one trace load and one set of replays for every rate */
    int ok, rc = run_at(&sh, cfg, p, hi, attain, r, &ok, e);
    ++*runs;
    if (rc || ok) {
        *rate = rc ? 0 : hi;
        shared_free(&sh);
        return rc;
    }
    serve_result_free(r);
    rc = run_at(&sh, cfg, p, lo, attain, r, &ok, e);
    ++*runs;
    struct serve_result mid;
    while (!rc && ok && hi - lo > tol * lo) {
        double m = 0.5 * (lo + hi);
        rc = run_at(&sh, cfg, p, m, attain, &mid, &ok, e);
        ++*runs;
        if (rc) {
            serve_result_free(r);
        } else if (ok) {
            serve_result_free(r);
            *r = mid;
            lo = m;
        } else {
            serve_result_free(&mid);
            hi = m;
            ok = 1; /* lo still attains */
        }
    }
    *rate = !rc && ok ? lo : 0;
    shared_free(&sh);
    return rc;
}

void serve_metrics(struct serve_result *r, double slo_ttft_s, double slo_tpot_s, double *scratch)
{
    /* vllm/benchmarks/serve.py, calculate_metrics: TPOT excludes the first
     * token and is taken over requests of more than one */
    const uint32_t n = r->n;
    double first = INFINITY, out_tokens = 0, *x = scratch;
    uint32_t good = 0, n_tpot = 0;
    r->makespan_s = 0;
    for (uint32_t i = 0; i < n; i++)
        first = r->req[i].arrival_s < first ? r->req[i].arrival_s : first;
    for (uint32_t i = 0; i < n; i++) {
        struct serve_request *q = &r->req[i];
        q->ttft_s = q->first_token_s - q->arrival_s;
        q->e2e_s = q->finish_s - q->arrival_s;
        q->tpot_s = q->output_len > 1 ? (q->e2e_s - q->ttft_s) / (q->output_len - 1) : 0;
        out_tokens += q->output_len;
        if (q->finish_s - first > r->makespan_s)
            r->makespan_s = q->finish_s - first;
        good += (!(slo_ttft_s > 0) || q->ttft_s <= slo_ttft_s) &&
                (!(slo_tpot_s > 0) || q->output_len < 2 || q->tpot_s <= slo_tpot_s);
    }
    for (uint32_t i = 0; i < n; i++)
        x[i] = r->req[i].ttft_s;
    stat_of(x, n, &r->ttft);
    for (uint32_t i = 0; i < n; i++)
        x[i] = r->req[i].e2e_s;
    stat_of(x, n, &r->e2e);
    for (uint32_t i = 0; i < n; i++)
        if (r->req[i].output_len > 1)
            x[n_tpot++] = r->req[i].tpot_s;
    stat_of(x, n_tpot, &r->tpot);
    r->throughput_tok_s = r->request_rate_s = r->goodput_req_s = 0;
    if (r->makespan_s > 0) {
        r->throughput_tok_s = out_tokens / r->makespan_s;
        r->request_rate_s = n / r->makespan_s;
        r->goodput_req_s = good / r->makespan_s;
    }
    r->slo_attained = n ? (double)good / n : 1;
}
