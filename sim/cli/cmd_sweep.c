/* `alisa sweep` and `alisa db`: run a sweep spec's points into a results
 * database, emit them as independent jobs, merge databases, export CSV.
 *
 * Each point runs in a forked child that calls the same command a user
 * would (`alisa sim ... --json`); the parent collects its output through
 * pipes and writes one row per point in its own transaction (results.h), so
 * killing the sweep loses at most the points still running, and a rerun
 * skips every point already stored.
 */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "outfile.h"
#include "cli.h"
#include "cli_opts.h"
#include "names.h"
#include "git_version.h"
#include "progress.h"
#include "cmds.h"
#include "results.h"
#include "sweep_spec.h"

struct sets {
    char **kv; /* (n) "KEY=VALUE", borrowed from argv */
    int n;
};

struct sweep_timeout {
    uint32_t s;
    int given;
};

struct sweep_opts {
    const char *db, *parts;
    uint32_t jobs;
    struct sweep_timeout timeout;
    uint64_t only;
    int emit, list;
    struct sets sets;
};

static int read_timeout(void *field, const char *opt, const char *arg, struct alisa_err *e)
{
    struct sweep_timeout *t = field;
    if (cli_parse_u32(opt, arg, &t->s, e))
        return 1;
    if (t->s > 7 * 86400)
        return err_set(e, ALISA_EINVAL, "--timeout %u: more than a week", t->s);
    t->given = 1;
    return 0;
}

/* --set KEY=VALUE, repeatable: appended to the sets (room for every argument) */
static int read_set(void *field, const char *opt, const char *arg, struct alisa_err *e)
{
    struct sets *sets = field;
    if (!strchr(arg, '=') || arg[0] == '=')
        return err_set(e, ALISA_EINVAL, "%s '%s': expected KEY=VALUE", opt, arg);
    sets->kv[sets->n++] = (char *)arg;
    return 0;
}

#define WO(f) offsetof(struct sweep_opts, f)
static const struct cli_opt sweep_opts[] = {
    {"db", "FILE", CLI_STR, WO(db), NULL, 0, "results database (default results.db)", 0},
    {"jobs", "N", CLI_U32, WO(jobs), NULL, 0, "run N points at once (default 1)", 0},
    {"point", "K", CLI_U64, WO(only), NULL, 0, "run only point K (0-based)", 0},
    {"timeout", "S", CLI_FN, WO(timeout), read_timeout, 0,
     "stop a point after S seconds of wall time (its process\n"
     "group is sent SIGTERM, then SIGKILL 5 s later) and store\n"
     "it as failed, \"timed out\"; default the spec's [sweep]\n"
     "timeout, else none (6 hours for command = exec)", 0},
    {"set", "KEY=VALUE", CLI_FN, WO(sets), read_set, 0,
     "override one parameter in every point (a [fixed] or [vary]\n"
     "key, linked or not, keeps its point numbering; a new key\n"
     "joins [fixed]; program= replaces an exec spec's program);\n"
     "repeatable; the overrides are part of each point's identity", 0},
    {"list", NULL, CLI_FLAG, WO(list), NULL, 0,
     "print each point's number and configuration, run nothing", 0},
    {"emit-jobs", NULL, CLI_FLAG, WO(emit), NULL, 0,
     "print one self-contained command per point instead of\n"
     "running, each writing its own database in DIR, for GNU\n"
     "parallel or a Slurm array; combine them with alisa db merge", 0},
    {"parts", "DIR", CLI_STR, WO(parts), NULL, 0,
     "directory for those databases (default <sweep name>-parts)", 0},
    {NULL, NULL, 0, 0, NULL, 0, NULL, 0}};
static const struct cli_group sweep_groups[] = {{sweep_opts, 0}};
static const struct cli_command_opts sweep_command = {sweep_groups, 1, 0, 1};

void cmd_sweep_usage(FILE *out)
{
    fprintf(out,
            "usage: alisa sweep SPEC [--db FILE] [--jobs N] [--point K] [--timeout S]\n"
            "                        [--set KEY=VALUE]...\n"
            "       alisa sweep SPEC --emit-jobs [--parts DIR] [--set KEY=VALUE]...\n"
            "       alisa sweep SPEC --list [--set KEY=VALUE]...\n"
            "\n"
            "Runs every point of a sweep spec (format: experiments/README.md): the product\n"
            "of its [vary] lists, each with its [fixed] parameters, as `alisa sim`, `plan`,\n"
            "`eval`, `fidelity`, `validate`, `run`, `serve` or `serve-run` with --json; with\n"
            "command = "
            "exec, the spec's program (a peer system's benchmark) with the point's options\n"
            "and --json, printing one JSON object. One row per point goes into a\n"
            "SQLite database (config, config hash, code version, the command's JSON\n"
            "metrics, wall time), in its own transaction: killing the sweep at any moment\n"
            "leaves whole rows only, and a rerun skips the points already stored (failed\n"
            "points are retried).\n"
            "Progress goes to stderr: a bar with count, rate and ETA on a terminal, one line\n"
            "per point otherwise. Exits 1 when any point failed. SIGINT or SIGTERM stops\n"
            "the running points (their whole process groups), stores nothing partial and\n"
            "says how to resume (the same command again).\n"
            "\n"
            );
    cli_opts_help(out, &sweep_command, 18);
    fprintf(out, "\n"
            "examples (run as shown by tests/readme_test.sh):\n"
            "  alisa sweep experiments/fig9-demo.sweep --db results.db\n"
            "\n"
            "across machines (GNU parallel; or a Slurm array over jobs.txt):\n"
            "  alisa sweep experiments/fig9-h100.sweep --emit-jobs > jobs.txt\n"
            "  parallel -j 8 < jobs.txt            # or: parallel --sshloginfile hosts ...\n"
            "  alisa db merge results.db fig9-h100-parts/*.db\n");
}

