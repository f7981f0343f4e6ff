# roofline.gp — achieved GFLOP/s against estimated arithmetic intensity, under the machine's measured
# ceilings: sgemm GFLOP/s (one thread, all threads) and triad bandwidth (GB/s), and for rows that ran on
# the GPU the GPU's: cuBLAS fp32 (TF32 off: what the cuda device's GEMMs run), TF32 and bf16 GEMMs under
# its device-to-device copy bandwidth.
# datafile: nblocks blocks, one per point: a header line "backend: workload batch options" then one row of
#   intensity (FLOP/byte), GFLOP/s, colour (one per backend). The labels go in the key, below the plot,
#   so that neighbouring points never overlap their text. Also: peak1, peakall (GFLOP/s), bw1, bwall
#   (GB/s); 0 = not calibrated on the rows' machine. dxmin, dxmax, dymin, dymax: the points' extent.
#   gpupeak, gputf32, gpubf16 (GFLOP/s), gpubw (GB/s),
#   gpuname: 0 (or absent) = no GPU calibration, or no GPU points.
W = 1000; H = 760
load dir."/common.gp"
if (!exists("gpupeak")) gpupeak = 0
if (!exists("gpuname")) gpuname = "GPU"
set logscale xy
# Labels at 2 and 5 of each decade too: the axes span about one decade, where the powers of ten alone labelled
# a single tick and no point's GFLOP/s could be read off the chart.
set for [e=-3:7] xtics add (sprintf("%g", 2 * 10**e) 2 * 10**e, sprintf("%g", 5 * 10**e) 5 * 10**e)
set for [e=-3:7] ytics add (sprintf("%g", 2 * 10**e) 2 * 10**e, sprintf("%g", 5 * 10**e) 5 * 10**e)
set xlabel "arithmetic intensity (FLOP/byte, estimated from the model's compulsory traffic)"
set ylabel "GFLOP/s (counted model FLOPs / measured time)"
set key below left font ",8" maxcols 3 spacing 0.9 height 2
# The axes span the points (dxmin..dxmax FLOP/byte, dymin..dymax GFLOP/s, from bench report) and the ridges
# and peaks of the roofs drawn, with some room: a point just above its roof is then seen to be.
mx(a, b) = a > b ? a : b
if (exists("dxmin") && dxmin > 0 && dymin > 0) {
  xhi = dxmax; yhi = dymax
  if (peakall > 0 && bwall > 0) { xhi = mx(xhi, peakall / bwall); yhi = mx(yhi, peakall) }
  if (peakall > 0 && peak1 > 0 && bw1 > 0) { xhi = mx(xhi, peak1 / bw1) }
  if (gpupeak > 0 && gpubw > 0) { xhi = mx(xhi, gpupeak / gpubw); yhi = mx(yhi, gpupeak) }
  set xrange [dxmin / 4 : xhi * 4]
  set yrange [dymin / 4 : yhi * 2]
} else {
  set xrange [0.05:2000]
  set yrange [0.05:*]
}
roof(x, peak, bw) = (bw * x < peak) ? bw * x : peak
# One plot command, assembled from the ceilings there are.
cmd = "plot "
if (peakall > 0) {
  cmd = cmd . 'roof(x, peakall, bwall) with lines lw 2 lc rgb "#404040" title sprintf("all threads: sgemm %.0f GFLOP/s, triad %.1f GB/s", peakall, bwall), '
  cmd = cmd . 'roof(x, peak1, bw1) with lines dt 2 lw 2 lc rgb "#808080" title sprintf("one thread: sgemm %.0f GFLOP/s, triad %.1f GB/s", peak1, bw1), '
}
if (gpupeak > 0) {
  cmd = cmd . 'roof(x, gpupeak, gpubw) with lines lw 2 lc rgb "#76b900" title sprintf("%s: fp32 (TF32 off) %.1f TFLOP/s, copy %.0f GB/s", gpuname, gpupeak / 1000, gpubw), '
  cmd = cmd . 'roof(x, gputf32, gpubw) with lines dt 3 lw 1 lc rgb "#76b900" title sprintf("%s: TF32 %.0f TFLOP/s", gpuname, gputf32 / 1000), '
  cmd = cmd . 'roof(x, gpubf16, gpubw) with lines dt 2 lw 1 lc rgb "#76b900" title sprintf("%s: bf16 %.0f TFLOP/s", gpuname, gpubf16 / 1000), '
}
cmd = cmd . 'for [i=0:nblocks-1] datafile index i using 1:2:3 with points pt (i % 13 + 1) ps 1.4 lc variable title columnheader(1)'
do for [k=1:2] {
  eval set_term(k)
  eval cmd
  set output
}
