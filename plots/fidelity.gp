# Fig. 4 measured: per selection, the Spearman rank correlation between its
# average attention distribution and the dense one (left) and the attention
# mass it keeps (right), against KV sparsity, layers averaged.
# Input: `alisa db export --query fidelity` CSV, one trace's rows (trace_key
# picks them: a substring of the trace path).
# Usage: gnuplot -e "datafile='x.csv'; outfile='x.png'; trace_key='stories'; title_text='...'" fidelity.gp
if (!exists("title_text")) title_text = "Fidelity of sparse attention"
set datafile separator ","
set terminal pngcairo size 1200, 460 font "sans,10"
set output outfile
set multiplot layout 1, 2 title title_text font ",13"
set xlabel "KV sparsity (share of the context not attended)"
set grid
set style data linespoints
# columns of the fidelity export: 4 trace, 5 selection, 6 sparsity,
# 10 spearman_mean, 11 mass_kept_mean
names = "local strided streaming h2o swa"
series(n) = sprintf("< awk -F, 'NR > 1 && $3 == \"ok\" && index($4, \"%s\") && $5 == \"%s\"' '%s' | sort -t, -k6 -g", \
                    trace_key, n, datafile)
set title "Spearman correlation with dense (average distribution)"
set ylabel "Spearman rho"
set key bottom left font ",9"
plot for [i = 1:words(names)] series(word(names, i)) using 6:10 title word(names, i) lw 2 pt 7 ps 0.7
set title "Attention mass kept"
set ylabel "share of the dense attention mass"
set yrange [0:1.02]
plot for [i = 1:words(names)] series(word(names, i)) using 6:11 title word(names, i) lw 2 pt 7 ps 0.7
unset multiplot
