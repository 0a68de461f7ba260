# Serving (issue 46): P99 time per output token and goodput against the
# request rate, one line per selection+placement pair (rows in rate order
# within each pair, as the sweep's [vary] lists them: pair, then rate).
# Input: `alisa db export --query serve` CSV of the serving-opt13b sweep.
# Usage: gnuplot -e "datafile='x.csv'; outfile='x.png'; title_text='...'" serving.gp
set datafile separator ","
set terminal pngcairo size 1000, 420 font "sans,10"
set output outfile
# columns: 6 selection, 7 placement, 11 rate, 22 oom, 26 goodput_req_s,
# 27 slo_attained, 37 tpot_p99_s
pair(s, p) = s . "+" . p
ok(c) = column(22) == 1 ? NaN : column(c)
set multiplot layout 1, 2 title title_text
set grid
set key top left font ",9"
set xlabel "request rate (requests/s, Poisson)"
set ylabel "P99 time per output token (ms, log)"
set logscale y
pairs = "dense+gpu-only dense+flexgen-static swa+alisa swa+lru topk+hot-buffer topk+belady"
names = "vLLM-like FlexGen-like ALISA SWA+LRU-buffer HiSparse-like Belady-bound"
colours = "#0072B2 #E69F00 #D55E00 #56B4E9 #009E73 #999999"
plot for [i=1:6] datafile skip 1 using (pair(strcol(6), strcol(7)) eq word(pairs, i) ? column(11) : NaN):(1e3 * ok(37)) \
     with linespoints lw 2 pt 7 lc rgb word(colours, i) title word(names, i) . " (" . word(pairs, i) . ")"
unset logscale y
set ylabel "goodput (requests/s meeting TTFT and TPOT objectives)"
plot for [i=1:6] datafile skip 1 using (pair(strcol(6), strcol(7)) eq word(pairs, i) ? column(11) : NaN):(ok(26)) \
     with linespoints lw 2 pt 7 lc rgb word(colours, i) notitle
unset multiplot