struct export_opts {
    const char *db, *query, *sweep, *out;
};

#define XO(f) offsetof(struct export_opts, f)
static const struct cli_opt export_opts[] = {
    {"db", "FILE", CLI_STR, XO(db), NULL, 1, "the results database", 0},
    {"query", "NAME", CLI_STR, XO(query), NULL, 1, "the query (above)", 0},
    {"sweep", "NAME", CLI_STR, XO(sweep), NULL, 0, "keep one sweep's rows", 0},
    {"output", "FILE", CLI_STR, XO(out), NULL, 0, "write the CSV there, whole or not at all", 'o'},
    {NULL, NULL, 0, 0, NULL, 0, NULL, 0}};
static const struct cli_group export_groups[] = {{export_opts, 0}};
static const struct cli_command_opts export_command = {export_groups, 1, 0, 0};

void cmd_db_usage(FILE *out)
{
    fprintf(out,
            "usage: alisa db merge OUT IN...\n"
            "       alisa db export --db FILE --query NAME [--sweep NAME] [-o FILE]\n"
            "\n"
            "  merge     copies every row of the IN databases into OUT (created when\n"
            "            missing); a point already in OUT is kept as it is, unless OUT\n"
            "            has it failed and an IN has it ok (then the ok row replaces it)\n"
            "  export    writes a query's result as CSV (header line first) to stdout or -o:\n"
            "              sim    one row per `alisa sim` point: model, hardware, system,\n"
            "                     batch, sparsity, throughput_tok_s, time split, traffic, ...\n"
            "              plan   one row per `alisa plan` point: placement, capacities,\n"
            "                     gpu_misses, gpu_hit_rate, loads, recomputations, ...\n"
            "              eval   one row per `alisa eval` point: model, text, selection,\n"
            "                     sparsity, kv_int8, nll, ppl, against dense: kl, top1, ...\n"
            "              fidelity  one row per `alisa fidelity` point: selection, sparsity,\n"
            "                     spearman_mean, mass_kept_mean, ...\n"
            "              validate  one row per `alisa validate` point: configuration,\n"
            "                     measured_s, predicted_s, total_error_pct, mape_pct, the\n"
            "                     categories, the machine's weight rate against the profile\n"
            "              run    one row per `alisa run` point: model, weights, backend,\n"
            "                     device, batch, tokens, prefill and decode tok/s, KV moves,\n"
            "                     attention source, code version\n"
            "              peer   one row per command = exec point (a peer's benchmark):\n"
            "                     system, model, device, driver, batch, tokens, prefill\n"
            "                     and decode tok/s, software, its options\n"
            "              serve  one row per `alisa serve` point: policies, the stream,\n"
            "                     the scheduler, throughput, goodput, TTFT, TPOT and\n"
            "                     latency (mean, P50, P90, P99), preemptions, traffic\n"
            "              serve-validate  one row per `alisa serve-run` point that\n"
            "                     predicts: the stream, measured and predicted latencies,\n"
            "                     each metric's error and the repeats' spread, KS, TOST\n"
            "              external  one row per `alisa validate-external` point: id,\n"
            "                     set, source, system, model, published and predicted\n"
            "                     tok/s, error_pct\n"
            "              runs   bookkeeping: status (ok; oom: it ran out of memory, its\n"
            "                     partial counts kept; error), error, code version, wall\n"
            "                     time, config\n"
            "\n"
            "export's options:\n");
    cli_opts_help(out, &export_command, 20);
    fprintf(out, "\n"
            "examples (run as shown by tests/readme_test.sh):\n"
            "  alisa db export --db results.db --query sim --sweep fig9-demo -o fig9.csv\n");
}

/* A running point. */
struct job {
    pid_t pid;
    int fd[2];          /* stdout, stderr read ends; -1 once at EOF */
    char *buf[2];       /* what they said */
    size_t len[2], cap[2];
    struct sweep_point point;
    struct timespec start;
    int exec;           /* point.argv[0] is a program to exec, not an alisa command */
    double deadline_s;  /* cli_now_s() after which the point is stopped; 0: none */
    double killed_s;    /* when SIGTERM went to its group; 0: not yet */
    int timed_out;
    size_t dropped[2];  /* bytes of output beyond JOB_OUTPUT_CAP, counted and dropped */
    char why[600];      /* a failed point's reason, as stored in its row */
    int oom;            /* it ran and reported running out of memory (status 'oom') */
};

/* What a point's stdout or stderr may hold: a point that prints without end
 * must not take the sweep's memory (issue 48); the rest is counted. */
#define JOB_OUTPUT_CAP ((size_t)64 << 20)

