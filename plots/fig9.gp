# Fig. 9 style: generated tokens/s against batch, one panel per model, one
# line per system; out-of-memory points are left out.
# Input: `alisa db export --query sim` CSV (columns by name below).
# Usage: gnuplot -e "datafile='x.csv'; outfile='x.png'; models='OPT-13B OPT-30B'; title_text='...'" fig9.gp
if (!exists("title_text")) title_text = "Throughput by batch (simulated)"
# systems: those given, else every system with a point in the data; a panel
# plots only the systems it has points for (no empty series, no warnings)
load "plots/palette.gp"
if (!exists("systems")) systems = system(sprintf("awk -F, 'NR > 1 && $14 == 0 && !seen[$6]++ { printf \"%%s \", $6 }' '%s'", datafile))
set datafile separator ","
cols = words(models) < 3 ? words(models) : 3
rows = (words(models) + cols - 1) / cols
set terminal pngcairo size 520 * cols + 60, 420 * rows + 40 font "sans,10"
set output outfile
set multiplot layout rows, cols title title_text font ",13"
set logscale xy 2
set xlabel "batch size (sequences)"
set ylabel "throughput (generated tokens/s)"
set grid
set key outside right top font ",8"
set style data linespoints
# columns of the sim export: 4 model, 6 system, 9 batch, 14 oom, 15 throughput;
# each series is filtered by awk so its points form one unbroken line
series(m, s) = sprintf("< awk -F, 'NR > 1 && $4 == \"%s\" && $6 == \"%s\" && $14 == 0' '%s'", m, s, datafile)
present(m) = system(sprintf("awk -F, 'NR > 1 && $4 == \"%s\" && $14 == 0 { print $6 }' '%s'", m, datafile))
has(list, s) = strstrt(" " . list . " ", " " . s . " ") > 0
do for [mi = 1:words(models)] {
    m = word(models, mi)
    here = ""
    got = present(m)
    do for [si = 1:words(systems)] {
        if (strstrt("\n" . got . "\n", "\n" . word(systems, si) . "\n") > 0) { here = here . " " . word(systems, si) }
    }
    set title m
    plot for [si = 1:words(here)] series(m, word(here, si)) using 9:15 title word(here, si) \
        lw 2 lc rgb sys_color(word(here, si)) pt sys_pt(word(here, si)) dt sys_dt(word(here, si)) ps sys_ps(word(here, si))
}
unset multiplot
