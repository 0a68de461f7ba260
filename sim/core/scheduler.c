/* The scheduler core (contract in sched.h): per-stream selection and
 * placement states, shared plan buffers, and the always-on invariant check.
 *
 * Owns the order of operations within a step and the hand-off of attended
 * sets from scheduler_step to scheduler_observe*. Knows no policy by name: the
 * policies come in through their ops tables.
 */
#include "scheduler.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

struct scheduler_stream {
    const struct selection_ops *ops; /* the run's selection, or dense on a dense layer */
    void *sel;             /* selection state */
    void *place;           /* placement state */
    struct kv_stream kv;   /* token places */
    uint32_t *attended;    /* (max_len) last step's attended set */
    uint32_t n_attended;
    uint32_t produced;     /* tokens produced so far */
    int oom;
};

struct scheduler {
    struct scheduler_config cfg;
    struct place_params *pp;      /* (n_streams) each stream's placement parameters */
    struct scheduler_stream *streams; /* (n_streams) */
    uint32_t *retired;            /* (max_len) plan buffers, shared */
    uint32_t *load, *recompute, *offload, *drop;
    float *w;                     /* (max_len) renormalised weights */
};

/* A stream's selection, placement and token places made (st->ops chosen),
 * for scheduler_create and scheduler_stream_reset alike. */
static int stream_make(struct scheduler *s, uint32_t i, const struct kv_future *future,
                       struct alisa_err *e)
{
    struct scheduler_stream *st = &s->streams[i];
    int rc = st->ops->create(&st->sel, &s->cfg.sel_params, s->cfg.max_len, e);
    if (!rc)
        rc = kv_stream_init(&st->kv, &s->pp[i], s->cfg.max_len, e);
    if (!rc)
        rc = s->cfg.place->create(&st->place, &s->pp[i], s->cfg.max_len, future, e);
    return rc;
}

/* What stream_make made freed; accepts a stream it made in part. */
static void stream_unmake(struct scheduler *s, struct scheduler_stream *st)
{
    if (st->sel)
        st->ops->destroy(st->sel);
    if (st->place)
        s->cfg.place->destroy(st->place);
    kv_stream_deinit(&st->kv);
    st->sel = st->place = NULL;
}

void scheduler_destroy(struct scheduler *s)
{
    if (!s)
        return;
    for (uint32_t i = 0; s->streams && i < s->cfg.n_streams; i++) {
        stream_unmake(s, &s->streams[i]);
        free(s->streams[i].attended);
    }
    free(s->streams);
    free(s->pp);
    free(s->retired);
    free(s->load);
    free(s->recompute);
    free(s->offload);
    free(s->drop);
    free(s->w);
    free(s);
}

int scheduler_create(struct scheduler **out, const struct scheduler_config *cfg,
                 const struct kv_future *futures, struct alisa_err *e)
{
    *out = NULL;
    if (!cfg->sel || !cfg->place || cfg->n_streams == 0 || cfg->max_len == 0)
        return err_set(e, ALISA_EINVAL, "scheduler needs a selection, a placement, streams and a length");
    if (cfg->place->offline && !futures)
        return err_set(e, ALISA_EINVAL, "placement '%s' is an offline bound and needs the future "
                       "selection sequence", cfg->place->name);
    int rc = sel_params_validate(&cfg->sel_params, cfg->sel, e);
    if (rc)
        return rc;
    struct sel_estimate est;
    sel_estimate_of(cfg->sel, &cfg->sel_params, &est);
    if (est.kind != SEL_ESTIMATE_EXACT && !cfg->keys)
        return err_set(e, ALISA_EINVAL, "selection %s: its estimate of the step's row is "
                       "computed from keys, which a trace does not hold; only the executor "
                       "(alisa run, record, eval) runs it (alisa sim prices it); leave --%s "
                       "out for the exact row, the method's upper bound", cfg->sel->name, est.knob);
    struct scheduler *s = calloc(1, sizeof *s);
    if (!s)
        return err_set(e, ALISA_ENOMEM, "out of memory for the scheduler");
    s->cfg = *cfg;
    s->cfg.stream_params = NULL; /* borrowed: s->pp holds the copy */
    size_t n = cfg->max_len;
    s->streams = calloc(cfg->n_streams, sizeof *s->streams);
    s->pp = malloc(cfg->n_streams * sizeof *s->pp);
    s->retired = malloc(n * sizeof(uint32_t));
    s->load = malloc(n * sizeof(uint32_t));
    s->recompute = malloc(n * sizeof(uint32_t));
    s->offload = malloc(n * sizeof(uint32_t));
    s->drop = malloc(n * sizeof(uint32_t));
    s->w = malloc(n * sizeof(float));
    if (!s->streams || !s->pp || !s->retired || !s->load || !s->recompute || !s->offload ||
        !s->drop || !s->w) {
        scheduler_destroy(s);
        return err_set(e, ALISA_ENOMEM, "out of memory for %u streams", cfg->n_streams);
    }
    uint32_t origin = 0, unit = cfg->sel->unit ? cfg->sel->unit(&cfg->sel_params, &origin) : 1;
    for (uint32_t i = 0; i < cfg->n_streams; i++) {
        s->pp[i] = cfg->stream_params ? cfg->stream_params[i] : cfg->place_params;
        s->pp[i].unit_tokens = unit;
        s->pp[i].unit_origin = origin;
    }
    uint32_t dense = cfg->layers && cfg->sel->dense_layers ? cfg->sel->dense_layers(&cfg->sel_params)
                                                            : 0;
    for (uint32_t i = 0; i < cfg->n_streams; i++) {
        struct scheduler_stream *st = &s->streams[i];
        uint32_t layer = (i / (cfg->heads > 1 ? cfg->heads : 1)) % (cfg->layers ? cfg->layers : 1);
        st->ops = dense && layer < dense ? &sel_dense_ops : cfg->sel;
        if ((rc = stream_make(s, i, futures ? &futures[i] : NULL, e))) {
            scheduler_destroy(s);
            return rc;
        }
        if (!(st->attended = malloc(n * sizeof(uint32_t)))) {
            scheduler_destroy(s);
            return err_set(e, ALISA_ENOMEM, "out of memory for %u streams", cfg->n_streams);
        }
    }
    *out = s;
    return 0;
}

