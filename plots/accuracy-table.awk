# Markdown table from an `alisa db export --query eval` CSV: per KV sparsity
# (rows) and selection (columns; swa+int8 = SWA with INT8 KV), the perplexity
# over the decoded positions / KL(dense || policy) in nats / top-1 agreement
# with dense. The dense perplexity of the same positions heads the table.
# mawk-safe (no asorti). Usage: awk -f plots/accuracy-table.awk x.csv
BEGIN { FS = ","; n = split("local strided streaming h2o swa swa+int8 topk quest infinigen", order, " ") }
NR > 1 && $3 == "ok" {
    name = $6 (($8 == "true") ? "+int8" : "")
    cell[$7, name] = sprintf("%.2f / %.3f / %.2f", exp($17), $19, $20)
    if (!($7 in seen)) { seen[$7] = 1; sp[++m] = $7 + 0 }
    if ($8 == "false") dense = exp($18)
    tokens = $16
}
END {
    for (i = 2; i <= m; i++)
        for (j = i; j > 1 && sp[j - 1] > sp[j]; j--) { t = sp[j]; sp[j] = sp[j - 1]; sp[j - 1] = t }
    printf "Dense perplexity over the same %d decoded positions: %.2f. Cells: perplexity / KL / top-1.\n\n", tokens, dense
    printf "| sparsity |"; for (i = 1; i <= n; i++) printf " %s |", order[i]; print ""
    printf "| ---: |"; for (i = 1; i <= n; i++) printf " ---: |"; print ""
    for (k = 1; k <= m; k++) {
        printf "| %g |", sp[k]
        for (i = 1; i <= n; i++) printf " %s |", ((sp[k], order[i]) in cell) ? cell[sp[k], order[i]] : "-"
        print ""
    }
}
