# scaling.gp — batch-size scaling: images/s (top) and speed-up over the sweep's first point (bottom) against
# the global batch on a log2 axis, one line per backend. (Scaling efficiency, per replica, is in the tables
# where a sweep changes replicas; a batch sweep on one replica has only a speed-up.)
# datafile: nblocks blocks, each a header line "backend" then rows of global batch, images/s, speed-up.
W = 900; H = 720
load dir."/common.gp"
unset title
set logscale x 2
set xlabel "global batch (samples per optimizer step)"
set key top left
set offsets graph 0.03, graph 0.03, graph 0.08, 0
do for [k=1:2] {
  eval set_term(k)
  set multiplot layout 2,1 title sprintf("%s\n%s", ttl, sub) noenhanced
  set ylabel "images/s"
  set yrange [0:*]
  plot for [i=0:nblocks-1] datafile index i using 1:2 with linespoints title columnheader(1)
  set ylabel "speed-up (images/s ÷ the sweep's first point)"
  set yrange [0:*]
  plot for [i=0:nblocks-1] datafile index i using 1:3 with linespoints title columnheader(1)
  unset multiplot
  set output
}
