/* Results database (contract in results.h) on SQLite: WAL journal, a busy
 * timeout for concurrent writers, one transaction per row, JSON1 functions
 * for the export queries.
 */
#include "results.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct results {
    sqlite3 *db;
    char *path;
};

/* The runs table's columns; status 'oom' (issue 41): a command that ran
 * and reported running out of memory, a result kept with its partial
 * counts, never mistaken for 'ok'. */
#define RUNS_COLUMNS                                                                   \
    " id INTEGER PRIMARY KEY,"                                                         \
    " sweep TEXT NOT NULL,"                                                            \
    " point INTEGER NOT NULL,"                                                         \
    " config_hash TEXT NOT NULL UNIQUE,"                                               \
    " config TEXT NOT NULL,"                                                           \
    " code_version TEXT NOT NULL,"                                                     \
    " result TEXT NOT NULL,"                                                           \
    " status TEXT NOT NULL CHECK (status IN ('ok', 'error', 'oom')),"                  \
    " error TEXT,"                                                                     \
    " wall_s REAL NOT NULL,"                                                           \
    " created TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))"

static const char schema[] =
    "CREATE TABLE IF NOT EXISTS runs (" RUNS_COLUMNS ");"
    "CREATE INDEX IF NOT EXISTS runs_sweep ON runs (sweep, point);";

/* A database made before status 'oom' existed: its table rebuilt with the
 * new check, every row kept, in one transaction (SQLite cannot alter a
 * CHECK in place). */
static const char migrate_oom[] =
    "BEGIN IMMEDIATE;"
    "CREATE TABLE runs_v2 (" RUNS_COLUMNS ");"
    "INSERT INTO runs_v2 SELECT * FROM runs;"
    "DROP TABLE runs;"
    "ALTER TABLE runs_v2 RENAME TO runs;"
    "CREATE INDEX IF NOT EXISTS runs_sweep ON runs (sweep, point);"
    "COMMIT;";

