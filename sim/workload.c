/* Request streams for serving (contract in workload.h): Gamma arrivals and
 * uniform lengths drawn from one seeded GSL stream, or a CSV read with
 * libcsv and checked field by field.
 */
#include "workload.h"

#include "outfile.h"

#include <csv.h>
#include <errno.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void workload_free(struct workload *w)
{
    free(w->req);
    w->req = NULL;
    w->n = 0;
}

static int check_range(const char *what, uint32_t lo, uint32_t hi, struct alisa_err *e)
{
    if (lo == 0 || lo > hi || hi > WORKLOAD_MAX_TOKENS)
        return err_set(e, ALISA_EINVAL, "%s %u..%u: expected 1 <= min <= max <= %u tokens", what,
                       lo, hi, WORKLOAD_MAX_TOKENS);
    return 0;
}

int workload_generate(const struct wl_params *p, struct workload *w, struct alisa_err *e)
{
    memset(w, 0, sizeof *w);
    int rc;
    if (p->n_requests == 0 || p->n_requests > WORKLOAD_MAX_REQUESTS)
        return err_set(e, ALISA_EINVAL, "requests %u: expected 1..%u", p->n_requests,
                       WORKLOAD_MAX_REQUESTS);
    if (!(p->rate >= 0) || isnan(p->rate))
        return err_set(e, ALISA_EINVAL, "rate %g: expected requests per second >= 0 (0: all at "
                       "once)", p->rate);
    if (!(p->burstiness > 0) || !isfinite(p->burstiness))
        return err_set(e, ALISA_EINVAL, "burstiness %g: expected a Gamma shape > 0 (1: Poisson)",
                       p->burstiness);
    if ((rc = check_range("prompt length", p->prompt_min, p->prompt_max, e)) ||
        (rc = check_range("output length", p->output_min, p->output_max, e)))
        return rc;
    w->req = malloc((size_t)p->n_requests * sizeof *w->req);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (!w->req || !rng) {
        free(w->req);
        w->req = NULL;
        gsl_rng_free(rng);
        return err_set(e, ALISA_ENOMEM, "out of memory for %u requests", p->n_requests);
    }
    gsl_rng_set(rng, p->seed);
    double t = 0;
    int at_once = p->rate == 0 || isinf(p->rate);
    for (uint32_t i = 0; i < p->n_requests; i++) {
        /* one draw each, in this order, whatever the parameters */
        double gap = gsl_ran_gamma(rng, p->burstiness, 1.0 / (p->burstiness * (at_once ? 1 : p->rate)));
        uint32_t pl = p->prompt_min + (uint32_t)gsl_rng_uniform_int(rng, p->prompt_max - p->prompt_min + 1ul);
        uint32_t ol = p->output_min + (uint32_t)gsl_rng_uniform_int(rng, p->output_max - p->output_min + 1ul);
        if (!at_once && i > 0) /* the first request opens the stream */
            t += gap;
        if (!isfinite(t)) {
            free(w->req);
            w->req = NULL;
            gsl_rng_free(rng);
            return err_set(e, ALISA_EINVAL, "rate %g with burstiness %g: request %u would arrive "
                           "at a time that is not a finite number of seconds", p->rate,
                           p->burstiness, i);
        }
        w->req[i] = (struct wl_request){.arrival_s = t, .prompt_len = pl, .output_len = ol};
    }
    w->n = p->n_requests;
    gsl_rng_free(rng);
    return 0;
}

/* ---- CSV ---- */

enum { COL_ARRIVAL, COL_PROMPT, COL_OUTPUT, N_COLS };
static const char *const col_name[N_COLS] = {"arrival_s", "prompt_len", "output_len"};

struct csv_ctx {
    const char *path;
    struct workload *w;
    uint32_t cap;
    uint64_t line;        /* records so far, 1-based: 1 is the header */
    uint64_t phys;        /* the file's line being parsed, 1-based: what messages name */
    uint32_t field;       /* index within the record */
    int col_of[64];       /* header: which of ours each field is, -1 none */
    uint32_t n_fields;    /* header's */
    int seen[N_COLS];     /* this record's fields */
    struct wl_request cur;
    int rc;
    struct alisa_err *e;
};

static int parse_u32_field(struct csv_ctx *c, const char *s, uint32_t *out, const char *name)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || errno || s[0] == '-' || v == 0 || v > WORKLOAD_MAX_TOKENS)
        return c->rc = err_set(c->e, ALISA_EINVAL, "%s: line %llu: %s '%s': expected whole "
                               "tokens in 1..%u", c->path, (unsigned long long)c->phys, name, s,
                               WORKLOAD_MAX_TOKENS);
    *out = (uint32_t)v;
    return 0;
}

