# Markdown tables of `alisa db export --query serve-validate` rows (alisa
# serve-run --predict: the executor serving a stream against the serving
# simulator on the same stream; issue 46, item 4), one or more CSVs,
# columns found by their header names. A point is in the offloading
# held-out set when its sweep's name says "offload" (streams under a
# selection and an offloading placement), in the second held-out set when
# it says "heldout2" (fixed after the first set had been seen), in the
# third when it says "heldout3" (dense-cache streams fixed before the dense
# serving path was calibrated), in the fourth when it says "heldout4"
# (dense-cache streams fixed before the served iterations' missing cost was
# looked for), in the fifth when it says "heldout5" (fixed before the
# prompt chunks were looked at), in the sixth when it says "heldout6"
# (fixed before the prompt chunks' GEMM was measured), in the seventh when
# it says "heldout7" (fixed before the dense cache's one-row call was
# measured), in the eighth when it says "heldout8" (fixed with the change
# that keeps small row-wise work on the calling thread), in the ninth when
# it says "heldout9" (fixed with the simulator's dense-cache parallel
# rule), in the first when it says "heldout", else
# in-sample.
# 1. Per stream: the set, the stream (requests, rate, burstiness, lengths),
#    the batching (running cap, token budget, chunked prefill, KV blocks),
#    iterations and preemptions measured and predicted, the error of the
#    makespan and of the mean TTFT, TPOT and latency with the repeats'
#    spread ((max - min) / the reported run's value) in brackets, the P99
#    latency's error, and the per-request latency tests (KS p; TOST p at
#    +-10%).
# 2. Per model and set, held out first, for makespan, TTFT, TPOT and
#    latency means and the P99 latency: the mean absolute error, P90
#    (nearest rank) and the worst, beside the median repeats' spread and
#    the mean absolute normalised error (serve-run's prediction scaled by
#    the profile's weight rate over the machine's during the run; "not
#    sampled" for rows from before serve-run sampled it); how
#    many streams' latency distributions a two-sample KS test tells apart
#    (p < 0.05) and how many a TOST shows equivalent within +-10% (p < 0.05).
# Usage: awk -f plots/serve-validation-table.awk a.csv [b.csv ...]
BEGIN {
    FS = ","
    nm = split("makespan ttft_mean tpot_mean e2e_mean e2e_p99", mets, " ")
    nsets = split("held out 9|held out 8|held out 7|held out 6|held out 5|held out 4|held out, offloading|held out 3|held out 2|held out 1|in-sample", setname, "|")
    split("makespan,TTFT mean,TPOT mean,latency mean,latency P99", mname, ",")
    print "| set | model | stream | batching | iterations (pred.) | preemptions (pred.) | makespan | TTFT mean | TPOT mean | latency mean | latency P99 | latency KS p | latency TOST p |"
    print "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
}
FNR == 1 {
    delete c
    for (i = 1; i <= NF; i++) c[$i] = i
    next
}
function f(name) { return (name in c) ? $(c[name]) : "" }
function pct(x) { return sprintf("%+.1f%%", x) }
function spr(x) { return x == "" ? "" : sprintf(" [%.0f%%]", x) }
function absv(x) { return x < 0 ? -x : x }
f("status") != "ok" { next }
{
    # "heldoutN" names set N, a bare "heldout" the first
    set = f("sweep") ~ /offload/ ? "held out, offloading" \
        : match(f("sweep"), /heldout[0-9]*/) ? "held out " (RLENGTH > 7 ? substr(f("sweep"), RSTART + 7, RLENGTH - 7) : 1) \
        : "in-sample"
    model = f("model"); sub(/.*\//, "", model); sub(/\.(gguf|bin)$/, "", model)
    stream = f("requests") " x " (f("rate") == 0 ? "at once" : f("rate") "/s" (f("burstiness") != 1 ? " (Gamma " f("burstiness") ")" : "")) \
        ", " f("prompt_min") "-" f("prompt_max") " + " f("output_min") "-" f("output_max")
    batching = f("max_num_seqs") " running, " f("max_batched_tokens") " tokens" \
        (f("chunked_prefill") == 0 ? ", no chunking" : "") ", " f("kv_blocks") " blocks" \
        (f("placement") != "" && f("placement") != "gpu-only" ? ", " f("selection") " / " f("placement") : "")
    printf "| %s | %s | %s | %s | %s (%s) | %s (%s) |", set, model, stream, batching,
        f("iterations"), f("predicted_iterations"), f("preemptions"), f("predicted_preemptions")
    for (m = 1; m <= nm; m++)
        printf " %s%s |", pct(f(mets[m] "_error_pct")), spr(f(mets[m] "_spread_pct"))
    printf " %.3g | %.3g |\n", f("e2e_ks_p"), f("e2e_tost_p")
    k = model SUBSEP set
    if (!(k in n)) { keys[++nk] = k; kmodel[k] = model; kset[k] = set }
    i = ++n[k]
    for (m = 1; m <= nm; m++) {
        err[k, m, i] = absv(f(mets[m] "_error_pct"))
        sp[k, m, i] = f(mets[m] "_spread_pct")
        v = f("normalised_" mets[m] "_error_pct")
        if (v != "") { nerr[k, m] += absv(v); nn[k, m]++ }
    }
    told[k] += f("e2e_ks_p") < 0.05
    equiv[k] += f("e2e_tost_p") != "" && f("e2e_tost_p") < 0.05
}
# the r-th smallest of a[k, m, 1..cnt] (nearest rank)
function ranked(a, k, m, cnt, r,    i, j, t, v) {
    for (i = 1; i <= cnt; i++) v[i] = a[k, m, i]
    for (i = 2; i <= cnt; i++) {
        t = v[i]
        for (j = i - 1; j >= 1 && v[j] > t; j--) v[j + 1] = v[j]
        v[j + 1] = t
    }
    return v[r]
}
END {
    print ""
    print "| model | set | streams | metric | mean abs. error | P90 | worst | median repeats' spread | normalised mean abs. error |"
    print "|---|---|---|---|---|---|---|---|---|"
    for (pass = 1; pass <= nsets; pass++)
        for (q = 1; q <= nk; q++) {
            k = keys[q]
            if (kset[k] != setname[pass]) continue
            cnt = n[k]
            for (m = 1; m <= nm; m++) {
                s = 0
                for (i = 1; i <= cnt; i++) s += err[k, m, i]
                p90 = int(0.9 * cnt); if (p90 < 0.9 * cnt) p90++
                printf "| %s | %s | %d | %s | %.1f%% | %.1f%% | %.1f%% | %s | %s |\n", kmodel[k], kset[k],
                    cnt, mname[m], s / cnt, ranked(err, k, m, cnt, p90), ranked(err, k, m, cnt, cnt),
                    sp[k, m, 1] == "" ? "one run" : sprintf("%.0f%%", ranked(sp, k, m, cnt, int((cnt + 1) / 2))),
                    nn[k, m] == cnt ? sprintf("%.1f%%", nerr[k, m] / cnt) : "not sampled"
            }
        }
    print ""
    print "| model | set | streams | latency distributions told apart (KS p < 0.05) | equivalent within +-10% (TOST p < 0.05) |"
    print "|---|---|---|---|---|"
    for (pass = 1; pass <= nsets; pass++)
        for (q = 1; q <= nk; q++) {
            k = keys[q]
            if (kset[k] != setname[pass]) continue
            printf "| %s | %s | %d | %d | %d |\n", kmodel[k], kset[k], n[k], told[k], equiv[k]
        }
}
