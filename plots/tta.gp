# tta.gp — test accuracy against wall time (evaluation included), one curve per backend and seed,
# with the target as a dashed line.
# datafile: nblocks blocks (index 0..nblocks-1), each a header line "backend seed S" then rows of
#   time_s, accuracy.  Also: target; colours and dashes, one word per block (line type of the
#   configuration, dash pattern of the seed).
W = 900; H = 560
load dir."/common.gp"
set xlabel "wall time since the first step (s, evaluations included)"
set ylabel "test accuracy"
set key bottom right
# Time from the first step (0), and room above and below the curves and the target: a run of one evaluation
# had an x range of one point (gnuplot's "empty x range"), its point on the top frame and the target on the
# bottom axis, unseen.
set xrange [0:*]
set yrange [*:*]
set offsets 0, graph 0.03, graph 0.05, graph 0.05
do for [k=1:2] {
  eval set_term(k)
  plot for [i=0:nblocks-1] datafile index i using 1:2 with linespoints lt int(word(colours, i+1)) \
         dt int(word(dashes, i+1)) title columnheader(1), \
       target with lines dt 2 lw 1.5 lc rgb "#404040" title sprintf("target %.3f", target)
  set output
}