/* A number as the CSV should write it: digits, a sign, a point, an
 * exponent; nothing else (no spaces, no hex, no inf or nan). */
static int plain_number(const char *s, int integer)
{
    if (!*s)
        return 0;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') ||
              (!integer && (*p == '.' || *p == 'e' || *p == 'E' || *p == '-' || *p == '+'))))
            return 0;
    return 1;
}

static void on_field(void *s, size_t len, void *data)
{
    struct csv_ctx *c = data;
    if (c->rc)
        return;
    uint32_t f = c->field++;
    int k = -1;
    if (c->line > 1) {
        if (f >= c->n_fields) {
            c->rc = err_set(c->e, ALISA_EINVAL, "%s: line %llu: more fields than the header's %u",
                            c->path, (unsigned long long)c->phys, c->n_fields);
            return;
        }
        if ((k = c->col_of[f]) < 0)
            return; /* a column of someone else's: any content */
    }
    char buf[64];
    if (len >= sizeof buf) {
        if (c->line == 1)
            return; /* a header name that cannot be ours */
        c->rc = err_set(c->e, ALISA_EINVAL, "%s: line %llu: %s is %zu bytes long (at most %zu)",
                        c->path, (unsigned long long)c->phys, col_name[k], len, sizeof buf - 1);
        return;
    }
    if (len) /* an empty field comes as NULL (CSV_EMPTY_IS_NULL) */
        memcpy(buf, s, len);
    buf[len] = 0;
    if (c->line == 1) { /* the header */
        if (f >= sizeof c->col_of / sizeof c->col_of[0]) {
            c->rc = err_set(c->e, ALISA_EINVAL, "%s: line %llu: more than %zu columns", c->path,
                            (unsigned long long)c->phys, sizeof c->col_of / sizeof c->col_of[0]);
            return;
        }
        c->col_of[f] = -1;
        for (int j = 0; j < N_COLS; j++)
            if (strcmp(buf, col_name[j]) == 0) {
                for (uint32_t i = 0; i < f; i++)
                    if (c->col_of[i] == j) {
                        c->rc = err_set(c->e, ALISA_EINVAL, "%s: line %llu: column %s named "
                                        "twice", c->path, (unsigned long long)c->phys, buf);
                        return;
                    }
                c->col_of[f] = j;
            }
        c->n_fields = f + 1;
        return;
    }
    c->seen[k] = 1;
    if (k == COL_ARRIVAL) {
        char *end;
        errno = 0;
        double v = strtod(buf, &end);
        if (!plain_number(buf, 0) || *end || errno || !isfinite(v) || v < 0)
            c->rc = err_set(c->e, ALISA_EINVAL, "%s: line %llu: arrival_s '%s': expected seconds "
                            ">= 0", c->path, (unsigned long long)c->phys, buf);
        else
            c->cur.arrival_s = v;
    } else if (!plain_number(buf, 1)) {
        c->rc = err_set(c->e, ALISA_EINVAL, "%s: line %llu: %s '%s': expected whole tokens in "
                        "1..%u", c->path, (unsigned long long)c->phys, col_name[k], buf,
                        WORKLOAD_MAX_TOKENS);
    } else {
        parse_u32_field(c, buf, k == COL_PROMPT ? &c->cur.prompt_len : &c->cur.output_len,
                        col_name[k]);
    }
}

