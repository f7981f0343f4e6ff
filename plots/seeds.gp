# seeds.gp — a seed's fit() seconds per system as horizontal bars: the published figures (the seed's
# source) in one colour, the runs measured here in another; the number at the end of each bar.
# datafile columns: label, seconds, kind (1 published, 2 measured here); src: the published figures' source.
W = 1100; H = 500
load dir."/common.gp"
set style fill solid 0.8 border -1
set xrange [0:*]
set offsets 0, graph 0.12, 0.5, 0.5
set yrange [*:*] reverse
set ytics nomirror
set xlabel "seconds: fit(), the training of all epochs (evaluation not included)"
set key bottom right
set lmargin 58
do for [k=1:2] {
  eval set_term(k)
  plot datafile using ($2/2):0:(0):($3 == 1 ? $2 : 1/0):($0-0.35):($0+0.35):ytic(1) with boxxyerror lt 1 \
         title sprintf("published (%s)", src), \
       '' using ($2/2):0:(0):($3 == 2 ? $2 : 1/0):($0-0.35):($0+0.35) with boxxyerror lt 2 title "measured here", \
       '' using 2:0:(sprintf(" %.2f s", $2)) with labels left notitle
  set output
}
