# What SWA picks on each trace as the context grows (issue 43, item 1): per
# quarter of the decode, the picks still picked 32 steps later, their median
# age (share of the context), their share in the oldest half of the context
# and among the first 4 tokens; one line per trace.
# Input: `alisa trace stats FILE... -o X.csv` reduced to the every-layer rows
# of each quarter, one block per trace (blank lines between), by
# experiments/reproduce; names: the traces' labels, in block order.
# Usage: gnuplot -e "datafile='x.dat'; outfile='x.png'; names='a b c'" trace-stats.gp
set terminal pngcairo size 1000,700 font "sans,10"
set output outfile
set multiplot layout 2,2 title "What SWA at 80% picks, by quarter of the decode (alisa trace stats)"
set xrange [0.8:4.2]
set xtics 1
set xlabel "quarter of the decode"
set grid ytics
set key bottom right font ",8"
set yrange [0:1]
n = words(names)
# columns: 1 bin, 2 persist_32, 3 age_median, 4 old_share, 5 sink_share
set title "kept after 32 steps"
plot for [i=1:n] datafile index (i-1) using ($1+1):2 with linespoints pt 7 ps 0.6 title word(names, i)
set key top right
set title "median age of a pick (share of the context)"
plot for [i=1:n] datafile index (i-1) using ($1+1):3 with linespoints pt 7 ps 0.6 title word(names, i)
set title "share in the oldest half of the context"
plot for [i=1:n] datafile index (i-1) using ($1+1):4 with linespoints pt 7 ps 0.6 title word(names, i)
set title "share among the first 4 tokens (sinks)"
set yrange [0:0.3]
plot for [i=1:n] datafile index (i-1) using ($1+1):5 with linespoints pt 7 ps 0.6 title word(names, i)
unset multiplot
