# layers.gp — per-layer time of one run: its K slowest layers as horizontal bars, forward and backward
# stacked, in milliseconds per step, the slowest on top.
# datafile columns: layer name, forward ms, backward ms, place in the model, layer type; sorted slowest
# first by bench report, which passes K (how many rows to draw) on the command line.
W = 1000; H = 160 + 22 * K
load dir."/common.gp"
set style fill solid 0.8 border -1
set ytics nomirror font ",9"
set yrange [K - 0.5:-0.5]
set xrange [0:*]
set xlabel "time per step (ms)"
set key bottom right
set grid noytics xtics
do for [k=1:2] {
  eval set_term(k)
  plot datafile every ::0::(K - 1) using ($2 / 2):0:(0):2:($0 - 0.38):($0 + 0.38):ytic(strcol(5) eq "?" || strcol(5) eq strcol(1) ? strcol(1) : sprintf("%s (%s)", strcol(1), strcol(5))) with boxxyerror lt 1 title "forward", \
       '' every ::0::(K - 1) using ($2 + $3 / 2):0:2:($2 + $3):($0 - 0.38):($0 + 0.38) with boxxyerror lt 2 title "backward"
  set output
}