/* Set by SIGINT or SIGTERM: stop the running points and leave. */
static volatile sig_atomic_t sweep_stop_signal;

static void sweep_on_signal(int sig)
{
    sweep_stop_signal = sig;
}

static int job_start(struct job *j)
{
    int out[2], err[2];
    if (pipe(out) != 0)
        return -1;
    if (pipe(err) != 0) {
        close(out[0]);
        close(out[1]);
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(out[0]);
        close(out[1]);
        close(err[0]);
        close(err[1]);
        return -1;
    }
    if (pid == 0) {
        /* its own process group, so a stop reaches whatever it starts */
        setpgid(0, 0);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        dup2(out[1], STDOUT_FILENO);
        dup2(err[1], STDERR_FILENO);
        close(out[0]);
        close(out[1]);
        close(err[0]);
        close(err[1]);
        if (j->exec) { /* a peer's benchmark: its own program, the user's environment */
            const char *set = getenv("ALISA_WAIT_SET"); /* what main.c added */
            char names[128];
            snprintf(names, sizeof names, "%s", set ? set : "");
            char *save = NULL;
            for (char *n = strtok_r(names, " ", &save); n; n = strtok_r(NULL, " ", &save))
                unsetenv(n);
            unsetenv("ALISA_WAIT_SET");
            execv(j->point.argv[0], j->point.argv);
            fprintf(stderr, "%s: %s\n", j->point.argv[0], strerror(errno));
            _exit(127);
        }
        int code = cli_run_command(j->point.argc, j->point.argv);
        fflush(stdout);
        fflush(stderr);
        _exit(code);
    }
    setpgid(pid, pid); /* also here: no race with a stop before the child ran */
    close(out[1]);
    close(err[1]);
    j->pid = pid;
    j->fd[0] = out[0];
    j->fd[1] = err[0];
    j->len[0] = j->len[1] = 0;
    clock_gettime(CLOCK_MONOTONIC, &j->start);
    return 0;
}

/* Reads what is available on fd k of j; closes it at EOF. */
static void job_read(struct job *j, int k)
{
    if (j->len[k] >= JOB_OUTPUT_CAP) { /* read on, keep nothing */
        char sink[4096];
        ssize_t n = read(j->fd[k], sink, sizeof sink);
        if (n > 0) {
            j->dropped[k] += (size_t)n;
        } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
            close(j->fd[k]);
            j->fd[k] = -1;
        }
        return;
    }
    if (j->len[k] + 4096 + 1 > j->cap[k]) {
        size_t cap = j->cap[k] ? 2 * j->cap[k] : 8192;
        while (cap < j->len[k] + 4096 + 1)
            cap *= 2;
        char *b = realloc(j->buf[k], cap);
        if (!b) {
            close(j->fd[k]); /* drop output rather than crash; the row records an error */
            j->fd[k] = -1;
            return;
        }
        j->buf[k] = b;
        j->cap[k] = cap;
    }
    ssize_t n = read(j->fd[k], j->buf[k] + j->len[k], 4096);
    if (n > 0) {
        j->len[k] += (size_t)n;
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        close(j->fd[k]);
        j->fd[k] = -1;
    }
    if (j->buf[k])
        j->buf[k][j->len[k]] = 0;
}

/* The last non-empty line of s (in place), for error rows. */
static const char *last_line(char *s)
{
    if (!s)
        return "";
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = 0;
    char *nl = strrchr(s, '\n');
    return nl ? nl + 1 : s;
}

/* The [vary] values of a point, "key=value ...", for progress lines. */
static void point_label(const struct sweep_spec *s, const struct sweep_point *p, char *buf,
                        size_t cap)
{
    buf[0] = 0;
    json_t *cfg = json_loads(p->config, 0, NULL);
    json_t *params = cfg ? json_object_get(cfg, "params") : NULL;
    for (uint32_t i = 0; params && i < s->n_vary; i++) {
        char keys[256];
        snprintf(keys, sizeof keys, "%s", s->vary[i].key);
        char *save = NULL;
        for (char *k = strtok_r(keys, ",", &save); k; k = strtok_r(NULL, ",", &save)) {
            const char *v = json_string_value(json_object_get(params, k));
            size_t used = strlen(buf);
            snprintf(buf + used, cap - used, "%s%s=%s", used ? " " : "", k, v ? v : "?");
        }
    }
    json_decref(cfg);
}

/* Points whose row the database did not take (or whose commit reported an
 * error: SQLite may report one after the row landed), by config hash. */
struct unsaved {
    char (*hash)[SWEEP_HASH_LEN + 1];
    uint64_t n, cap;
};

/* The sweep's counts; on a terminal a progress line (progress.h), else a
 * line per point for the log. */
struct tally {
    struct progress bar;
    uint64_t total, skipped, done, failed, oom; /* oom: among done, out of memory */
    struct unsaved unsaved; /* points run whose row may not be stored */
    char failures[8][200];  /* the first failed points' "point K: reason", for the summary */
    uint32_t n_failures;
};

static void failures_add(struct tally *pg, uint64_t point, const char *why)
{
    if (pg->n_failures < 8)
        snprintf(pg->failures[pg->n_failures], sizeof pg->failures[0], "point %llu: %.170s",
                 (unsigned long long)point, why);
    pg->n_failures++;
}

