# Caching-policy study: GPU hit rate and fetch cost against GPU KV capacity,
# one line per placement (the ninth on dashed, square points: gnuplot has
# eight colours); belady and oracle-cost are offline bounds.
# Input: `alisa db export --query plan` CSV.
# Usage: gnuplot -e "datafile='x.csv'; outfile='x.png'" caching.gp
if (!exists("placements")) placements = "lru fifo lfu lfu-aged slru arc cost-aware alisa alisa-cache belady oracle-cost"
if (!exists("title_text")) title_text = "Caching policies: SWA at 80% KV sparsity"
if (!exists("unit")) unit = "MiB"
scale = unit eq "KiB" ? 1024.0 : unit eq "KB" ? 1000.0 : 1048576.0
set datafile separator ","
set terminal pngcairo size 1200, 460 font "sans,10"
set output outfile
set multiplot layout 1, 2 title title_text font ",13"
set xlabel "GPU KV capacity (" . unit . ")"
set grid
set key bottom right font ",9"
set style data linespoints
# columns of the plan export: 5 placement, 8 gpu_kv_bytes, 10 oom, 11 gpu_misses,
# 12 gpu_hit_rate, 19 fetch_cost_ns; one awk-filtered series per placement
series(p) = sprintf("< awk -F, 'NR > 1 && $5 == \"%s\" && $10 == 0' '%s'", p, datafile)
set title "GPU miss rate (attended tokens not on the GPU; no point = no miss)"
set ylabel "GPU miss rate (log scale)"
set logscale y
set key top right
plot for [i = 1:words(placements)] series(word(placements, i)) \
    using ($8 / scale):(1 - $12 > 0 ? 1 - $12 : NaN) title word(placements, i) lw 2 \
    lc i dt 1 + (i > 8) pt 7 - 2 * (i > 8) ps 0.7
unset logscale y
set title "Fetch cost (loads and offloads at link speed, recomputations)"
set ylabel "fetch cost (ms, modelled)"
plot for [i = 1:words(placements)] series(word(placements, i)) \
    using ($8 / scale):($19 / 1e6) title word(placements, i) lw 2 \
    lc i dt 1 + (i > 8) pt 7 - 2 * (i > 8) ps 0.7
unset multiplot
