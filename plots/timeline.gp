# timeline.gp — the pipeline timeline (Gantt chart) of one ipu run's last training step, as measured:
# one lane per device, one box per interval coloured by phase, the micro-batch number inside every box
# wide enough to hold it.
# datafile columns: lane (0 = top), start ms, end ms, phase (1 forward, 2 backward, 3 recompute,
#   4 all-reduce, 5 update), micro-batch (-1 for whole-step phases).
# Also: nlanes; span_ms (the step's span, for the x range); phases (the phase numbers present, one word
#   each, so the legend lists only those); ytics_cmd (a `set ytics (...)` naming the lanes
#   "device d (stage s, replica r)").
W = 1100; H = 200 + 54 * nlanes
load dir."/common.gp"
phase_name(p) = word("forward backward recompute all-reduce update", p)
phase_colour(p) = word("#4472c4 #ed7d31 #7030a0 #c00000 #70ad47", p)
set style fill solid 0.9 border lc rgb "#ffffff"
set yrange [nlanes - 0.5 : -0.5]
set xrange [0 : span_ms * 1.02]
eval ytics_cmd
set ytics nomirror scale 0
set xtics nomirror
set grid xtics noytics
set xlabel "time within step (ms)"
set bmargin 5.5
set key outside bottom center horizontal reverse Left samplen 1.5 width 2
h = 0.36
# A label fits when the box is wider than its digits at the 8-point font (about 1 % of the axis each).
mb_label(mb, w) = (mb < 0 || w < span_ms * 0.011 * (strlen(sprintf("%d", mb)) + 1)) ? "" : sprintf("%d", mb)
do for [k=1:2] {
  eval set_term(k)
  plot for [i=1:words(phases)] datafile \
         using (column(4) == int(word(phases, i)) ? ($2 + $3) / 2 : NaN):1:2:3:($1 - h):($1 + h) \
         with boxxyerror lc rgb phase_colour(int(word(phases, i))) title phase_name(int(word(phases, i))), \
       datafile using (($2 + $3) / 2):1:(mb_label(int($5), $3 - $2)) with labels font ",8" tc rgb "#ffffff" notitle
  set output
}