static void progress_show(struct tally *pg, const struct sweep_spec *s,
                          const struct sweep_point *p, int ok, int oom, double wall,
                          const char *why)
{
    uint64_t finished = pg->skipped + pg->done + pg->failed;
    if (pg->bar.on) {
        snprintf(pg->bar.what, sizeof pg->bar.what, "%.40s (%llu failed)", s->name,
                 (unsigned long long)pg->failed);
        progress_set(&pg->bar, finished);
        return;
    }
    char label[512];
    point_label(s, p, label, sizeof label);
    fprintf(stderr, "%s: %llu/%llu point %llu %s %.2f s (%s)%s%s\n", s->name,
            (unsigned long long)finished, (unsigned long long)pg->total,
            (unsigned long long)p->index, !ok ? "FAILED" : oom ? "out of memory" : "ok", wall,
            label, ok ? "" : ": ",
            ok ? "" : why);
}

static void unsaved_add(struct unsaved *u, const char *hash)
{
    if (u->n == u->cap) {
        uint64_t cap = u->cap ? 2 * u->cap : 64;
        void *p = realloc(u->hash, cap * sizeof *u->hash);
        if (!p) { /* counted all the same: the summary must not undercount */
            u->n++;
            return;
        }
        u->hash = p;
        u->cap = cap;
    }
    if (u->n < u->cap)
        snprintf(u->hash[u->n], sizeof u->hash[0], "%s", hash);
    u->n++;
}

/* After the database failed: how many of u's points are really missing,
 * asked of a fresh read-only connection (the failed one's view is not to
 * be trusted). All of them when it cannot be read. */
static uint64_t unsaved_count(const struct unsaved *u, const char *db_path)
{
    struct results *r;
    if (!u->n || results_open_readonly(&r, db_path, NULL))
        return u->n;
    uint64_t missing = 0;
    for (uint64_t i = 0; i < u->n; i++) {
        int done = 0;
        if (i >= u->cap || results_done(r, u->hash[i], &done, NULL) || !done)
            missing++;
    }
    results_close(r);
    return missing;
}

/* Waits for j's process and stores its row. Returns 1 when the point failed.
 * Once a row could not be stored (*db_rc set) no later row is tried; such
 * points go to *unsaved. */
static int job_finish(struct job *j, const struct sweep_spec *s, struct results *db, int *db_rc,
                      struct unsaved *unsaved, struct alisa_err *e)
{
    int status = 0;
    while (waitpid(j->pid, &status, 0) < 0 && errno == EINTR)
        ;
    double wall = cli_now_s() - (j->start.tv_sec + j->start.tv_nsec * 1e-9);
    int exited_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    json_error_t jerr;
    json_t *res = exited_ok && j->buf[0] ? json_loads(j->buf[0], 0, &jerr) : NULL;
    char *compact = res ? json_dumps(res, JSON_COMPACT) : NULL;
    char why[600];
    if (j->timed_out || j->dropped[0] || j->dropped[1]) {
        int n = j->timed_out ? snprintf(why, sizeof why, "timed out after %.0f s (its process "
                                        "group stopped)", wall) : 0;
        if (j->dropped[0] || j->dropped[1])
            snprintf(why + n, sizeof why - (size_t)n, "%sprinted more than %zu MiB (%zu bytes "
                     "of stdout and %zu of stderr dropped)", n ? "; " : "", JOB_OUTPUT_CAP >> 20,
                     j->dropped[0], j->dropped[1]);
        json_decref(res);
        free(compact);
        res = NULL;
        compact = NULL;
    } else if (!exited_ok) {
        if (WIFSIGNALED(status))
            snprintf(why, sizeof why, "killed by signal %d", WTERMSIG(status));
        else
            snprintf(why, sizeof why, "exit %d: %s", WEXITSTATUS(status), last_line(j->buf[1]));
    } else if (!compact) {
        snprintf(why, sizeof why, "output is not JSON");
    }
    int ok = compact != NULL;
    /* a run out of memory is a result (its counts kept), not a success */
    j->oom = ok && json_is_true(json_object_get(res, "oom"));
    snprintf(j->why, sizeof j->why, "%s", ok ? "" : why);
    struct result_row row = {s->name, j->point.index, j->point.hash, j->point.config,
                             ALISA_GIT_VERSION, ok ? compact : "{}", ok, j->oom,
                             ok ? NULL : why, wall};
    if (*db_rc || (*db_rc = results_put(db, &row, e)))
        unsaved_add(unsaved, j->point.hash);
    free(compact);
    json_decref(res);
    return !ok;
}

/* The --set arguments a sweep was given, to pass on. */

