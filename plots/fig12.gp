# Fig. 12 style: time breakdown of the ablation (OPT-30B, batch 64, H100),
# stacked: compute, recompute, link transfer, CPU attention, GPU stall.
# Input: `alisa db export --query sim` CSV of the fig12 sweep.
# Usage: gnuplot -e "datafile='x.csv'; outfile='x.png'" fig12.gp
set datafile separator ","
set terminal pngcairo size 1000, 520 font "sans,10"
set output outfile
set title "Time breakdown of the ablation (OPT-30B, batch 64, H100-80GB, simulated)"
set ylabel "time (s)"
set style data histograms
set style histogram rowstacked
set style fill solid 0.8 border -1
set boxwidth 0.7
set key outside right
set grid ytics
set xtics rotate by -25 font ",9"
# columns: 7 selection, 8 placement, 13 kv_precision, 18 compute, 19 recompute,
# 20 transfer, 21 cpu_attention, 22 stall
label(x) = strcol(7) . "+" . strcol(8) . "+" . strcol(13) . (column(14) == 1 ? " (OOM)" : "")
plot datafile skip 1 using 18:xtic(label(0)) title "compute", \
     '' skip 1 using 19 title "recompute", \
     '' skip 1 using 20 title "transfer (link busy)", \
     '' skip 1 using 21 title "CPU attention", \
     '' skip 1 using 22 title "GPU stall"
