# throughput.gp — training images/s by backend for one workload: a bar at each configuration's headline rate
# (timed samples ÷ timed seconds over all repeats), the error bar from its slowest to its fastest repeat.
# The per-step median is not drawn: it ignores slow steps, so it can rank backends the wrong way round.
# datafile columns: label, images/s, slowest repeat, fastest repeat, per-step median, jitter.
W = 900; H = 540
load dir."/common.gp"
set style data histogram
set style histogram errorbars gap 1 lw 1.5
set style fill solid 0.75 border -1
set boxwidth 0.8
set yrange [0:*]
set xtics rotate by -20 nomirror
set ylabel "training throughput (images/s = timed samples / timed seconds)"
set xlabel "backend, global batch"
set key top right
do for [k=1:2] {
  eval set_term(k)
  plot datafile using 2:3:4:xtic(1) title "images/s; error bar: slowest to fastest repeat" lt 1
  set output
}
