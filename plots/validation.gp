# Issue 9: the simulator's predicted decode step time against the CPU
# executor's, measured (alisa validate). Left: every validation point's mean
# step time, measured across, predicted up, with the line of perfect
# prediction and +-10% around it; one colour per model, one symbol per phase.
# Right: one point's steps, measured and predicted, step by step.
# Inputs: `alisa db export --query validate` CSVs (smolfile, storiesfile) and
# an `alisa validate --steps` CSV (stepsfile, steps_title).
# Usage: gnuplot -e "smolfile='a.csv'; storiesfile='b.csv'; stepsfile='s.csv'; \
#                    steps_title='...'; outfile='x.png'" validation.gp
set datafile separator ","
set terminal pngcairo size 1300, 500 font "sans,10"
set output outfile
if (!exists("executor")) executor = "CPU"
set multiplot layout 1, 2 title sprintf("Simulator against the %s executor (alisa validate)", executor) font ",13"
# export columns: 3 status, 10 batch, 12 gen_len, 13 phase2_step, 14 phase3_step,
# 15 measured_s, 16 predicted_s
phase(p2, p3) = p3 >= 0 ? 3 : (p2 >= 0 ? 2 : 1)
sel(f, ph) = sprintf("< awk -F, 'NR > 1 && $3 == \"ok\" && ($14 >= 0 ? 3 : ($13 >= 0 ? 2 : 1)) == %d' '%s'", ph, f)
set title "Mean decode step time per point"
set xlabel "measured, ms (log)"
set ylabel "predicted, ms (log)"
set logscale xy
set grid
set key top left font ",9"
set xrange [0.02:500]
set yrange [0.02:500]
plot x title "predicted = measured" lc rgb "black" dt 1, \
     1.1 * x notitle lc rgb "gray" dt 2, 0.9 * x title "+-10%" lc rgb "gray" dt 2, \
     for [ph = 1:3] sel(smolfile, ph) using ($15 * 1e3 / $12):($16 * 1e3 / $12) \
         title sprintf("SmolLM2-135M, phase %s", ph == 1 ? "I" : ph == 2 ? "II" : "III") \
         with points pt (4 + 2 * ph) ps 1.3 lc rgb "#1f77b4", \
     for [ph = 1:3] sel(storiesfile, ph) using ($15 * 1e3 / $12):($16 * 1e3 / $12) \
         title sprintf("stories260K, phase %s", ph == 1 ? "I" : ph == 2 ? "II" : "III") \
         with points pt (4 + 2 * ph) ps 1.3 lc rgb "#d62728"
unset logscale
set autoscale
set title steps_title
set xlabel "decode step"
set ylabel "step time, ms"
set key top left
plot stepsfile using 1:3 skip 1 with lines lw 2 lc rgb "#1f77b4" title "measured", \
     stepsfile using 1:4 skip 1 with lines lw 2 lc rgb "#ff7f0e" title "predicted"
unset multiplot
