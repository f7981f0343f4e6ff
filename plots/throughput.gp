# throughput.gp — training images/s by backend for one workload: a bar at each configuration's headline rate
# (timed samples ÷ timed seconds over all repeats), the error bar from its slowest to its fastest repeat.
# The per-step median is not drawn: it ignores slow steps, so it can rank backends the wrong way round.
# datafile columns: label, images/s, slowest repeat, fastest repeat, per-step median, jitter, and the label
# wrapped into lines that fit a bar's width (bench report cuts a long one with "…": the table has every option).
# The tick labels stand level under their bars (upright where there are many) and the key has headroom: a
# rotated label of every option ran off the canvas, shrank the plot and pushed the y label out of it, and
# the key lay under the tallest error bar.
W = 900; H = 540
load dir."/common.gp"
set style data histogram
set style histogram errorbars gap 1 lw 1.5
set style fill solid 0.75 border -1
set boxwidth 0.8
set yrange [0:*]
set xtics nomirror
set ylabel "training images/s (timed samples / timed s)"
# ticklines (from bench report): the most lines a tick label has; gnuplot leaves room for one only.
# upright: 10 bars or more, each label one line standing upright (level ones would overlap).
if (!exists("ticklines")) ticklines = 1
if (!exists("upright")) upright = 0
set xlabel "backend, global batch, options"
if (upright) { set xtics rotate by 90 right } else { set bmargin ticklines + 3; set xlabel offset 0, -(ticklines - 1) }
set key top right
# Headroom above the tallest error bar for the key.
set offsets 0, 0, graph 0.12, 0
do for [k=1:2] {
  eval set_term(k)
  plot datafile using 2:3:4:xtic(7) title "images/s; error bar: slowest to fastest repeat" lt 1
  set output
}