static void on_record(int term, void *data)
{
    (void)term;
    struct csv_ctx *c = data;
    if (c->rc)
        return;
    if (c->line == 1) {
        for (int k = 0; k < N_COLS && !c->rc; k++) {
            int found = 0;
            for (uint32_t j = 0; j < c->n_fields; j++)
                found |= c->col_of[j] == k;
            if (!found)
                c->rc = err_set(c->e, ALISA_EINVAL, "%s: line %llu: no column %s (the header "
                                "names arrival_s, prompt_len and output_len)", c->path,
                                (unsigned long long)c->phys, col_name[k]);
        }
    } else {
        for (int k = 0; k < N_COLS && !c->rc; k++)
            if (!c->seen[k])
                c->rc = err_set(c->e, ALISA_EINVAL, "%s: line %llu: no %s", c->path,
                                (unsigned long long)c->phys, col_name[k]);
        struct workload *w = c->w;
        if (!c->rc && w->n && c->cur.arrival_s < w->req[w->n - 1].arrival_s)
            c->rc = err_set(c->e, ALISA_EINVAL, "%s: line %llu: arrival_s %g before the previous "
                            "request's %g (arrivals must not decrease)", c->path,
                            (unsigned long long)c->phys, c->cur.arrival_s,
                            w->req[w->n - 1].arrival_s);
        if (!c->rc && w->n == WORKLOAD_MAX_REQUESTS)
            c->rc = err_set(c->e, ALISA_EINVAL, "%s: line %llu: more than %u requests", c->path,
                            (unsigned long long)c->phys, WORKLOAD_MAX_REQUESTS);
        if (!c->rc && w->n == c->cap) {
            uint32_t cap = c->cap ? 2 * c->cap : 256;
            struct wl_request *r = realloc(w->req, (size_t)cap * sizeof *r);
            if (!r)
                c->rc = err_set(c->e, ALISA_ENOMEM, "%s: out of memory for %u requests",
                                c->path, cap);
            else {
                w->req = r;
                c->cap = cap;
            }
        }
        if (!c->rc)
            w->req[w->n++] = c->cur;
    }
    c->line++;
    c->field = 0;
    memset(c->seen, 0, sizeof c->seen);
    memset(&c->cur, 0, sizeof c->cur);
}

int workload_read_csv(const char *path, struct workload *w, struct alisa_err *e)
{
    memset(w, 0, sizeof *w);
    FILE *f = fopen(path, "rb");
    if (!f)
        return err_set(e, ALISA_EIO, "%s: %s", path, strerror(errno));
    struct csv_parser p;
    if (csv_init(&p, CSV_STRICT | CSV_EMPTY_IS_NULL) != 0) {
        fclose(f);
        return err_set(e, ALISA_ENOMEM, "%s: out of memory for the CSV parser", path);
    }
    struct csv_ctx c = {.path = path, .w = w, .line = 1, .e = e};
    /* one physical line at a time, so messages name the file's lines; a
     * line is at most WORKLOAD_LINE_MAX bytes, so memory stays bounded */
    char buf[WORKLOAD_LINE_MAX + 2];
    while (!c.rc && fgets(buf, sizeof buf, f)) {
        size_t n = strlen(buf);
        c.phys++;
        if (n == sizeof buf - 1 && buf[n - 1] != '\n') {
            c.rc = err_set(e, ALISA_EINVAL, "%s: line %llu: longer than %u bytes", path,
                           (unsigned long long)c.phys, WORKLOAD_LINE_MAX);
            break;
        }
        const char *d = buf;
        if (c.phys == 1 && n >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0) { /* UTF-8 BOM */
            d += 3;
            n -= 3;
        }
        if (csv_parse(&p, d, n, on_field, on_record, &c) != n && !c.rc)
            c.rc = err_set(e, ALISA_EINVAL, "%s: line %llu: %s", path, (unsigned long long)c.phys,
                           csv_strerror(csv_error(&p)));
    }
    if (!c.rc && ferror(f))
        c.rc = err_set(e, ALISA_EIO, "%s: read error", path);
    if (!c.rc && csv_fini(&p, on_field, on_record, &c) != 0)
        c.rc = err_set(e, ALISA_EINVAL, "%s: line %llu: %s", path, (unsigned long long)c.phys,
                       csv_strerror(csv_error(&p)));
    csv_free(&p);
    fclose(f);
    if (!c.rc && c.line == 1)
        c.rc = err_set(e, ALISA_EINVAL, "%s: empty (expected a header arrival_s,prompt_len,"
                       "output_len and one request per line)", path);
    if (!c.rc && w->n == 0)
        c.rc = err_set(e, ALISA_EINVAL, "%s: a header and no requests", path);
    if (c.rc)
        workload_free(w);
    return c.rc;
}

int workload_write_csv(const char *path, const struct workload *w, struct alisa_err *e)
{
    char part[4200];
    FILE *f = outfile_open(path, part, sizeof part, "requests", e);
    if (!f)
        return ALISA_EIO;
    fprintf(f, "arrival_s,prompt_len,output_len\n");
    for (uint32_t i = 0; i < w->n; i++)
        fprintf(f, "%.17g,%u,%u\n", w->req[i].arrival_s, w->req[i].prompt_len,
                w->req[i].output_len);
    return outfile_close(f, part, path, 0, e);
}
