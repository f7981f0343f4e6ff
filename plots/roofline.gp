# roofline.gp — achieved GFLOP/s against estimated arithmetic intensity, under the machine's measured
# ceilings: sgemm GFLOP/s (one thread, all threads) and triad bandwidth (GB/s).
# datafile: nblocks blocks, one per point: a header line "backend: workload batch options" then one row of
#   intensity (FLOP/byte), GFLOP/s, colour (one per backend). The labels go in the key, below the plot,
#   so that neighbouring points never overlap their text. Also: peak1, peakall (GFLOP/s), bw1, bwall
#   (GB/s); 0 = not calibrated on the rows' machine.
W = 1000; H = 760
load dir."/common.gp"
set logscale xy
set xlabel "arithmetic intensity (FLOP/byte, estimated from the model's compulsory traffic)"
set ylabel "GFLOP/s (counted model FLOPs / measured time)"
set key below left font ",8" maxcols 3 spacing 0.9 height 2
set xrange [0.05:2000]
set yrange [0.05:*]
roof(x, peak, bw) = (bw * x < peak) ? bw * x : peak
do for [k=1:2] {
  eval set_term(k)
  if (peakall > 0) {
    plot roof(x, peakall, bwall) with lines lw 2 lc rgb "#404040" title sprintf("all threads: sgemm %.0f GFLOP/s, triad %.1f GB/s", peakall, bwall), \
         roof(x, peak1, bw1) with lines dt 2 lw 2 lc rgb "#808080" title sprintf("one thread: sgemm %.0f GFLOP/s, triad %.1f GB/s", peak1, bw1), \
         for [i=0:nblocks-1] datafile index i using 1:2:3 with points pt (i % 13 + 1) ps 1.4 lc variable title columnheader(1)
  } else {
    plot for [i=0:nblocks-1] datafile index i using 1:2:3 with points pt (i % 13 + 1) ps 1.4 lc variable title columnheader(1)
  }
  set output
}