static void plan_begin(struct scheduler *s, struct scheduler_plan *plan, uint32_t stream,
                       uint32_t pos)
{
    memset(plan, 0, sizeof *plan);
    plan->stream = stream;
    plan->pos = pos;
    plan->retired = s->retired;
    plan->place.load = s->load;
    plan->place.recompute = s->recompute;
    plan->place.offload = s->offload;
    plan->place.drop = s->drop;
}

/* Always-on invariants; a violation is a bug in a policy or the engine. */
static void plan_finish(struct scheduler *s, struct scheduler_stream *st, struct scheduler_plan *plan,
                        uint32_t last)
{
    if (plan->place.oom) {
        st->oom = 1;
        return;
    }
    struct alisa_err e = {{0}};
    int rc = kv_stream_check(&st->kv, &s->pp[plan->stream], last, plan->attended,
                             plan->n_attended, &plan->census, &e);
    if (rc) {
        fprintf(stderr, "alisa: internal error: stream %u step %u: %s\n", plan->stream, last,
                e.msg);
        ALISA_ASSERT(rc == 0);
    }
    plan->gpu_bytes = st->kv.gpu_bytes;
    plan->cpu_bytes = st->kv.cpu_bytes;
}

int scheduler_prefill(struct scheduler *s, uint32_t stream, uint32_t pos, const float *row,
                  uint32_t prompt_len, struct scheduler_plan *plan)
{
    ALISA_ASSERT(stream < s->cfg.n_streams && pos < s->cfg.max_len);
    struct scheduler_stream *st = &s->streams[stream];
    plan_begin(s, plan, stream, pos);
    plan->prefill = 1;
    if (st->oom) {
        plan->place.oom = 1;
        return 0;
    }
    while (st->produced <= pos && !plan->place.oom)
        place_admit(s->cfg.place, st->place, &st->kv, &s->pp[stream], st->produced++,
                    &plan->place);
    if (!plan->place.oom)
        scheduler_observe_prefill(s, stream, pos, row, prompt_len);
    plan_finish(s, st, plan, st->produced - 1);
    return 0;
}

int scheduler_step(struct scheduler *s, uint32_t stream, uint32_t pos, const float *present,
                   struct scheduler_plan *plan)
{
    ALISA_ASSERT(stream < s->cfg.n_streams && pos < s->cfg.max_len);
    struct scheduler_stream *st = &s->streams[stream];
    plan_begin(s, plan, stream, pos);
    if (st->oom) {
        plan->place.oom = 1;
        st->n_attended = 0;
        return 0;
    }
    /* Tokens before pos must exist: a trace may start its rows late. */
    while (st->produced < pos && !plan->place.oom)
        place_admit(s->cfg.place, st->place, &st->kv, &s->pp[stream], st->produced++,
                    &plan->place);
    if (plan->place.oom) {
        plan_finish(s, st, plan, pos);
        return 0;
    }
    ALISA_ASSERT(st->produced == pos);
    if (st->ops->failed && st->ops->failed(st->sel))
        return ALISA_ENOMEM;
    uint32_t n_ret = 0, local = 0;
    ALISA_ASSERT(present || !st->ops->needs_present);
    uint32_t n_att = st->ops->select(st->sel, pos, st->ops->needs_present ? present : NULL,
                                     st->attended, s->retired, &n_ret, &local);
    ALISA_ASSERT(n_att >= 1 && n_att <= pos + 1 && st->attended[n_att - 1] == pos);
    st->n_attended = n_att;
    plan->attended = st->attended;
    plan->n_attended = n_att;
    plan->local_tokens = local;
    plan->n_retired = n_ret;
    place_step(s->cfg.place, st->place, &st->kv, &s->pp[stream], st->attended, n_att,
               s->retired, n_ret, pos + 1 - local, pos, &plan->place);
    st->produced = pos + 1;
    plan_finish(s, st, plan, pos);
    return 0;
}

