# scaling.gp — batch-size scaling: images/s (top) and speed-up over the sweep's first point (bottom) against
# the global batch on a log2 axis, one line per sweep, or per value of the dimension a grid sweep varies
# (each block its own line). (Scaling efficiency, per replica, is in the tables where a sweep changes
# replicas; a batch sweep on one replica has only a speed-up.)
# datafile: nblocks blocks, each a header line "backend" then rows of global batch, images/s, speed-up.
# The key goes beside each panel, where it cannot cover a point (a grid sweep draws a line per value of its
# varied dimension, and inside the plot the key hid the points at the top left); the chart widens for it.
W = 1100; H = 720
load dir."/common.gp"
unset title
set logscale x 2
set xlabel "global batch (samples per optimizer step)"
set key outside right top Left reverse spacing 1.1
set lmargin 12  # both panels: their batch axes line up whatever the tick labels' width
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
