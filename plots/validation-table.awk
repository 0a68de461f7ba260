# Markdown tables of `alisa db export --query validate` rows (one or more
# CSVs, columns found by their header names). A point belongs to the held-out
# set when its sweep's name says "heldout" (experiments/validation-heldout-*
# .sweep: settings calibration never ran; "heldout2": set 2, fixed later;
# "heldout3": set 3, later still),
# else to the in-sample set.
# 1. Per point: the set, the configuration, the phase it reached, the mean
#    step time measured and predicted, the total error, the per-step MAPE,
#    the noise floor (how far the repeated runs' decode totals lie apart,
#    (max - min) / median), how far the machine's weight rate was from the
#    profile's during the run (mean of the samples before and after, and
#    their range), and the errors normalised by that rate step by step.
# 2. Per model and set, held out first: mean and largest absolute total
#    error and MAPE, the mean noise floor, the normalised errors, and the
#    Pearson correlation between total error and drift (near 1: the error
#    follows the machine, not the model).
# 3. Per model, set and phase: mean and largest absolute total error, MAPE.
# 4. Per model and set, where the export has the prefill columns (issue 49):
#    the whole run as the paper counts it: the prefill's and the end-to-end
#    (prefill + decode) mean and largest absolute error beside the decode's.
# 5. Errors as the field reports them (issue 49, item 3), per model and set:
#    for decode, prefill, end to end and the per-step MAPE, the mean
#    absolute error, P90 (nearest rank: the ceil(0.9 n)-th smallest) and the
#    worst, beside the mean repeats' spread; and where the export has the
#    step tests (alisa validate's step_ks_p, step_tost_p), how many points'
#    step-time distributions a two-sample KS test tells apart (p < 0.05) and
#    how many a TOST shows equivalent within +-10% (p < 0.05).
# Usage: awk -f plots/validation-table.awk a.csv [b.csv ...]
BEGIN {
    FS = ","
    phases[1] = "I"; phases[2] = "II"; phases[3] = "III"
    print "| set | model | batch x prompt | selection / placement | phase | runs | step, measured ms | step, predicted ms | total error | per-step MAPE | repeats' spread | machine vs profile (range) | normalised error | normalised MAPE |"
    print "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
}
FNR == 1 {
    delete c
    for (i = 1; i <= NF; i++) c[$i] = i
    next
}
function f(name) { return (name in c) ? $(c[name]) : "" }
f("status") != "ok" { next }
{
    model = f("model"); sub(/\..*$/, "", model)
    set = f("sweep") ~ /heldout3/ ? "held out 3" : f("sweep") ~ /heldout2/ ? "held out 2" : \
          f("sweep") ~ /heldout/ ? "held out" : "in-sample"
    phase = f("phase3_step") >= 0 ? "III" : (f("phase2_step") >= 0 ? "II" : "I")
    prof = f("weight_rate_profile_gbps"); lo = f("weight_rate_min_gbps"); hi = f("weight_rate_max_gbps")
    now = (f("weight_rate_before_gbps") + f("weight_rate_after_gbps")) / 2
    drift = prof > 0 ? sprintf("%+.0f%% (%+.0f..%+.0f)", 100 * (now - prof) / prof,
                               100 * (lo - prof) / prof, 100 * (hi - prof) / prof) : "-"
    nerr = f("normalised_total_error_pct"); nmape = f("normalised_mape_pct")
    normed = nerr != "" ? sprintf("%+.1f%% | %.1f%%", nerr, nmape) : "- | -"
    spread = f("repeat_spread_pct")
    sel = f("selection") == "dense" ? "dense" : f("selection") " " f("sparsity")
    runs = f("repeat") > 0 ? f("repeat") : 1
    err = f("total_error_pct"); mape = f("mape_pct"); G = f("gen_len")
    printf "| %s | %s | %d x %d | %s / %s | %s | %d | %.3f | %.3f | %+.1f%% | %.1f%% | %s | %s | %s |\n",
           set, model, f("batch"), f("prompt_len"), sel, f("placement"), phase, runs,
           f("measured_s") * 1e3 / G, f("predicted_s") * 1e3 / G, err, mape,
           spread != "" ? sprintf("%.1f%%", spread) : "-", drift, normed
    e = err < 0 ? -err : err
    key = model SUBSEP set
    if (!(key in n)) order[++nkeys] = key
    n[key]++; se[key] += e; sm[key] += mape
    if (e > me[key]) me[key] = e
    if (mape > mm[key]) mm[key] = mape
    if (spread != "") { ns[key]++; ss[key] += spread }
    if (nerr != "") { nn[key]++; ne[key] += nerr < 0 ? -nerr : nerr; nm[key] += nmape }
    if (prof > 0) {
        d = 100 * (now - prof) / prof
        k[key]++; sx[key] += d; sy[key] += err
        sxx[key] += d * d; syy[key] += err * err; sxy[key] += d * err
    }
    # every point's errors, for the percentiles of table 5
    dv[key, n[key]] = e; mv[key, n[key]] = mape
    ksp = f("step_ks_p"); tp = f("step_tost_p")
    if (ksp != "" && tp != "") {
        tn[key]++; ntk++; if (ksp < 0.05) kapart[key]++; if (tp < 0.05) teq[key]++
        kd[key] += f("step_ks_d")
    }
    pk = key SUBSEP phase
    pn[pk]++; pe[pk] += e; pm[pk] += mape
    if (e > pme[pk]) pme[pk] = e
    mp = f("measured_prefill_s"); pp = f("predicted_prefill_s")
    if (mp > 0 && pp != "") {
        fe = 100 * (pp - mp) / mp; fe = fe < 0 ? -fe : fe
        ee = 100 * (pp + f("predicted_s") - mp - f("measured_s")) / (mp + f("measured_s"))
        ee = ee < 0 ? -ee : ee
        fn[key]++; fs[key] += fe; fes[key] += ee; nfk++
        fv[key, fn[key]] = fe; ev[key, fn[key]] = ee
        if (fe > fm[key]) fm[key] = fe
        if (ee > fem[key]) fem[key] = ee
    }
}
# the mean, P90 (nearest rank) and largest of m values a[key, 1..m], as
# three Markdown cells
function stats(a, key, m,    i, j, t, v) {
    for (i = 1; i <= m; i++) v[i] = a[key, i]
    for (i = 2; i <= m; i++)
        for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
    t = 0
    for (i = 1; i <= m; i++) t += v[i]
    j = int(0.9 * m); if (j < 0.9 * m) j++
    return sprintf("%.1f%% | %.1f%% | %.1f%%", t / m, v[j], v[m])
}
# the mean repeats' spread of a key's points, or "-" when none has one
function spread_cell(key) { return ns[key] ? sprintf("%.1f%%", ss[key] / ns[key]) : "-" }
END {
    # the keys in first-seen order, held out before in-sample: both tables' rows
    n_rows = 0
    for (pass = 1; pass <= 2; pass++)
        for (i = 1; i <= nkeys; i++) {
            split(order[i], kk, SUBSEP)
            if ((kk[2] ~ /^held out/) == (pass == 1)) rows[++n_rows] = order[i]
        }
    print ""
    print "| model | set | points | mean abs. total error | largest | mean MAPE | largest | mean repeats' spread | normalised: mean abs. error | mean MAPE | error vs machine drift, r |"
    print "|---|---|---|---|---|---|---|---|---|---|---|"
    for (i = 1; i <= n_rows; i++) {
        key = rows[i]; split(key, kk, SUBSEP)
        r = "-"
        if (k[key] > 2) {
            vx = sxx[key] - sx[key] * sx[key] / k[key]; vy = syy[key] - sy[key] * sy[key] / k[key]
            if (vx > 0 && vy > 0)
                r = sprintf("%.2f", (sxy[key] - sx[key] * sy[key] / k[key]) / sqrt(vx * vy))
        }
        normed = nn[key] ? sprintf("%.1f%% | %.1f%%", ne[key] / nn[key], nm[key] / nn[key]) : "- | -"
        spread = spread_cell(key)
        printf "| %s | %s | %d | %.1f%% | %.1f%% | %.1f%% | %.1f%% | %s | %s | %s |\n", kk[1], kk[2],
               n[key], se[key] / n[key], me[key], sm[key] / n[key], mm[key], spread, normed, r
    }
    print ""
    print "| model | set | phase | points | mean abs. total error | largest | mean MAPE |"
    print "|---|---|---|---|---|---|---|"
    for (i = 1; i <= n_rows; i++) {
        key = rows[i]; split(key, kk, SUBSEP)
        for (ph = 1; ph <= 3; ph++) {
            pk = key SUBSEP phases[ph]
            if (pk in pn)
                printf "| %s | %s | %s | %d | %.1f%% | %.1f%% | %.1f%% |\n", kk[1], kk[2],
                       phases[ph], pn[pk], pe[pk] / pn[pk], pme[pk], pm[pk] / pn[pk]
        }
    }
    if (nfk) {
        print ""
        print "| model | set | points | decode: mean abs. error | prefill: mean abs. error | largest | end to end: mean abs. error | largest |"
        print "|---|---|---|---|---|---|---|---|"
        for (i = 1; i <= n_rows; i++) {
            key = rows[i]; split(key, kk, SUBSEP)
            if (key in fn)
                printf "| %s | %s | %d | %.1f%% | %.1f%% | %.1f%% | %.1f%% | %.1f%% |\n", kk[1], kk[2],
                       fn[key], se[key] / n[key], fs[key] / fn[key], fm[key], fes[key] / fn[key], fem[key]
        }
    }
    print ""
    print "| model | set | metric | points | mean abs. error | P90 | worst | mean repeats' spread |"
    print "|---|---|---|---|---|---|---|---|"
    for (i = 1; i <= n_rows; i++) {
        key = rows[i]; split(key, kk, SUBSEP)
        spread = spread_cell(key)
        printf "| %s | %s | decode | %d | %s | %s |\n", kk[1], kk[2], n[key], stats(dv, key, n[key]), spread
        if (key in fn) {
            printf "| %s | %s | prefill | %d | %s | %s |\n", kk[1], kk[2], fn[key], stats(fv, key, fn[key]), spread
            printf "| %s | %s | end to end | %d | %s | %s |\n", kk[1], kk[2], fn[key], stats(ev, key, fn[key]), spread
        }
        printf "| %s | %s | per-step (MAPE) | %d | %s | %s |\n", kk[1], kk[2], n[key], stats(mv, key, n[key]), spread
    }
    if (ntk) {
        print ""
        print "| model | set | points tested | step times told apart (KS, p < 0.05) | equivalent within +-10% (TOST, p < 0.05) | mean KS D |"
        print "|---|---|---|---|---|---|"
        for (i = 1; i <= n_rows; i++) {
            key = rows[i]; split(key, kk, SUBSEP)
            if (key in tn)
                printf "| %s | %s | %d | %d | %d | %.3f |\n", kk[1], kk[2], tn[key], kapart[key] + 0,
                       teq[key] + 0, kd[key] / tn[key]
        }
    }
}
