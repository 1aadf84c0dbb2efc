# bench/peers/run.sh's chart: best jobs/s per system and load (a clustered histogram).
# Called with -e "datafile='...'; outfile='...'; loadavg='...'; ncol=N" (N: 1 + systems).
if (!exists("ncol")) ncol = 6
set terminal pngcairo size 1000,560 noenhanced
set output outfile
set title "pgjobd and its peers, one PostgreSQL 15 cluster, one run (best of the passes; load avg ".loadavg.")"
set ylabel "jobs/s (process start to last completion)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set key top left autotitle columnheader
set grid ytics
set yrange [0:*]
plot for [c = 2:ncol] datafile using c:xtic(1)
