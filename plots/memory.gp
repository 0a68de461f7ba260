# KV memory per tier over the decode steps (`alisa sim --timeline` CSV); with
# a GPU tier too small for the KV, phase II (CPU) and III (drops) show.
# Usage: gnuplot -e "datafile='t.csv'; outfile='x.png'; subtitle='...'" memory.gp
if (!exists("subtitle")) subtitle = ""
set datafile separator ","
set terminal pngcairo size 900, 480 font "sans,10"
set output outfile
set title "KV memory per tier over decode steps\n{/*0.8 " . subtitle . "}"
set xlabel "decode step"
set ylabel "KV (GB)"
set grid
set key top left
plot datafile skip 1 using 1:($6 / 1e9) with lines lw 2 title "GPU tier", \
     '' skip 1 using 1:($7 / 1e9) with lines lw 2 title "CPU tier", \
     '' skip 1 using 1:(($6 + $7) / 1e9) with lines dt 2 title "both"