static int emit_jobs(const struct sweep_spec *s, const char *parts, const struct sets *sets,
                     uint32_t timeout_s, struct alisa_err *e)
{
    char self[PATH_MAX], spec[PATH_MAX], dir[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n < 0)
        return err_set(e, ALISA_EIO, "cannot find the alisa binary (/proc/self/exe)");
    self[n] = 0;
    if (!realpath(s->path, spec))
        return err_set(e, ALISA_EIO, "%s: cannot resolve", s->path);
    if (mkdir(parts, 0777) != 0 && errno != EEXIST)
        return err_set(e, ALISA_EIO, "%s: cannot create the parts directory", parts);
    if (!realpath(parts, dir))
        return err_set(e, ALISA_EIO, "%s: cannot resolve", parts);
    /* every word through one quoting function: a spec's name or path may
     * hold quotes, spaces or $ (issue 48) */
    char db[PATH_MAX + 96];
    for (uint64_t k = 0; k < s->n_points; k++) {
        sweep_shell_quote(stdout, self);
        fputs(" sweep ", stdout);
        sweep_shell_quote(stdout, spec);
        printf(" --point %llu --db ", (unsigned long long)k);
        snprintf(db, sizeof db, "%s/%s-%llu.db", dir, s->name, (unsigned long long)k);
        sweep_shell_quote(stdout, db);
        if (timeout_s)
            printf(" --timeout %u", timeout_s);
        for (int i = 0; i < sets->n; i++) {
            fputs(" --set ", stdout);
            sweep_shell_quote(stdout, sets->kv[i]);
        }
        putchar('\n');
    }
    return 0;
}

/* The option names (without "--") of `alisa COMMAND`, asked of the command
 * itself: a child with ALISA_LIST_OPTIONS=1, where cli_list_options prints
 * them and exits. *out is "name\nname\n..." (malloc'd). */
static int command_options(const char *command, char **out, struct alisa_err *e)
{
    *out = NULL;
    int fd[2];
    if (pipe(fd) != 0)
        return err_set(e, ALISA_EIO, "cannot ask alisa %s for its options: %s", command,
                       strerror(errno));
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], STDOUT_FILENO);
        close(fd[0]);
        close(fd[1]);
        setenv("ALISA_LIST_OPTIONS", "1", 1);
        char cmd[32];
        snprintf(cmd, sizeof cmd, "%s", command);
        char *argv[] = {cmd, NULL};
        _exit(cli_run_command(1, argv));
    }
    close(fd[1]);
    if (pid < 0) {
        close(fd[0]);
        return err_set(e, ALISA_EIO, "cannot ask alisa %s for its options", command);
    }
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);
    ssize_t n = 0;
    while (buf && (n = read(fd[0], buf + len, cap - len - 1)) > 0) {
        len += (size_t)n;
        if (len + 1 == cap) {
            char *grown = cap < (1u << 20) ? realloc(buf, 2 * cap) : NULL;
            if (!grown) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = grown;
            cap *= 2;
        }
    }
    close(fd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!buf || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        free(buf);
        return err_set(e, ALISA_EIO, "cannot ask alisa %s for its options", command);
    }
    buf[len] = 0;
    *out = buf;
    return 0;
}

/* The line of spec path whose key (alone or among linked keys) is key, or
 * 0 (a --set key). */
static int spec_key_line(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    int no = 0, found = 0;
    size_t n = strlen(key);
    while (f && !found && fgets(line, sizeof line, f)) {
        no++;
        char *eq = strchr(line, '=');
        if (line[0] == ' ' || line[0] == '\t' || line[0] == ';' || line[0] == '[' || !eq)
            continue;
        for (char *k = line; k < eq && !found;) {
            while (k < eq && (*k == ' ' || *k == ','))
                k++;
            char *end = k;
            while (end < eq && *end != ',' && *end != ' ' && *end != '\t')
                end++;
            found = (size_t)(end - k) == n && strncmp(k, key, n) == 0;
            k = end;
        }
    }
    if (f)
        fclose(f);
    return found ? no : 0;
}

/* Every parameter of s is an option of its command, checked before any
 * point runs (issue 41: a typo ran every point and failed each): one line
 * naming the file, line and key, with the nearest option. exec specs are
 * their program's business and pass. */
static int spec_check_options(const struct sweep_spec *s, struct alisa_err *e)
{
    if (strcmp(s->command, "exec") == 0)
        return 0;
    char *opts;
    int rc = command_options(s->command, &opts, e);
    if (rc)
        return rc;
    const char *names[256];
    size_t n_names = 0;
    for (char *save = NULL, *t = strtok_r(opts, "\n", &save); t && n_names < 256;
         t = strtok_r(NULL, "\n", &save))
        names[n_names++] = t[0] == '-' && t[1] == '-' ? t + 2 : t;
    for (uint32_t i = 0; !rc && i < s->n_fixed + s->n_vary; i++) {
        const char *key = i < s->n_fixed ? s->fixed[i].key : s->vary[i - s->n_fixed].key;
        char keys[sizeof s->fixed[0].key];
        snprintf(keys, sizeof keys, "%s", key);
        for (char *save = NULL, *k = strtok_r(keys, ",", &save); !rc && k;
             k = strtok_r(NULL, ",", &save)) {
            int known = 0;
            for (size_t j = 0; j < n_names && !known; j++)
                known = strcmp(names[j], k) == 0;
            if (known)
                continue;
            const char *near = names_nearest(k, names, n_names);
            int line = spec_key_line(s->path, k);
            char where[600];
            if (line)
                snprintf(where, sizeof where, "%s:%d", s->path, line);
            else
                snprintf(where, sizeof where, "%s (--set)", s->path);
            rc = near ? err_set(e, ALISA_EINVAL, "%s: '%s' is not an option of alisa %s; did you "
                                "mean '%s'? (alisa %s --help lists them)", where, k, s->command,
                                near, s->command)
                      : err_set(e, ALISA_EINVAL, "%s: '%s' is not an option of alisa %s (alisa %s "
                                "--help lists them)", where, k, s->command, s->command);
        }
    }
    free(opts);
    return rc;
}

