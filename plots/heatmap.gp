# Attention sparsity heat map of a trace: layer x decode step, the share of
# weights below 1% of the row max, averaged over sequences.
# Input: `alisa trace info FILE --heatmap` (step layer sparsity).
# Usage: gnuplot -e "datafile='h.txt'; outfile='x.png'; subtitle='...'" heatmap.gp
if (!exists("subtitle")) subtitle = ""
set terminal pngcairo size 1000, 420 font "sans,10"
set output outfile
set title "Attention sparsity by layer and decode step\n{/*0.8 " . subtitle . "}"
set xlabel "decode step"
set ylabel "layer"
set cblabel "weights below 1% of row max"
set palette rgbformulae 33,13,10
set cbrange [*:1]
set autoscale fix
plot datafile skip 1 using 1:2:3 with image notitle
