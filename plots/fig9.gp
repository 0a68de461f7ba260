# Fig. 9 style: generated tokens/s against batch, one panel per model, one
# line per system; out-of-memory points are left out.
# Input: `alisa db export --query sim` CSV (columns by name below).
# Usage: gnuplot -e "datafile='x.csv'; outfile='x.png'; models='OPT-13B OPT-30B'; title_text='...'" fig9.gp
if (!exists("title_text")) title_text = "Throughput by batch (simulated)"
if (!exists("systems")) systems = "alisa alisa-cache flexgen flexgen-copy flexgen-default vllm accelerate accelerate-offload deepspeed"
set datafile separator ","
cols = words(models) < 3 ? words(models) : 3
rows = (words(models) + cols - 1) / cols
set terminal pngcairo size 400 * cols + 100, 420 * rows + 40 font "sans,10"
set output outfile
set multiplot layout rows, cols title title_text font ",13"
set logscale xy 2
set xlabel "batch size (sequences)"
set ylabel "throughput (generated tokens/s)"
set grid
set key top left font ",8"
set style data linespoints
# columns of the sim export: 4 model, 6 system, 9 batch, 14 oom, 15 throughput;
# each series is filtered by awk so its points form one unbroken line
series(m, s) = sprintf("< awk -F, 'NR > 1 && $4 == \"%s\" && $6 == \"%s\" && $14 == 0' '%s'", m, s, datafile)
do for [mi = 1:words(models)] {
    m = word(models, mi)
    set title m
    plot for [si = 1:words(systems)] series(m, word(systems, si)) \
        using 9:15 title word(systems, si) lw 2 pt 7 ps 0.7
}
unset multiplot
