# Fig. 8 measured: accuracy against KV sparsity, one line per selection
# (swa+int8: SWA with INT8 KV), the dense run of the same windows as a
# reference. Left: perplexity over the decoded positions (after the dense
# prefill); right: top-1 agreement with dense.
# Input: `alisa db export --query eval` CSV.
# Usage: gnuplot -e "datafile='x.csv'; outfile='x.png'; title_text='...'" accuracy.gp
if (!exists("title_text")) title_text = "Accuracy against KV sparsity"
set datafile separator ","
set terminal pngcairo size 1200, 460 font "sans,10"
set output outfile
set multiplot layout 1, 2 title title_text font ",13"
set xlabel "KV sparsity (share of the context not attended)"
set grid
set style data linespoints
# columns of the eval export: 6 selection, 7 sparsity, 8 kv_int8, 17 nll_decode,
# 18 dense_nll_decode, 20 top1
names = "local strided streaming h2o swa swa+int8 topk quest infinigen"
sel(n) = n eq "swa+int8" ? "swa" : n
i8(n) = n eq "swa+int8" ? "true" : "false"
series(n) = sprintf("< awk -F, 'NR > 1 && $3 == \"ok\" && $6 == \"%s\" && $8 == \"%s\"' '%s' | sort -t, -k7 -g", \
                    sel(n), i8(n), datafile)
dense = sprintf("< awk -F, 'NR > 1 && $3 == \"ok\" && $8 == \"false\"' '%s' | sort -t, -k7 -g", datafile)
# the selections that read the step's own row (upper bounds of their methods) dash-dotted
dash(n) = n eq "swa+int8" ? 2 : (n eq "topk" || n eq "quest" || n eq "infinigen") ? 4 : 1
set title "Perplexity over the decoded positions"
set ylabel "perplexity"
set key top left font ",9"
plot for [i = 1:words(names)] series(word(names, i)) using 7:(exp($17)) \
         title word(names, i) lw 2 dt dash(word(names, i)) pt 7 ps 0.7, \
     dense using 7:(exp($18)) with lines dt 2 lw 2 lc rgb "black" title "dense"
set title "Top-1 agreement with dense"
set ylabel "share of decoded positions"
set key bottom left font ",9"
plot for [i = 1:words(names)] series(word(names, i)) using 7:20 \
         title word(names, i) lw 2 dt dash(word(names, i)) pt 7 ps 0.7
unset multiplot
