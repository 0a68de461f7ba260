# Prints, from an `alisa db export --query sim` CSV, one row per point with
# its throughput and its speedup over flexgen and vllm at the same model,
# hardware and batch (out of memory: "OOM"). Markdown when md=1.
BEGIN { FS = "," }
NR == 1 { next }
{
    key = $4 SUBSEP $5 SUBSEP $9
    tput[key, $6] = ($14 == 1) ? -1 : $15
    if (!(key in seen)) { seen[key] = 1; order[++n] = key }
    if (!(($6) in sys_seen)) { sys_seen[$6] = 1; systems[++ns] = $6 }
}
function fmt(x) { return x < 0 ? "OOM" : sprintf("%.1f", x) }
function ratio(a, b) { return (a < 0 || b <= 0) ? "-" : sprintf("%.2fx", a / b) }
END {
    if (md) {
        print "| model | hardware | batch | system | tokens/s | vs flexgen | vs vllm |"
        print "| --- | --- | ---: | --- | ---: | ---: | ---: |"
    } else {
        printf "%-10s %-10s %5s %-11s %10s %10s %10s\n", "model", "hardware", "batch", "system", "tokens/s", "vs flexgen", "vs vllm"
    }
    for (i = 1; i <= n; i++) {
        split(order[i], k, SUBSEP)
        fg = tput[order[i], "flexgen"]; vl = tput[order[i], "vllm"]
        for (j = 1; j <= ns; j++) {
            s = systems[j]
            if (!((order[i], s) in tput)) continue
            t = tput[order[i], s]
            if (md)
                printf "| %s | %s | %s | %s | %s | %s | %s |\n", k[1], k[2], k[3], s, fmt(t), ratio(t, fg), ratio(t, vl)
            else
                printf "%-10s %-10s %5s %-11s %10s %10s %10s\n", k[1], k[2], k[3], s, fmt(t), ratio(t, fg), ratio(t, vl)
        }
    }
}