/* A sweep being run: its points, the database, the running jobs, the tally. */
struct sweep_run {
    struct sweep_spec *s;
    struct results *db;
    const char *db_path;
    struct job *active;  /* (jobs) the running points, n_active of them first */
    uint32_t jobs, n_active, timeout_s;
    uint64_t next, end;  /* the next point to start, one past the last */
    struct tally pg;
    int db_rc;           /* the database stopped taking rows */
    struct alisa_err *e;
};

/* Frees a finished or dropped job's point and output. */
static void job_free(struct job *j)
{
    sweep_point_free(&j->point);
    free(j->buf[0]);
    free(j->buf[1]);
}

/* Starts points until every slot is busy (stored points skipped). */
static int sweep_start_points(struct sweep_run *r)
{
    int rc = 0;
    while (!rc && !sweep_stop_signal && r->next < r->end && r->n_active < r->jobs) {
        struct job *j = &r->active[r->n_active];
        if ((rc = sweep_point_make(r->s, r->next++, &j->point, r->e)))
            break;
        int done = 0;
        if ((rc = results_done(r->db, j->point.hash, &done, r->e)))
            break;
        if (done) {
            r->pg.skipped++;
            if (!r->pg.bar.on)
                fprintf(stderr, "%s: point %llu already in %s, skipped\n", r->s->name,
                        (unsigned long long)j->point.index, r->db_path);
            sweep_point_free(&j->point);
            continue;
        }
        j->exec = strcmp(r->s->command, "exec") == 0;
        if (job_start(j) != 0) {
            rc = err_set(r->e, ALISA_EIO, "cannot start a process for point %llu: %s",
                         (unsigned long long)j->point.index, strerror(errno));
            sweep_point_free(&j->point);
            break;
        }
        j->deadline_s = r->timeout_s ? cli_now_s() + r->timeout_s : 0;
        r->n_active++;
    }
    return rc;
}

/* Points past their time: SIGTERM to the group, SIGKILL 5 s on. Returns how
 * long poll may wait, ms (-1: no deadline). */
static int sweep_deadlines(struct sweep_run *r)
{
    int wait_ms = -1;
    double now = cli_now_s();
    for (uint32_t i = 0; i < r->n_active; i++) {
        struct job *j = &r->active[i];
        if (!j->deadline_s)
            continue;
        if (!j->killed_s && now >= j->deadline_s) {
            j->timed_out = 1;
            j->killed_s = now;
            kill(-j->pid, SIGTERM);
        } else if (j->killed_s && now >= j->killed_s + 5) {
            kill(-j->pid, SIGKILL);
        }
        double at = j->killed_s ? j->killed_s + 5 : j->deadline_s;
        int ms = at > now ? (int)((at - now) * 1e3) + 10 : 10;
        if (wait_ms < 0 || ms < wait_ms)
            wait_ms = ms;
    }
    return wait_ms;
}

/* Reads what the running points said, waiting at most wait_ms. */
static int sweep_poll(struct sweep_run *r, int wait_ms)
{
    struct pollfd pfd[512];
    int owner[512], which[512], n = 0;
    for (uint32_t i = 0; i < r->n_active; i++)
        for (int k = 0; k < 2; k++)
            if (r->active[i].fd[k] >= 0) {
                pfd[n] = (struct pollfd){r->active[i].fd[k], POLLIN, 0};
                owner[n] = (int)i;
                which[n++] = k;
            }
    if (n && poll(pfd, (nfds_t)n, wait_ms) < 0 && errno != EINTR)
        return err_set(r->e, ALISA_EIO, "poll failed: %s", strerror(errno));
    for (int i = 0; i < n; i++)
        if (pfd[i].revents)
            job_read(&r->active[owner[i]], which[i]);
    return 0;
}

/* Stores the points whose output ended and frees their slots. */
static void sweep_reap(struct sweep_run *r)
{
    for (uint32_t i = 0; i < r->n_active;) {
        struct job *j = &r->active[i];
        if (j->fd[0] >= 0 || j->fd[1] >= 0) {
            i++;
            continue;
        }
        int failed = job_finish(j, r->s, r->db, &r->db_rc, &r->pg.unsaved, r->e);
        double wall = cli_now_s() - (j->start.tv_sec + j->start.tv_nsec * 1e-9);
        if (failed)
            r->pg.failed++;
        else
            r->pg.done++;
        r->pg.oom += !failed && j->oom;
        progress_show(&r->pg, r->s, &j->point, !failed, j->oom, wall, j->why);
        if (failed)
            failures_add(&r->pg, j->point.index, j->why);
        job_free(j);
        r->active[i] = r->active[--r->n_active];
        memset(&r->active[r->n_active], 0, sizeof r->active[r->n_active]);
    }
}

/* On a stop signal: ends the running points (nothing partial is stored: a
 * point's row is written whole or not at all, a rerun redoes them). */
