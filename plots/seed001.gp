# seed001.gp — seed 001 (EfficientNet-B4 G16): training images/s against device count, Graphcore's published
# figures as points and each device model's projection as a line (log-log). Every series says whether it is
# published or PROJECTED in its title.
# datafile: blocks separated by two blank lines, each a quoted title line then rows of devices, images/s.
W = 900; H = 600
load dir."/common.gp"
set logscale xy 2
# room around the points: autoscale ends a log axis at a power of 2, where the largest count sits on the frame
set offsets graph 0.03, graph 0.03, graph 0.05, graph 0.05
set xlabel "devices (IPUs or GPUs): replicas x stages"
set ylabel "training images/s"
set key top left
set format y "%.0f"
stats datafile using 1 nooutput
nblocks = STATS_blocks
do for [k=1:2] {
  eval set_term(k)
  plot datafile index 0 using 1:2 with points pt 7 ps 2 lc rgb "#000000" title columnheader(1), \
       for [i=1:nblocks-1] datafile index i using 1:2 with linespoints lt i title columnheader(1)
  set output
}