int scheduler_stream_reset(struct scheduler *s, uint32_t stream, struct alisa_err *e)
{
    if (s->cfg.place->offline)
        return err_set(e, ALISA_EINVAL, "placement '%s' is an offline bound over one recorded "
                       "future: a stream cannot start a new sequence", s->cfg.place->name);
    struct scheduler_stream *st = &s->streams[stream];
    stream_unmake(s, st);
    st->n_attended = st->produced = 0;
    int rc = stream_make(s, stream, NULL, e);
    st->oom = rc != 0; /* what is left is freed by scheduler_destroy */
    return rc;
}

int scheduler_needs_present(const struct scheduler *s) { return s->cfg.sel->needs_present; }

int scheduler_stream_needs_present(const struct scheduler *s, uint32_t stream)
{
    return s->streams[stream].ops->needs_present;
}

void scheduler_present_estimate(const struct scheduler *s, struct sel_estimate *out)
{
    sel_estimate_of(s->cfg.sel, &s->cfg.sel_params, out);
}

void scheduler_observe(struct scheduler *s, uint32_t stream, const float *w)
{
    struct scheduler_stream *st = &s->streams[stream];
    if (!st->n_attended)
        return;
    uint32_t pos = st->attended[st->n_attended - 1];
    if (st->ops->observe)
        st->ops->observe(st->sel, pos, st->attended, w, st->n_attended);
    if (s->cfg.place->observe && !st->oom)
        s->cfg.place->observe(st->place, st->attended, w, st->n_attended, pos);
}

void scheduler_observe_dense(struct scheduler *s, uint32_t stream, const float *row)
{
    struct scheduler_stream *st = &s->streams[stream];
    if ((!st->ops->observe && !s->cfg.place->observe) || !st->n_attended)
        return;
    double sum = 0;
    for (uint32_t i = 0; i < st->n_attended; i++)
        sum += row[st->attended[i]];
    for (uint32_t i = 0; i < st->n_attended; i++)
        s->w[i] = sum > 0 ? (float)(row[st->attended[i]] / sum) : 1.0f / st->n_attended;
    scheduler_observe(s, stream, s->w);
}

int scheduler_stream_oom(const struct scheduler *s, uint32_t stream) { return s->streams[stream].oom; }

void scheduler_observe_prefill(struct scheduler *s, uint32_t stream, uint32_t pos, const float *row,
                               uint32_t prompt_len)
{
    struct scheduler_stream *st = &s->streams[stream];
    if (row && st->ops->observe_prefill && !st->oom)
        st->ops->observe_prefill(st->sel, pos, row, prompt_len);
}

const uint8_t *scheduler_stream_flags(const struct scheduler *s, uint32_t stream)
{
    return s->streams[stream].kv.flags;
}

uint32_t scheduler_stream_gpu_cap(const struct scheduler *s, uint32_t stream)
{
    return s->streams[stream].kv.gpu_cap;
}

/* cap plus, under a placement with visits, one step's budget of the
 * stream's selection (every token for one that gathers none, dense, or that
 * may attend more than its budget), at most max_len */
static uint32_t with_staging(const struct scheduler *s, const struct selection_ops *ops,
                             uint32_t cap)
{
    uint32_t max_len = s->cfg.max_len;
    if (!s->cfg.place->visits)
        return cap;
    uint32_t b = ops->gathers && !ops->above_budget ? sel_budget(&s->cfg.sel_params, max_len)
                                                     : max_len;
    return b < max_len - cap ? cap + b : max_len;
}

uint32_t scheduler_stream_dev_slots(const struct scheduler *s, uint32_t stream)
{
    const struct scheduler_stream *st = &s->streams[stream];
    return with_staging(s, st->ops, st->kv.gpu_cap);
}

uint32_t scheduler_stream_host_slots(const struct scheduler *s, uint32_t stream)
{
    const struct scheduler_stream *st = &s->streams[stream];
    return with_staging(s, st->ops, st->kv.cpu_cap);
}

uint32_t scheduler_stream_cpu_cap(const struct scheduler *s, uint32_t stream)
{
    return s->streams[stream].kv.cpu_cap;
}