static void sweep_drop_running(struct sweep_run *r)
{
    for (uint32_t i = 0; i < r->n_active; i++)
        kill(-r->active[i].pid, SIGTERM);
    for (uint32_t i = 0; i < r->n_active; i++) {
        struct job *j = &r->active[i];
        double until = cli_now_s() + 5;
        int status;
        while (waitpid(j->pid, &status, WNOHANG) == 0 && cli_now_s() < until)
            nanosleep(&(struct timespec){0, 20000000}, NULL);
        kill(-j->pid, SIGKILL);
        while (waitpid(j->pid, &status, 0) < 0 && errno == EINTR)
            ;
        for (int k = 0; k < 2; k++)
            if (j->fd[k] >= 0)
                close(j->fd[k]);
        job_free(j);
    }
    progress_end(&r->pg.bar);
    fprintf(stderr, "%s: stopped by signal %d: %llu points stored, %u running points "
            "dropped; run the same command again to resume (stored points are skipped)\n",
            r->s->name, (int)sweep_stop_signal, (unsigned long long)(r->pg.done + r->pg.failed),
            r->n_active);
}

/* On an error, lets the running points finish (their rows are still written). */
static void sweep_drain(struct sweep_run *r)
{
    for (uint32_t i = 0; i < r->n_active; i++) {
        struct job *j = &r->active[i];
        while (j->fd[0] >= 0 || j->fd[1] >= 0)
            job_read(j, j->fd[0] >= 0 ? 0 : 1);
        if (job_finish(j, r->s, r->db, &r->db_rc, &r->pg.unsaved, r->e)) {
            r->pg.failed++;
            failures_add(&r->pg, j->point.index, j->why);
        } else {
            r->pg.done++;
            r->pg.oom += j->oom;
        }
        job_free(j);
    }
}

/* The summary on stderr: run, out of memory, skipped, failed, not stored. */
static void sweep_report(struct sweep_run *r, uint64_t missing)
{
    struct tally *pg = &r->pg;
    fprintf(stderr, "%s: %llu run", r->s->name, (unsigned long long)pg->done);
    if (pg->oom)
        fprintf(stderr, " (%llu out of memory: status 'oom')", (unsigned long long)pg->oom);
    fprintf(stderr, ", %llu skipped, %llu failed", (unsigned long long)pg->skipped,
            (unsigned long long)pg->failed);
    if (missing)
        fprintf(stderr, ", %llu NOT STORED (the database stopped taking rows)",
                (unsigned long long)missing);
    fprintf(stderr, " -> %s\n", r->db_path);
    for (uint32_t i = 0; i < pg->n_failures && i < 8; i++)
        fprintf(stderr, "  FAILED %s\n", pg->failures[i]);
    if (pg->n_failures > 8)
        fprintf(stderr, "  ... and %u more (alisa db export --db %s --query runs has every reason)\n",
                pg->n_failures - 8, r->db_path);
}

/* Runs spec s's points (only: one of them, UINT64_MAX for all) into db_path,
 * jobs at a time. Returns the command's exit status. */
static int sweep_run_points(struct sweep_spec *s, const char *db_path, uint32_t jobs,
                            uint32_t timeout_s, uint64_t only, struct alisa_err *e)
{
    struct sweep_run r = {.s = s, .db_path = db_path, .jobs = jobs, .timeout_s = timeout_s,
                          .next = only != UINT64_MAX ? only : 0,
                          .end = only != UINT64_MAX ? only + 1 : s->n_points, .e = e};
    if (results_open(&r.db, db_path, e))
        return cli_fail(e);
    signal(SIGPIPE, SIG_IGN);
    /* no SA_RESTART: a signal wakes poll() */
    struct sigaction sa = {0}, old_int, old_term;
    sa.sa_handler = sweep_on_signal;
    sigemptyset(&sa.sa_mask);
    sweep_stop_signal = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    r.pg.total = only != UINT64_MAX ? 1 : s->n_points;
    progress_start(&r.pg.bar, s->name, "points", r.pg.total, 0);
    r.active = calloc(jobs, sizeof *r.active);
    int rc = r.active ? 0 : err_set(e, ALISA_ENOMEM, "out of memory");
    while (!rc && !r.db_rc && !sweep_stop_signal && (r.next < r.end || r.n_active)) {
        if ((rc = sweep_start_points(&r)) || !r.n_active)
            continue;
        if (!(rc = sweep_poll(&r, sweep_deadlines(&r))))
            sweep_reap(&r);
    }
    int stopped = sweep_stop_signal;
    if (stopped) { /* the handlers stay until the database is closed */
        sweep_drop_running(&r);
        free(r.active);
        free(r.pg.unsaved.hash);
        results_close(r.db);
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGTERM, &old_term, NULL);
        return 128 + stopped;
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    sweep_drain(&r);
    free(r.active);
    results_close(r.db);
    uint64_t missing = unsaved_count(&r.pg.unsaved, db_path);
    free(r.pg.unsaved.hash);
    progress_end(&r.pg.bar);
    sweep_report(&r, missing);
    if (rc || r.db_rc)
        return cli_fail(e);
    return r.pg.failed ? CLI_EXIT_FAIL : 0;
}

