# Attention sparsity per layer of one trace (the paper's Fig. 3 statistic):
# share of weights below 1% of the row max, over decode steps. Box = quartiles,
# whiskers = min/max, line = median, dots = mean; the paper's 80-95% band shaded.
# Input: `alisa trace info FILE --tsv` (layer rows mean min q25 median q75 max).
# Usage: gnuplot -e "datafile='x.tsv'; outfile='x.png'; subtitle='...'" trace_sparsity.gp
if (!exists("subtitle")) subtitle = ""
set terminal pngcairo size 900,500 font "sans,11"
set output outfile
set title "Attention sparsity by layer\n{/*0.8 ".subtitle."}"
set xlabel "layer"
set ylabel "weights below 1% of row max (%)"
set yrange [*:100]
set offsets 1, 1, 0, 0
set key bottom right
set grid ytics
set style fill solid 0.3 border
set boxwidth 0.6 relative
set object 1 rect from graph 0, first 80 to graph 1, first 95 fc rgb "#dddddd" fs solid 0.5 behind
set label 1 "paper: 80-95%" at graph 0.02, first 97 font ",9"
plot datafile skip 1 using 1:($5*100):($4*100):($8*100):($7*100) with candlesticks whiskerbars 0.5 \
         lc rgb "#3060a0" title "quartiles, min-max", \
     ''       skip 1 using 1:($6*100):($6*100):($6*100):($6*100) with candlesticks whiskerbars 0.5 \
         lc rgb "#102040" lw 2 notitle, \
     ''       skip 1 using 1:($3*100) with points pt 7 ps 0.6 lc rgb "#c03020" title "mean"
