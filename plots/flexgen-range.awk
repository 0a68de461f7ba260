# Markdown table of FlexGen over its policies, from `alisa db export --query
# sim` CSVs: the flexgen-policies sweep's grid (every point whose policy was
# given) and the Fig. 9 sweep's rows for the same model, hardware and batch
# (the LP's choice and the default). Per batch and cache path: the LP
# policy's tokens/s, the default's, and the best and worst policy of the
# grid that fits, with how many grid points run out of memory.
# Usage: awk -F, -f plots/flexgen-range.awk policies.csv fig9.csv
FNR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; file++; next }
{
    m = $col["model"]; b = $col["batch"]; s = $col["system"]
    tps = $col["throughput_tok_s"] + 0; oom = $col["oom"] == 1
    wg = $col["flexgen_weights_gpu_percent"] + 0; cg = $col["flexgen_cache_gpu_percent"] + 0
    pol = sprintf("%.0f/%.0f/%.0f/%.0f", wg, 100 - wg, cg, 100 - cg)
    if (file == 1) {
        key = m SUBSEP b SUBSEP s
        keys[key] = 1
        if (oom) { n_oom[key]++; next }
        if (!(key in best) || tps > best[key]) { best[key] = tps; best_p[key] = pol }
        if (!(key in worst) || tps < worst[key]) { worst[key] = tps; worst_p[key] = pol }
        next
    }
    if (s == "flexgen" || s == "flexgen-copy") {
        lp[m SUBSEP b SUBSEP s] = oom ? "OOM" : sprintf("%.1f (%s)", tps, pol)
    } else if (s == "flexgen-default") {
        def[m SUBSEP b] = oom ? "OOM" : sprintf("%.1f", tps)
    }
}
END {
    print "| model | batch | cache path | LP policy: tok/s (weights GPU/CPU, cache GPU/CPU %) | default (100/0/100/0) | best of the grid | worst that fits | grid points out of memory |"
    print "| --- | ---: | --- | --- | --- | --- | --- | ---: |"
    n = 0
    for (k in keys) order[++n] = k
    for (i = 2; i <= n; i++)
        for (j = i; j > 1 && order[j - 1] > order[j]; j--) { t = order[j]; order[j] = order[j - 1]; order[j - 1] = t }
    for (i = 1; i <= n; i++) {
        k = order[i]; split(k, f, SUBSEP)
        path = f[3] == "flexgen" ? "CPU attention" : "copy"
        printf "| %s | %s | %s | %s | %s | %s | %s | %d |\n", f[1], f[2], path,
            (k in lp) ? lp[k] : "-", (f[1] SUBSEP f[2] in def) ? def[f[1] SUBSEP f[2]] : "-",
            (k in best) ? sprintf("%.1f (%s)", best[k], best_p[k]) : "-",
            (k in worst) ? sprintf("%.1f (%s)", worst[k], worst_p[k]) : "-", n_oom[k]
    }
}
