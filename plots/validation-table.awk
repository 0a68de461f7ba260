# A Markdown table of `alisa db export --query validate` rows (one or more
# CSVs): per point the configuration, the phase it reached, the mean step
# time measured and predicted, the total error, the per-step MAPE and how far
# the machine's weight rate was from the profile's during the run (the mean of
# its samples before and after, and their range), and the errors normalised
# by the machine's rate step by step; then per model the mean and largest
# absolute total error and MAPE, the same normalised, and the Pearson
# correlation between the total error and that drift (near 1: the error
# follows the machine, not the model). Columns as `--query validate` names
# them ($32 normalised_total_error_pct ... $37 repeat).
# Usage: awk -f plots/validation-table.awk a.csv [b.csv ...]
BEGIN {
    FS = ","
    print "| model | batch x prompt | selection / placement | phase | runs | step, measured ms | step, predicted ms | total error | per-step MAPE | machine vs profile (range) | normalised error | normalised MAPE |"
    print "|---|---|---|---|---|---|---|---|---|---|---|---|"
}
FNR == 1 { next }
$3 != "ok" { next }
{
    model = $4; sub(/\..*$/, "", model)
    phase = $14 >= 0 ? "III" : ($13 >= 0 ? "II" : "I")
    now = ($29 + $30) / 2
    drift = $31 > 0 ? sprintf("%+.0f%% (%+.0f..%+.0f)", 100 * (now - $31) / $31,
                              100 * ($35 - $31) / $31, 100 * ($36 - $31) / $31) : "-"
    normed = $32 != "" ? sprintf("%+.1f%% | %.1f%%", $32, $33) : "- | -"
    sel = $6 == "dense" ? $6 : $6 " " $8
    printf "| %s | %d x %d | %s / %s | %s | %d | %.3f | %.3f | %+.1f%% | %.1f%% | %s | %s |\n", model,
           $10, $11, sel, $7, phase, ($37 > 0 ? $37 : 1), $15 * 1e3 / $12, $16 * 1e3 / $12, $17, $18,
           drift, normed
    n[model]++
    e = $17 < 0 ? -$17 : $17
    se[model] += e; sm[model] += $18
    if (e > me[model]) me[model] = e
    if ($18 > mm[model]) mm[model] = $18
    if ($32 != "") {
        nn[model]++
        ne[model] += $32 < 0 ? -$32 : $32; nm[model] += $33
    }
    if ($31 > 0) {
        d = 100 * (now - $31) / $31
        k[model]++; sx[model] += d; sy[model] += $17
        sxx[model] += d * d; syy[model] += $17 * $17; sxy[model] += d * $17
    }
}
END {
    print ""
    print "| model | points | mean abs. total error | largest | mean MAPE | largest | normalised: mean abs. error | mean MAPE | error vs machine drift, r |"
    print "|---|---|---|---|---|---|---|---|---|"
    for (m in n) {
        r = "-"
        if (k[m] > 2) {
            vx = sxx[m] - sx[m] * sx[m] / k[m]; vy = syy[m] - sy[m] * sy[m] / k[m]
            if (vx > 0 && vy > 0)
                r = sprintf("%.2f", (sxy[m] - sx[m] * sy[m] / k[m]) / sqrt(vx * vy))
        }
        normed = nn[m] ? sprintf("%.1f%% | %.1f%%", ne[m] / nn[m], nm[m] / nn[m]) : "- | -"
        printf "| %s | %d | %.1f%% | %.1f%% | %.1f%% | %.1f%% | %s | %s |\n", m, n[m], se[m] / n[m],
               me[m], sm[m] / n[m], mm[m], normed, r
    }
}
