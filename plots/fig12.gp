# Fig. 12 style: where the time of the ablation goes (OPT-30B, batch 64, H100).
# Top: each configuration's time as shares that add up to its total (prefill,
# compute, recompute, CPU attention, GPU stall, host: total_s is exactly
# their sum, sim/simulate.h; the host's share, waiting for launches, is 0
# where every layer's GPU time outlasts its launches). Bottom: the totals on a log axis (they span decades), with
# the link's busy time beside each: transfers overlap compute, so the link's
# time is not a share of the total and is never stacked on it.
# Input: `alisa db export --query sim` CSV of the fig12 sweep.
# Usage: gnuplot -e "datafile='x.csv'; outfile='x.png'[; title_text='...']" fig12.gp
set datafile separator ","
set terminal pngcairo size 1000, 760 font "sans,10"
set output outfile
# columns: 7 selection, 8 placement, 13 kv_precision, 14 oom, 16 total, 17 prefill,
# 18 compute, 19 recompute, 20 transfer, 21 cpu_attention, 22 stall, 37 host
label(x) = strcol(7) . "+" . strcol(8) . "+" . strcol(13) . (column(14) == 1 ? " (OOM)" : "")
share(c) = column(14) == 1 || column(16) <= 0 ? 0 : 100 * column(c) / column(16)
pos(c) = column(14) == 1 || column(c) <= 0 ? NaN : column(c)
set style fill solid 0.8 border -1
set boxwidth 0.7
set grid ytics
# the same plot area in both panels, so each bar sits above its own
set lmargin at screen 0.08
set rmargin at screen 0.64
if (!exists("title_text")) title_text = "The ablation: OPT-30B, batch 64, 128 + 512 tokens, H100-80GB (simulated)"
set multiplot layout 2, 1 title title_text
set style data histograms
set style histogram rowstacked
set ylabel "share of total time (%)"
set yrange [0:100]
set key outside right top font ",9"
set format x ""
set xtics scale 0
set tmargin 2
plot datafile skip 1 using (share(17)):xtic("") title "prefill" lc rgb "#999999", \
     '' skip 1 using (share(18)) title "compute" lc rgb "#0072B2", \
     '' skip 1 using (share(19)) title "recompute" lc rgb "#009E73", \
     '' skip 1 using (share(21)) title "CPU attention" lc rgb "#E69F00", \
     '' skip 1 using (share(22)) title "GPU stall (waiting on the link or CPU)" lc rgb "#D55E00", \
     '' skip 1 using (share(37)) title "host (waiting for launches)" lc rgb "#CC79A7"
set style histogram clustered gap 1
set ylabel "seconds (log)"
set logscale y
set yrange [*:*]
set format x "%g"
set xtics rotate by -25 font ",9" scale 1
set format y "%g"
plot datafile skip 1 using (pos(16)):xtic(label(0)) title "total (prefill + decode)" lc rgb "#000000", \
     '' skip 1 using (pos(20)) title "link busy (overlaps the total)" lc rgb "#56B4E9"
unset multiplot