static int schema_has_oom(sqlite3 *db)
{
    sqlite3_stmt *st = NULL;
    int has = 0;
    if (sqlite3_prepare_v2(db, "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'runs'",
                           -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
        const unsigned char *sql = sqlite3_column_text(st, 0);
        has = sql && strstr((const char *)sql, "'oom'") != NULL;
    }
    sqlite3_finalize(st);
    return has;
}

static int db_fail(struct alisa_err *e, const char *path, sqlite3 *db, const char *what)
{
    return err_set(e, ALISA_EIO, "%s: %s: %s", path, what, db ? sqlite3_errmsg(db) : "no handle");
}

int results_open(struct results **out, const char *path, struct alisa_err *e)
{
    *out = NULL;
    struct results *r = calloc(1, sizeof *r);
    if (!r || !(r->path = strdup(path))) {
        free(r);
        return err_set(e, ALISA_ENOMEM, "out of memory opening %s", path);
    }
    int rc = 0;
    if (sqlite3_open_v2(path, &r->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK)
        rc = db_fail(e, path, r->db, "cannot open results database");
    else if (sqlite3_busy_timeout(r->db, 30000) != SQLITE_OK ||
             sqlite3_exec(r->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;", NULL,
                          NULL, NULL) != SQLITE_OK)
        rc = db_fail(e, path, r->db, "cannot set WAL mode (not a SQLite database?)");
    else if (sqlite3_exec(r->db, schema, NULL, NULL, NULL) != SQLITE_OK)
        rc = db_fail(e, path, r->db, "cannot create the schema");
    else if (!schema_has_oom(r->db) && sqlite3_exec(r->db, migrate_oom, NULL, NULL, NULL) != SQLITE_OK) {
        rc = db_fail(e, path, r->db, "cannot add the 'oom' status to an older database");
        sqlite3_exec(r->db, "ROLLBACK", NULL, NULL, NULL);
    }
    if (rc) {
        results_close(r);
        return rc;
    }
    *out = r;
    return 0;
}

/* Opens path read-only into r->db and checks for the runs table; 0, or
 * SQLite's status. immutable: a URI open that takes no lock and needs no
 * -shm file (a WAL database on a read-only mount or directory). */
static int open_ro(struct results *r, const char *path, int immutable)
{
    char uri[4200];
    if (immutable) {
        /* a URI path: '%', '?' and '#' escaped */
        size_t n = (size_t)snprintf(uri, sizeof uri, "file:");
        for (const char *c = path; *c && n + 4 < sizeof uri; c++)
            n += strchr("%?#", *c) ? (size_t)snprintf(uri + n, sizeof uri - n, "%%%02X",
                                                      (unsigned char)*c)
                                   : (size_t)snprintf(uri + n, sizeof uri - n, "%c", *c);
        snprintf(uri + n, sizeof uri - n, "?immutable=1");
    }
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_open_v2(immutable ? uri : path, &r->db,
                             SQLITE_OPEN_READONLY | (immutable ? SQLITE_OPEN_URI : 0), NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_busy_timeout(r->db, 30000)) == SQLITE_OK)
        rc = sqlite3_prepare_v2(r->db, "SELECT 1 FROM runs LIMIT 0", -1, &st, NULL);
    sqlite3_finalize(st);
    return rc;
}

int results_open_readonly(struct results **out, const char *path, struct alisa_err *e)
{
    *out = NULL;
    struct results *r = calloc(1, sizeof *r);
    if (!r || !(r->path = strdup(path))) {
        free(r);
        return err_set(e, ALISA_ENOMEM, "out of memory opening %s", path);
    }
    int rc = 0, st = 0;
    if (access(path, F_OK) != 0) {
        rc = err_set(e, ALISA_EIO, "%s: no such results database", path);
    } else if ((st = open_ro(r, path, 0)) != SQLITE_OK) {
        /* a WAL database whose directory or mount is read-only cannot make
         * its -shm file: read it as immutable (issue 48) */
        int first = st;
        char first_msg[256];
        snprintf(first_msg, sizeof first_msg, "%s", r->db ? sqlite3_errmsg(r->db) : "no handle");
        sqlite3_close(r->db);
        r->db = NULL;
        if ((st = open_ro(r, path, 1)) != SQLITE_OK) {
            int foreign = first == SQLITE_NOTADB || first == SQLITE_ERROR;
            rc = err_set(e, ALISA_EIO, "%s: %s: %s", path,
                         foreign ? "not a results database" : "cannot read the results database",
                         first_msg);
        }
    }
    if (rc) {
        results_close(r);
        return rc;
    }
    *out = r;
    return 0;
}

void results_close(struct results *r)
{
    if (!r)
        return;
    sqlite3_close(r->db);
    free(r->path);
    free(r);
}

int results_done(struct results *r, const char *config_hash, int *done, struct alisa_err *e)
{
    sqlite3_stmt *st;
    *done = 0;
    if (sqlite3_prepare_v2(r->db, "SELECT 1 FROM runs WHERE config_hash = ? AND status IN ('ok', 'oom')",
                           -1, &st, NULL) != SQLITE_OK)
        return db_fail(e, r->path, r->db, "query failed");
    sqlite3_bind_text(st, 1, config_hash, -1, SQLITE_STATIC);
    int step = sqlite3_step(st);
    *done = step == SQLITE_ROW;
    sqlite3_finalize(st);
    if (step != SQLITE_ROW && step != SQLITE_DONE)
        return db_fail(e, r->path, r->db, "query failed");
    return 0;
}

int results_put(struct results *r, const struct result_row *row, struct alisa_err *e)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_exec(r->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        return db_fail(e, r->path, r->db, "cannot begin a transaction");
    int rc = 0;
    if (sqlite3_prepare_v2(r->db,
                           "INSERT OR REPLACE INTO runs (sweep, point, config_hash, config, "
                           "code_version, result, status, error, wall_s) "
                           "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                           -1, &st, NULL) != SQLITE_OK) {
        rc = db_fail(e, r->path, r->db, "cannot prepare the insert");
    } else {
        sqlite3_bind_text(st, 1, row->sweep, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, (sqlite3_int64)row->point);
        sqlite3_bind_text(st, 3, row->config_hash, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, row->config, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 5, row->code_version, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 6, row->result, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 7, !row->ok ? "error" : row->oom ? "oom" : "ok", -1, SQLITE_STATIC);
        if (row->error)
            sqlite3_bind_text(st, 8, row->error, -1, SQLITE_STATIC);
        else
            sqlite3_bind_null(st, 8);
        sqlite3_bind_double(st, 9, row->wall_s);
        if (sqlite3_step(st) != SQLITE_DONE)
            rc = db_fail(e, r->path, r->db, "insert failed");
    }
    sqlite3_finalize(st);
    if (sqlite3_exec(r->db, rc ? "ROLLBACK" : "COMMIT", NULL, NULL, NULL) != SQLITE_OK && !rc)
        rc = db_fail(e, r->path, r->db, "commit failed");
    return rc;
}

/* Copies the rows of `in` into r in one transaction: a point r lacks is
 * added (*added), a point r holds as an error row and `in` as ok is replaced
 * by it (*replaced); every other row of r is kept. */
static int merge_one(struct results *r, struct results *in, uint64_t *added, uint64_t *replaced,
                     struct alisa_err *e)
{
    static const char cols[] = "sweep, point, config_hash, config, code_version, result, status, "
                               "error, wall_s, created";
    char sql[512];
    sqlite3_stmt *get = NULL, *put = NULL, *fix = NULL;
    int rc = 0;
    snprintf(sql, sizeof sql, "SELECT %s FROM runs ORDER BY id", cols);
    if (sqlite3_prepare_v2(in->db, sql, -1, &get, NULL) != SQLITE_OK)
        rc = db_fail(e, in->path, in->db, "cannot read");
    snprintf(sql, sizeof sql, "INSERT OR IGNORE INTO runs (%s) VALUES (?,?,?,?,?,?,?,?,?,?)", cols);
    if (!rc && sqlite3_prepare_v2(r->db, sql, -1, &put, NULL) != SQLITE_OK)
        rc = db_fail(e, r->path, r->db, "cannot insert");
    /* the same parameters: ?3 the hash, ?7 the status */
    snprintf(sql, sizeof sql, "UPDATE runs SET sweep = ?1, point = ?2, config = ?4, "
             "code_version = ?5, result = ?6, status = ?7, error = ?8, wall_s = ?9, created = ?10 "
             "WHERE config_hash = ?3 AND status = 'error' AND ?7 IN ('ok', 'oom')");
    if (!rc && sqlite3_prepare_v2(r->db, sql, -1, &fix, NULL) != SQLITE_OK)
        rc = db_fail(e, r->path, r->db, "cannot update");
    if (!rc && sqlite3_exec(r->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        rc = db_fail(e, r->path, r->db, "cannot begin");
    int step;
    while (!rc && (step = sqlite3_step(get)) == SQLITE_ROW) {
        for (int c = 0; c < 10; c++) {
            sqlite3_bind_value(fix, c + 1, sqlite3_column_value(get, c));
            sqlite3_bind_value(put, c + 1, sqlite3_column_value(get, c));
        }
        if (sqlite3_step(fix) != SQLITE_DONE)
            rc = db_fail(e, r->path, r->db, "merge failed");
        *replaced += (uint64_t)sqlite3_changes(r->db);
        if (!rc && sqlite3_step(put) != SQLITE_DONE)
            rc = db_fail(e, r->path, r->db, "merge failed");
        *added += (uint64_t)sqlite3_changes(r->db);
        sqlite3_reset(fix);
        sqlite3_reset(put);
    }
    if (!rc && step != SQLITE_DONE)
        rc = db_fail(e, in->path, in->db, "cannot read");
    if (!rc && sqlite3_exec(r->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
        rc = db_fail(e, r->path, r->db, "commit failed");
    if (rc)
        sqlite3_exec(r->db, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_finalize(get);
    sqlite3_finalize(put);
    sqlite3_finalize(fix);
    return rc;
}

int results_merge(const char *out, const char *const *inputs, int n_inputs, uint64_t *added,
                  uint64_t *replaced, struct alisa_err *e)
{
    *added = 0;
    *replaced = 0;
    /* every input first: a missing or foreign one stops the merge before
     * the output is created or touched */
    struct results **in = calloc(n_inputs ? (size_t)n_inputs : 1, sizeof *in);
    if (!in)
        return err_set(e, ALISA_ENOMEM, "out of memory");
    int rc = 0;
    for (int i = 0; i < n_inputs && !rc; i++)
        rc = results_open_readonly(&in[i], inputs[i], e);
    struct results *r = NULL;
    if (!rc)
        rc = results_open(&r, out, e);
    for (int i = 0; i < n_inputs && !rc; i++) {
        uint64_t n = 0, fixed = 0;
        rc = merge_one(r, in[i], &n, &fixed, e);
        if (!rc) {
            *added += n;
            *replaced += fixed;
        }
    }
    results_close(r);
    for (int i = 0; i < n_inputs; i++)
        results_close(in[i]);
    free(in);
    return rc;
}

#define P(k) "json_extract(config, '$.params." k "')"
#define R(k) "json_extract(result, '$." k "')"

static const char q_sim[] =
    "SELECT sweep, point, status, " P("model") " AS model, "
    /* the profile priced: a rule's (--rule) where the run had one */
    "COALESCE(" R("hardware") ", " P("hardware") ") AS hardware, "
    R("system") " AS system, " R("selection") " AS selection, " R("placement") " AS placement, "
    R("batch") " AS batch, " R("prompt_len") " AS prompt_len, " R("gen_len") " AS gen_len, "
    R("sparsity") " AS sparsity, " R("kv_precision") " AS kv_precision, "
    R("oom") " AS oom, " R("throughput_tok_s") " AS throughput_tok_s, " R("total_s") " AS total_s, "
    R("prefill_s") " AS prefill_s, " R("compute_s") " AS compute_s, "
    R("recompute_s") " AS recompute_s, " R("transfer_s") " AS transfer_s, "
    R("cpu_attention_s") " AS cpu_attention_s, " R("stall_s") " AS stall_s, "
    R("bytes_h2d") " AS bytes_h2d, " R("bytes_d2h") " AS bytes_d2h, "
    R("gpu_hit_rate") " AS gpu_hit_rate, " R("recomputed_tokens") " AS recomputed_tokens, "
    R("preemptions") " AS preemptions, " R("phase2_step") " AS phase2_step, "
    R("phase3_step") " AS phase3_step, " R("peak_gpu_kv_bytes") " AS peak_gpu_kv_bytes, "
    R("peak_cpu_kv_bytes") " AS peak_cpu_kv_bytes, "
    R("attention_recall_mean") " AS attention_recall_mean, wall_s, "
    R("flexgen_policy.weights_gpu_percent") " AS flexgen_weights_gpu_percent, "
    R("flexgen_policy.cache_gpu_percent") " AS flexgen_cache_gpu_percent, "
    R("software") " AS software, " R("host_s") " AS host_s, " R("relay_s") " AS relay_s, "
    R("optimum.removable_s") " AS removable_s, "
    R("compute_weights_s") " AS compute_weights_s, " R("compute_kv_s") " AS compute_kv_s, "
    R("transfer_h2d_s") " AS transfer_h2d_s, " R("transfer_d2h_s") " AS transfer_d2h_s, "
    R("hbm_weight_bytes") " AS hbm_weight_bytes, " R("hbm_kv_bytes") " AS hbm_kv_bytes, "
    R("estimate_s") " AS estimate_s, " R("gather_s") " AS gather_s, "
    R("estimate_gpu_bytes") " AS estimate_gpu_bytes "
    "FROM runs WHERE json_extract(config, '$.command') = 'sim'";

static const char q_plan[] =
    "SELECT sweep, point, status, " R("selection") " AS selection, " R("placement") " AS placement, "
    R("sparsity") " AS sparsity, " R("kv_precision") " AS kv_precision, "
    R("gpu_kv_bytes") " AS gpu_kv_bytes, " R("cpu_kv_bytes") " AS cpu_kv_bytes, "
    R("oom") " AS oom, " R("gpu_misses") " AS gpu_misses, " R("gpu_hit_rate") " AS gpu_hit_rate, "
    R("loads") " AS loads, " R("recomputed_tokens") " AS recomputed_tokens, "
    R("offloads") " AS offloads, " R("drops") " AS drops, " R("bytes_h2d") " AS bytes_h2d, "
    R("bytes_d2h") " AS bytes_d2h, " R("fetch_cost_ns") " AS fetch_cost_ns, "
    R("attention_recall_mean") " AS attention_recall_mean, wall_s, "
    R("optimum.belady_misses") " AS belady_misses, " R("optimum.removable_fetch_cost_ns")
    " AS removable_fetch_cost_ns "
    "FROM runs WHERE json_extract(config, '$.command') = 'plan'";

static const char q_eval[] =
    "SELECT sweep, point, status, " R("model") " AS model, " R("text") " AS text, "
    "coalesce(" P("selection") ", 'dense') AS selection, coalesce(" P("sparsity") ", 0) AS sparsity, "
    "coalesce(" P("\"kv-int8\"") ", 'false') AS kv_int8, " R("ctx") " AS ctx, "
    R("prefill") " AS prefill, " R("windows") " AS windows, " R("tokens") " AS tokens, "
    R("nll") " AS nll, " R("ppl") " AS ppl, " R("dense_nll") " AS dense_nll, "
    R("decode_tokens") " AS decode_tokens, " R("nll_decode") " AS nll_decode, "
    R("dense_nll_decode") " AS dense_nll_decode, " R("kl") " AS kl, " R("top1") " AS top1, "
    R("tokens_per_s") " AS tokens_per_s, wall_s "
    "FROM runs WHERE json_extract(config, '$.command') = 'eval'";

static const char q_fidelity[] =
    "SELECT sweep, point, status, " R("trace") " AS trace, " R("selection") " AS selection, "
    R("sparsity") " AS sparsity, " R("budget_tokens") " AS budget_tokens, "
    R("decode_steps") " AS decode_steps, " R("attended_share") " AS attended_share, "
    R("spearman_mean") " AS spearman_mean, " R("mass_kept_mean") " AS mass_kept_mean, wall_s "
    "FROM runs WHERE json_extract(config, '$.command') = 'fidelity'";

static const char q_validate[] =
    "SELECT sweep, point, status, " R("model") " AS model, " R("profile") " AS profile, "
    R("selection") " AS selection, " R("placement") " AS placement, " R("sparsity") " AS sparsity, "
    R("gpu_kv_bytes") " AS gpu_kv_bytes, " R("batch") " AS batch, " R("prompt_len") " AS prompt_len, "
    R("gen_len") " AS gen_len, " R("phase2_step") " AS phase2_step, "
    R("phase3_step") " AS phase3_step, " R("measured_s") " AS measured_s, "
    R("predicted_s") " AS predicted_s, " R("total_error_pct") " AS total_error_pct, "
    R("mape_pct") " AS mape_pct, " R("max_ape_pct") " AS max_ape_pct, "
    R("measured_compute_s") " AS measured_compute_s, "
    R("predicted_compute_s") " AS predicted_compute_s, "
    R("measured_transfer_s") " AS measured_transfer_s, "
    R("predicted_transfer_s") " AS predicted_transfer_s, "
    R("measured_recompute_s") " AS measured_recompute_s, "
    R("predicted_recompute_s") " AS predicted_recompute_s, "
    R("measured_schedule_s") " AS measured_schedule_s, "
    R("predicted_schedule_s") " AS predicted_schedule_s, "
    R("recomputed_tokens") " AS recomputed_tokens, "
    R("weight_rate_before_gbps") " AS weight_rate_before_gbps, "
    R("weight_rate_after_gbps") " AS weight_rate_after_gbps, "
    R("weight_rate_profile_gbps") " AS weight_rate_profile_gbps, "
    R("normalised_total_error_pct") " AS normalised_total_error_pct, "
    R("normalised_mape_pct") " AS normalised_mape_pct, "
    R("weight_rate_samples") " AS weight_rate_samples, "
    R("weight_rate_min_gbps") " AS weight_rate_min_gbps, "
    R("weight_rate_max_gbps") " AS weight_rate_max_gbps, " R("repeat") " AS repeat, "
    R("repeat_spread_pct") " AS repeat_spread_pct, " R("measured_prefill_s")
    " AS measured_prefill_s, " R("predicted_prefill_s") " AS predicted_prefill_s, "
    R("end_to_end_error_pct") " AS end_to_end_error_pct, " R("prefill_error_pct")
    " AS prefill_error_pct, " R("step_ks_d") " AS step_ks_d, " R("step_ks_p") " AS step_ks_p, "
    R("step_tost_p") " AS step_tost_p, " R("cpu_share") " AS cpu_share, wall_s "
    "FROM runs WHERE json_extract(config, '$.command') = 'validate'";

static const char q_run[] =
    "SELECT sweep, point, status, code_version, " R("model") " AS model, " R("weights") " AS weights, "
    R("backend") " AS backend, " R("device") " AS device, " R("driver") " AS driver, "
    R("batch") " AS batch, "
    R("prompt_tokens") " AS prompt_tokens, " R("gen_tokens") " AS gen_tokens, "
    R("selection") " AS selection, " R("placement") " AS placement, "
    P("sparsity") " AS sparsity, " P("\"gpu-kv-bytes\"") " AS gpu_kv_bytes, "
    R("prefill_s") " AS prefill_s, " R("prefill_tok_s") " AS prefill_tok_s, "
    R("decode_s") " AS decode_s, " R("decode_tok_s") " AS decode_tok_s, "
    R("offloaded") " AS offloaded, " R("loaded") " AS loaded, " R("recomputed") " AS recomputed, "
    R("attention_source") " AS attention_source, "
    R("attention_rows_fed") " AS attention_rows_fed, wall_s, created "
    "FROM runs WHERE json_extract(config, '$.command') = 'run'";

/* command = exec rows: peer systems' benchmarks (experiments/bench/flexgen_run.py,
 * hf_decode.py), whose JSON carries these keys */
static const char q_peer[] =
    "SELECT sweep, point, status, code_version, " R("system") " AS system, " R("model")
    " AS model, " R("device") " AS device, " R("driver") " AS driver, " R("batch") " AS batch, "
    R("prompt_tokens") " AS prompt_tokens, " R("gen_tokens") " AS gen_tokens, "
    R("prefill_tok_s") " AS prefill_tok_s, " R("decode_tok_s") " AS decode_tok_s, "
    R("software") " AS software, json_extract(config, '$.params') AS params, wall_s, created "
    "FROM runs WHERE json_extract(config, '$.command') = 'exec'";

/* alisa validate-external's rows: the published figure beside the simulated */
static const char q_external[] =
    "SELECT sweep, point, status, " R("external.id") " AS id, " R("external.set") " AS point_set, "
    R("external.source") " AS source, " P("system") " AS system, " P("model") " AS model, "
    /* the profile priced: the rule's (--rule) where the point ran */
    "COALESCE(" R("hardware") ", " P("hardware") ") AS hardware, " P("rule") " AS rule, "
    P("batch") " AS batch, " P("prompt-len") " AS prompt_len, "
    P("gen-len") " AS gen_len, " R("external.published_tok_s") " AS published_tok_s, "
    R("external.predicted_tok_s") " AS predicted_tok_s, " R("external.error_pct")
    " AS error_pct, error, code_version "
    "FROM runs WHERE json_extract(result, '$.external.id') IS NOT NULL";

/* alisa serve's rows (issue 46): the stream, the scheduler, the latencies */
static const char q_serve[] =
    "SELECT sweep, point, status, " R("model") " AS model, " R("hardware") " AS hardware, "
    R("selection") " AS selection, " R("placement") " AS placement, " R("sparsity")
    " AS sparsity, " R("kv_precision") " AS kv_precision, " R("requests") " AS requests, "
    R("workload.rate") " AS rate, " R("workload.burstiness") " AS burstiness, "
    R("workload.prompt_min") " AS prompt_min, " R("workload.prompt_max") " AS prompt_max, "
    R("workload.output_min") " AS output_min, " R("workload.output_max") " AS output_max, "
    R("workload.csv") " AS requests_csv, " R("scheduler.max_num_seqs") " AS max_num_seqs, "
    R("scheduler.max_batched_tokens") " AS max_batched_tokens, " R("scheduler.chunked_prefill")
    " AS chunked_prefill, " R("memory.gpu_tokens_per_request") " AS gpu_tokens, "
    R("oom") " AS oom, " R("makespan_s") " AS makespan_s, " R("throughput_tok_s")
    " AS throughput_tok_s, " R("request_rate_s") " AS request_rate_s, " R("goodput_req_s")
    " AS goodput_req_s, " R("slo_attained") " AS slo_attained, " R("slo.ttft_s")
    " AS slo_ttft_s, " R("slo.tpot_s") " AS slo_tpot_s, " R("ttft_s.mean") " AS ttft_mean_s, "
    R("ttft_s.p50") " AS ttft_p50_s, " R("ttft_s.p90") " AS ttft_p90_s, " R("ttft_s.p99")
    " AS ttft_p99_s, " R("tpot_s.mean") " AS tpot_mean_s, " R("tpot_s.p50") " AS tpot_p50_s, "
    R("tpot_s.p90") " AS tpot_p90_s, " R("tpot_s.p99") " AS tpot_p99_s, " R("e2e_s.mean")
    " AS e2e_mean_s, " R("e2e_s.p50") " AS e2e_p50_s, " R("e2e_s.p90") " AS e2e_p90_s, "
    R("e2e_s.p99") " AS e2e_p99_s, " R("iterations") " AS iterations, " R("preemptions")
    " AS preemptions, " R("time.mean_running") " AS mean_running, " R("traffic.bytes_h2d")
    " AS bytes_h2d, " R("traffic.bytes_d2h") " AS bytes_d2h, " R("memory.peak_gpu_kv_bytes")
    " AS peak_gpu_kv_bytes, " R("memory.peak_cpu_kv_bytes") " AS peak_cpu_kv_bytes, wall_s "
    "FROM runs WHERE json_extract(config, '$.command') = 'serve'";

/* alisa serve-run --predict: the executor serving a stream against the
 * simulator serving it (issue 46, item 4). */
static const char q_serve_validate[] =
    "SELECT sweep, point, status, " R("model") " AS model, " R("predicted.hardware")
    " AS hardware, " R("requests") " AS requests, " R("workload.rate") " AS rate, "
    R("workload.burstiness") " AS burstiness, " R("workload.prompt_min") " AS prompt_min, "
    R("workload.prompt_max") " AS prompt_max, " R("workload.output_min") " AS output_min, "
    R("workload.output_max") " AS output_max, " R("workload.csv") " AS requests_csv, "
    R("max_num_seqs") " AS max_num_seqs, " R("max_batched_tokens") " AS max_batched_tokens, "
    R("chunked_prefill") " AS chunked_prefill, " R("kv_blocks") " AS kv_blocks, " R("repeat") " AS repeat, " R("iterations")
    " AS iterations, " R("predicted.iterations") " AS predicted_iterations, " R("preemptions")
    " AS preemptions, " R("predicted.preemptions") " AS predicted_preemptions, "
    R("makespan_s") " AS makespan_s, " R("predicted.makespan_s") " AS predicted_makespan_s, "
    R("ttft_s.mean") " AS ttft_mean_s, " R("predicted.ttft_s.mean") " AS predicted_ttft_mean_s, "
    R("tpot_s.mean") " AS tpot_mean_s, " R("predicted.tpot_s.mean") " AS predicted_tpot_mean_s, "
    R("e2e_s.mean") " AS e2e_mean_s, " R("predicted.e2e_s.mean") " AS predicted_e2e_mean_s, "
    R("error_pct.makespan") " AS makespan_error_pct, " R("repeat_spread_pct.makespan") " AS makespan_spread_pct, "
    R("error_pct.throughput") " AS throughput_error_pct, " R("repeat_spread_pct.throughput") " AS throughput_spread_pct, "
    R("error_pct.ttft_mean") " AS ttft_mean_error_pct, " R("repeat_spread_pct.ttft_mean") " AS ttft_mean_spread_pct, "
    R("error_pct.ttft_p90") " AS ttft_p90_error_pct, " R("repeat_spread_pct.ttft_p90") " AS ttft_p90_spread_pct, "
    R("error_pct.ttft_p99") " AS ttft_p99_error_pct, " R("repeat_spread_pct.ttft_p99") " AS ttft_p99_spread_pct, "
    R("error_pct.tpot_mean") " AS tpot_mean_error_pct, " R("repeat_spread_pct.tpot_mean") " AS tpot_mean_spread_pct, "
    R("error_pct.tpot_p90") " AS tpot_p90_error_pct, " R("repeat_spread_pct.tpot_p90") " AS tpot_p90_spread_pct, "
    R("error_pct.tpot_p99") " AS tpot_p99_error_pct, " R("repeat_spread_pct.tpot_p99") " AS tpot_p99_spread_pct, "
    R("error_pct.e2e_mean") " AS e2e_mean_error_pct, " R("repeat_spread_pct.e2e_mean") " AS e2e_mean_spread_pct, "
    R("error_pct.e2e_p90") " AS e2e_p90_error_pct, " R("repeat_spread_pct.e2e_p90") " AS e2e_p90_spread_pct, "
    R("error_pct.e2e_p99") " AS e2e_p99_error_pct, " R("repeat_spread_pct.e2e_p99") " AS e2e_p99_spread_pct, "
    R("tests.ttft.ks_d") " AS ttft_ks_d, " R("tests.ttft.ks_p") " AS ttft_ks_p, " R("tests.ttft.tost_p") " AS ttft_tost_p, "
    R("tests.tpot.ks_d") " AS tpot_ks_d, " R("tests.tpot.ks_p") " AS tpot_ks_p, " R("tests.tpot.tost_p") " AS tpot_tost_p, "
    R("tests.e2e.ks_d") " AS e2e_ks_d, " R("tests.e2e.ks_p") " AS e2e_ks_p, " R("tests.e2e.tost_p") " AS e2e_tost_p, "
    "wall_s, " R("selection") " AS selection, " R("placement") " AS placement, "
    R("kv_offloads") " AS kv_offloads, " R("kv_loads") " AS kv_loads, "
    R("machine.rate_profile_gbps") " AS rate_profile_gbps, " R("machine.rate_gbps")
    " AS machine_rate_gbps, " R("normalised_error_pct.makespan") " AS normalised_makespan_error_pct, "
    R("normalised_error_pct.ttft_mean") " AS normalised_ttft_mean_error_pct, "
    R("normalised_error_pct.tpot_mean") " AS normalised_tpot_mean_error_pct, "
    R("normalised_error_pct.e2e_mean") " AS normalised_e2e_mean_error_pct, "
    R("normalised_error_pct.e2e_p99") " AS normalised_e2e_p99_error_pct "
    "FROM runs WHERE json_extract(config, '$.command') = 'serve-run'";

static const char q_runs[] =
    "SELECT sweep, point, config_hash, status, error, code_version, wall_s, created, config "
    "FROM runs WHERE 1";

/* The named queries, in results_queries' order. */
static const struct {
    const char *name, *sql;
} query_table[] = {{"sim", q_sim},           {"plan", q_plan},         {"eval", q_eval},
                   {"fidelity", q_fidelity}, {"validate", q_validate}, {"run", q_run},
                   {"peer", q_peer},         {"external", q_external}, {"serve", q_serve},
                   {"serve-validate", q_serve_validate}, {"runs", q_runs}, {NULL, NULL}};

const char *const results_queries[] = {"sim",   "plan",           "eval", "fidelity", "validate",
                                       "run",   "peer",           "external", "serve",
                                       "serve-validate", "runs", NULL};

/* CSV field: quoted when it holds a comma, quote or newline. */
static void csv_field(FILE *out, const unsigned char *v)
{
    if (!v)
        return;
    if (!strpbrk((const char *)v, ",\"\n\r")) {
        fputs((const char *)v, out);
        return;
    }
    fputc('"', out);
    for (; *v; v++) {
        if (*v == '"')
            fputc('"', out);
        fputc(*v, out);
    }
    fputc('"', out);
}

int results_export(const char *db, const char *query, const char *sweep, FILE *out,
                   struct alisa_err *e)
{
    const char *base = NULL;
    for (size_t i = 0; query_table[i].name && !base; i++)
        if (strcmp(query, query_table[i].name) == 0)
            base = query_table[i].sql;
    if (!base)
        return err_set(e, ALISA_EINVAL, "unknown query '%s' (sim, plan, eval, fidelity, validate, "
                       "run, peer, external, serve, runs)", query);
    struct results *r;
    int rc = results_open_readonly(&r, db, e);
    if (rc)
        return rc;
    /* sized by the query (serve-validate's is past 4 KiB) */
    const char *tail = sweep ? " AND sweep = ? ORDER BY sweep, point" : " ORDER BY sweep, point";
    char *sql = malloc(strlen(base) + strlen(tail) + 1);
    if (!sql) {
        results_close(r);
        return err_set(e, ALISA_ENOMEM, "%s: out of memory for the export query", db);
    }
    strcpy(sql, base);
    strcat(sql, tail);
    sqlite3_stmt *st;
    int prepared = sqlite3_prepare_v2(r->db, sql, -1, &st, NULL) == SQLITE_OK;
    free(sql);
    if (!prepared) {
        rc = db_fail(e, db, r->db, "export query failed");
        results_close(r);
        return rc;
    }
    if (sweep)
        sqlite3_bind_text(st, 1, sweep, -1, SQLITE_STATIC);
    int cols = sqlite3_column_count(st);
    for (int c = 0; c < cols; c++)
        fprintf(out, c ? ",%s" : "%s", sqlite3_column_name(st, c));
    fputc('\n', out);
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        for (int c = 0; c < cols; c++) {
            if (c)
                fputc(',', out);
            csv_field(out, sqlite3_column_text(st, c));
        }
        fputc('\n', out);
    }
    if (step != SQLITE_DONE)
        rc = db_fail(e, db, r->db, "export failed");
    else if (ferror(out))
        rc = err_set(e, ALISA_EIO, "export: write failed");
    sqlite3_finalize(st);
    results_close(r);
    return rc;
}
