# HiSparse's hot buffer against Belady (issue 45, item 4b): the GPU miss rate
# of exact LRU (solid) and of Belady's offline bound (dashed) against the
# buffer's size, one colour per committed trace.
# Input: plots/out/hot-buffer.csv (experiments/hot-buffer.sh).
# Usage: gnuplot -e "datafile='plots/out/hot-buffer.csv'; outfile='x.png'" plots/hot-buffer.gp
if (!exists("traces")) traces = system(sprintf("awk -F, 'NR > 1 && !seen[$1]++ { print $1 }' '%s' | tr '\\n' ' '", datafile))
set datafile separator ","
set terminal pngcairo size 900, 520 font "sans,10"
set output outfile
set title "HiSparse's hot buffer: exact top-k at 80% sparsity, LRU (solid) against Belady (dashed)" font ",11"
set xlabel "GPU buffer a (sequence, layer) stream, x the largest step's budget"
set ylabel "GPU miss rate of the attended tokens (log scale)"
set logscale y
set grid
set key bottom left font ",9"
set format y "%g"
# columns: 1 trace, 2 factor, 5 attended ("oom" when the buffer is too small),
# 8 lru_hit_rate, 9 belady_hit_rate
series(t) = sprintf("< awk -F, 'NR > 1 && $1 == \"%s\" && $5 != \"oom\"' '%s'", t, datafile)
plot for [i = 1:words(traces)] series(word(traces, i)) \
        using 2:(1 - $8 > 0 ? 1 - $8 : NaN) with linespoints lc i dt 1 pt 7 ps 0.7 lw 2 \
        title word(traces, i), \
     for [i = 1:words(traces)] series(word(traces, i)) \
        using 2:(1 - $9 > 0 ? 1 - $9 : NaN) with linespoints lc i dt 2 pt 6 ps 0.7 lw 1 notitle
