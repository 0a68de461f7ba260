# Throughput against KV sparsity for the sparse systems.
# Input: `alisa db export --query sim` CSV of the sparsity sweep.
# Usage: gnuplot -e "datafile='x.csv'; outfile='x.png'" sparsity.gp
load "plots/palette.gp"
if (!exists("systems")) systems = "alisa h2o"
set datafile separator ","
set terminal pngcairo size 800, 500 font "sans,10"
set output outfile
set title "Throughput against KV sparsity (OPT-13B, V100-32GB, batch 32, simulated)"
set xlabel "KV sparsity (share of the context not attended)"
set ylabel "throughput (generated tokens/s)"
set grid
set key outside right top
set style data linespoints
# columns: 6 system, 12 sparsity, 14 oom, 15 throughput; one awk-filtered series each
series(s) = sprintf("< awk -F, 'NR > 1 && $6 == \"%s\" && $14 == 0' '%s'", s, datafile)
plot for [i = 1:words(systems)] series(word(systems, i)) using 12:15 title word(systems, i) lw 2 \
    lc rgb sys_color(word(systems, i)) pt sys_pt(word(systems, i)) dt sys_dt(word(systems, i))
