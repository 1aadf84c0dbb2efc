# bench/stream.sh's chart: per second of a steady stream, the pick-up latency (p50, p99 of
# the jobs finished in that second) and the backlog, one row of panels per run.
# Called with -e "results='bench/results'; fractions='0.5 0.9'; rates='15523 27941'".
if (!exists("results")) results = "bench/results"
if (!exists("fractions")) fractions = "0.5 0.9"
if (!exists("rates")) rates = ""
n = words(fractions)
set terminal pngcairo size 1100,(330 * n) noenhanced
set output results . "/stream.png"
set datafile separator ","
set multiplot layout n, 2
set grid
set key below horizontal
set xlabel "seconds since the stream started"
do for [i = 1:n] {
  f = word(fractions, i)
  file = results . "/stream_" . f . ".csv"
  label = (words(rates) >= i ? word(rates, i) . " jobs/s asked, " : "") . f . " x burst"
  set title label . ": pick-up latency"
  set ylabel "ms, INSERT start to claim"
  set logscale y
  set yrange [0.1:*]
  plot file skip 1 using 1:5 with lines lw 1 lc rgb "#d62728" title "p99", \
       file skip 1 using 1:4 with lines lw 2 lc rgb "#1f77b4" title "p50"
  unset logscale y
  set yrange [0:*]
  set title label . ": backlog and jobs finished"
  set ylabel "jobs"
  plot file skip 1 using 1:8 with lines lw 2 lc rgb "#2ca02c" title "backlog (pending)", \
       file skip 1 using 1:3 with lines lw 1 lc rgb "#7f7f7f" title "finished in that second"
}
unset multiplot