/* --list: each point's number, hash and configuration. */
static int sweep_list(struct sweep_spec *s, struct alisa_err *e)
{
    for (uint64_t k = 0; k < s->n_points; k++) {
        struct sweep_point pt;
        if (sweep_point_make(s, k, &pt, e))
            return cli_fail(e);
        printf("%llu\t%s\t%s\n", (unsigned long long)k, pt.hash, pt.config);
        sweep_point_free(&pt);
    }
    return 0;
}

/* Loads SPEC and applies --set's overrides; checks its options. */
static int sweep_load(struct sweep_spec *s, const char *path, const struct sets *sets,
                      struct alisa_err *e)
{
    if (sweep_spec_load(s, path, e))
        return -1;
    for (int i = 0; i < sets->n; i++) {
        char key[128];
        const char *eq = strchr(sets->kv[i], '=');
        snprintf(key, sizeof key, "%.*s", (int)(eq - sets->kv[i]), sets->kv[i]);
        if (sweep_spec_set(s, key, eq + 1, e)) {
            sweep_spec_free(s);
            return -1;
        }
    }
    if (spec_check_options(s, e)) {
        sweep_spec_free(s);
        return -1;
    }
    return 0;
}

int cmd_sweep(int argc, char **argv)
{
    struct sweep_opts o = {.db = "results.db", .jobs = 1, .only = UINT64_MAX,
                           .sets = {calloc((size_t)argc, sizeof(char *)), 0}};
    if (!o.sets.kv)
        return cli_usage_error(cmd_sweep_usage, "out of memory");
    int first = 0;
    int req = cli_opts_parse(argc, argv, &sweep_command, &o, NULL, cmd_sweep_usage, &first);
    if (!req && first != argc - 1)
        req = cli_usage_error(cmd_sweep_usage, first >= argc ? "missing SPEC" : "expected one SPEC");
    if (!req && (o.jobs < 1 || o.jobs > 256))
        req = cli_usage_error(cmd_sweep_usage, "--jobs %u not in 1..256", o.jobs);
    if (req) {
        free(o.sets.kv);
        return req;
    }
    struct alisa_err e = {{0}};
    struct sweep_spec s;
    if (sweep_load(&s, argv[first], &o.sets, &e)) {
        free(o.sets.kv);
        return cli_fail(&e);
    }
    uint32_t timeout_s = o.timeout.s;
    if (!o.timeout.given)
        timeout_s = s.timeout_s ? s.timeout_s : strcmp(s.command, "exec") == 0 ? 6 * 3600 : 0;
    int rc;
    if (o.list) {
        rc = sweep_list(&s, &e);
    } else if (o.only != UINT64_MAX && o.only >= s.n_points) {
        err_set(&e, ALISA_EINVAL, "%s: --point %llu, the sweep has %llu points", s.path,
                (unsigned long long)o.only, (unsigned long long)s.n_points);
        rc = cli_fail(&e);
    } else if (o.emit) {
        char def[128];
        snprintf(def, sizeof def, "%s-parts", s.name);
        rc = emit_jobs(&s, o.parts ? o.parts : def, &o.sets, o.timeout.given ? timeout_s : 0, &e)
                 ? cli_fail(&e)
                 : 0;
    } else {
        rc = sweep_run_points(&s, o.db, o.jobs, timeout_s, o.only, &e);
    }
    free(o.sets.kv);
    sweep_spec_free(&s);
    return rc;
}

int cmd_db(int argc, char **argv)
{
    if (argc < 2)
        return cli_usage_error(cmd_db_usage, "missing db command");
    struct alisa_err e = {{0}};
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        cmd_db_usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "merge") == 0) {
        cli_set_command("db merge");
        if (argc < 4)
            return cli_usage_error(cmd_db_usage, "merge needs OUT and at least one IN");
        uint64_t added, replaced;
        if (results_merge(argv[2], (const char *const *)argv + 3, argc - 3, &added, &replaced, &e))
            return cli_fail(&e);
        fprintf(stderr, "alisa: merged %llu rows into %s", (unsigned long long)added, argv[2]);
        if (replaced)
            fprintf(stderr, "; %llu error rows replaced by ok rows of the same points",
                    (unsigned long long)replaced);
        fputc('\n', stderr);
        return 0;
    }
    if (strcmp(argv[1], "export") != 0)
        return cli_usage_error(cmd_db_usage, "unknown db command '%s'", argv[1]);
    cli_set_command("db export");
    struct export_opts o = {0};
    int req = cli_opts_parse(argc - 1, argv + 1, &export_command, &o, NULL, cmd_db_usage, NULL);
    if (req)
        return req;
    const char *db = o.db, *query = o.query, *sweep = o.sweep, *out_path = o.out;
    if (access(db, R_OK) != 0) {
        err_set(&e, ALISA_EIO, "%s: no such results database", db);
        return cli_fail(&e);
    }
    FILE *out = stdout;
    char tmp[PATH_MAX];
    /* write beside the target and rename: a failed export leaves the old file */
    if (out_path && !(out = outfile_open(out_path, tmp, sizeof tmp, "", &e)))
        return cli_fail(&e);
    int rc = results_export(db, query, sweep, out, &e);
    if (out_path)
        rc = outfile_close(out, tmp, out_path, rc, &e);
    return rc ? cli_fail(&e) : 0;
}
