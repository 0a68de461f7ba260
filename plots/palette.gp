# One colour, dash and point type per system, the same in every figure
# (issue 41: with 8 colours for 9 systems alisa and deepspeed shared one).
# Colours: Okabe and Ito's colour-blind-safe eight, then four darker ones;
# each system also has its own point type, so print in grey still tells
# them apart. Usage: load "plots/palette.gp", then
#   ... lc rgb sys_color(s) pt sys_pt(s) dt sys_dt(s) ps sys_ps(s)
sys_names  = "alisa alisa-cache flexgen flexgen-copy flexgen-default vllm accelerate accelerate-offload deepspeed h2o dense-gpu executor"
sys_colors = "#D55E00 #E69F00 #0072B2 #56B4E9 #009E73 #CC79A7 #000000 #999999 #8C564B #F0E442 #6A3D9A #1B9E77"
sys_pts    = "7 5 9 11 12 15 4 6 8 10 13 14"
sys_dts    = "1 2 1 3 4 1 1 2 5 1 3 1"
# the two systems whose curves coincide with another's where they agree
# (flexgen-default with flexgen below its memory limit, accelerate-offload
# with deepspeed, priced alike) get large hollow points, drawn around it
sys_pss    = "0.8 0.8 0.8 0.8 1.8 0.8 0.8 1.8 0.8 0.8 0.8 0.8"
sys_idx(s) = sum [i = 1:words(sys_names)] (word(sys_names, i) eq s ? i : 0)
sys_color(s) = sys_idx(s) > 0 ? word(sys_colors, sys_idx(s)) : "#444444"
sys_pt(s) = sys_idx(s) > 0 ? word(sys_pts, sys_idx(s)) + 0 : 1
sys_dt(s) = sys_idx(s) > 0 ? word(sys_dts, sys_idx(s)) + 0 : 1
sys_ps(s) = sys_idx(s) > 0 ? word(sys_pss, sys_idx(s)) + 0 : 0.8
