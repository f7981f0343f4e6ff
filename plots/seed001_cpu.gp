# seed001_cpu.gp — on this machine: each pipeline stage's time per micro-batch (forward + backward), measured
# by the ipu backend beside the cpu-this device model's projection (clustered bars).
# datafile columns: stage, measured ms, PROJECTED ms (no header line).
W = 800; H = 480
load dir."/common.gp"
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.75 border -1
set boxwidth 0.9
set yrange [0:*]
set offsets 0, 0, graph 0.12, 0   # headroom: the tallest bar and the key never touch the frame
set ylabel "ms per micro-batch (forward + backward)"
set key top left opaque
do for [k=1:2] {
  eval set_term(k)
  plot datafile using 2:xtic(1) title "measured (this machine)" lt 1, '' using 3 title "PROJECTED (cpu-this device model)" lt 2
  set output
}
