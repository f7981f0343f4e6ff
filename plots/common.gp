# common.gp — shared look of every trainbench chart; loaded by the chart scripts, never run alone.
# The chart scripts get their inputs from `bench report` on the command line (gnuplot -e):
#   datafile  the table `bench report` extracted from the result rows (tab-separated)
#   outpng, outsvg  where to write the two renderings
#   ttl, sub  title and subtitle (machine, commit)
# They read figures; they never recompute them.
set datafile separator "\t"
set encoding utf8
set termoption noenhanced
set border lw 1
set grid lc rgb "#d0d0d0" lw 1
set key noenhanced
# ttl2 (where a chart gives one): a second title line, for a title too long for one.
set title (exists("ttl2") ? sprintf("%s\n%s\n%s", ttl, ttl2, sub) : sprintf("%s\n%s", ttl, sub)) noenhanced
set linetype 1 lc rgb "#4472c4" lw 2 pt 7 ps 0.9
set linetype 2 lc rgb "#ed7d31" lw 2 pt 5 ps 0.9
set linetype 3 lc rgb "#70ad47" lw 2 pt 9 ps 1.0
set linetype 4 lc rgb "#7030a0" lw 2 pt 11 ps 1.0
set linetype 5 lc rgb "#c00000" lw 2 pt 13 ps 1.0
set linetype 6 lc rgb "#00b0f0" lw 2 pt 3 ps 1.0
set linetype 7 lc rgb "#808080" lw 2 pt 1 ps 1.0
set linetype 8 lc rgb "#ffc000" lw 2 pt 2 ps 1.0
set linetype cycle 8
# Call as: eval set_term(k) inside `do for [k=1:2]`: 1 = PNG (pngcairo), 2 = SVG. The command names the variable
# outpng / outsvg rather than pasting its value between quotes: a folder with a ' in its name (bob's) ended the
# quoted name early, and every chart failed.
set_term(k) = (k == 1) ? \
  sprintf("set terminal pngcairo noenhanced size %d,%d font 'sans,10'; set output outpng", W, H) : \
  sprintf("set terminal svg noenhanced size %d,%d font 'sans,10' background rgb 'white'; set output outsvg", W, H)
