# Renders bench/results/throughput.png from the CSV files bench/run.sh writes:
#   gnuplot -e "results='bench/results'" bench/plot.gp      (run.sh does this)
# Left: throughput against concurrency (one process, log2 axis) next to the SQL ceiling.
# Middle: throughput against the number of daemons on one database.
# Right: real work against its anchor, each ratio beside its goal (bench/ratios.sh).

if (!exists("results")) results = "bench/results"
caption = system("sed -n 's/^caption: //p' " . results . "/machine.txt 2>/dev/null")
target = 20000
sweep_jobs = system("awk -F, 'NR > 1 && $3 > n {n = $3} END {print n}' " . results . "/sweep.csv 2>/dev/null")
daemon_jobs = system("awk -F, 'NR == 2 {print $6}' " . results . "/daemons.csv 2>/dev/null")

set datafile separator ","
set terminal pngcairo size 2250,620 font "DejaVu Sans,11" noenhanced
set output results . "/throughput.png"
set multiplot layout 1,3 title "pgjobd throughput, noop jobs, durable PostgreSQL\n" . caption font ",12"

set grid xtics ytics lc rgb "#d0d0d0"
set key top left Left reverse box opaque font ",10" spacing 1.1
set format y "%.0f"
set yrange [0:*]
set offsets 0, 0, graph 0.22, 0   # headroom for the key and the 20,000 line
set ylabel "jobs per second"

# The backlog phase's point (bench/run.sh PHASES=backlog), at its concurrency, when it was run.
backlog = results . "/backlog.csv"
has_backlog = system("test -f " . backlog . " && echo 1 || echo 0") + 0
if (!has_backlog) backlog = results . "/sweep_best.csv"
backlog_title = has_backlog ? system("awk -F, 'NR == 2 {printf \"first %d of %d pending jobs (backlog phase, best pass; x median ratio to %d alone)\", $2, $3, $2}' " . backlog) : ""

# --- left panel ----------------------------------------------------------------------
set title "Throughput vs concurrency (one process, pgjobd bench, up to " . sweep_jobs . " jobs per point, best of passes)"
set logscale x 2
set xrange [0.8:320]
set xtics ("1" 1, "2" 2, "4" 4, "8" 8, "16" 16, "32" 32, "64" 64, "128" 128, "256" 256)
set xlabel "worker.concurrency (= claim batch size), log2 scale"
plot results . "/sweep_best.csv" skip 1 using 1:2 with linespoints lw 2.5 pt 7 ps 1.3 lc rgb "#1f77b4" \
       title "pgjobd engine: bench burn-down, in-process, noop handler", \
     "" skip 1 using 1:2:(sprintf("%.0f", $2)) with labels offset 0,1.1 font ",9" tc rgb "#1f77b4" notitle, \
     "" skip 1 using 1:3 with linespoints lw 2 dt 2 pt 6 lc rgb "#d62728" \
       title "ceiling: same claim + complete SQL, tight loop, one connection, same batch", \
     results . "/sweep.csv" skip 1 using 2:4 with points pt 1 ps 1 lc rgb "#6a9fcf" title "each pass: engine", \
     "" skip 1 using 2:5 with points pt 2 ps 0.8 lc rgb "#e08080" title "each pass: ceiling", \
     target with lines dt 3 lw 1.5 lc rgb "#555555" title "target 20,000 jobs/s", \
     backlog skip 1 using 1:(has_backlog ? $5 : NaN) with points pt 9 ps 1.8 lc rgb "#8c564b" \
       title backlog_title, \
     backlog skip 1 using 1:(has_backlog ? $5 : NaN):(sprintf("%.0f (x%.2f)", $5, $6)) with labels offset 0,-1.3 font ",9" tc rgb "#8c564b" notitle, \
     backlog skip 1 using 1:(has_backlog ? $4 : NaN) with points pt 8 ps 1.8 lc rgb "#8c564b" \
       title "its anchor: the same jobs alone (backlog phase, best pass)"

# --- middle panel --------------------------------------------------------------------
set title "Throughput vs number of daemons (real pgjobd run, " . daemon_jobs . " jobs, one database, best of runs)"
set logscale x 2
set xrange [0.8:10]
set xtics ("1" 1, "2" 2, "4" 4, "8" 8)
set xlabel "pgjobd daemons (separate processes), log2 scale"
# The pooler phase's curve (8 daemons, direct and through PgBouncer), when it was run.
pooled = results . "/pooler_best.csv"
if (system("test -f " . pooled . " && echo 1 || echo 0") + 0 == 0) pooled = results . "/daemons_best.csv"
plot results . "/daemons_best.csv" skip 1 using 1:2 with linespoints lw 2.5 pt 7 ps 1.3 lc rgb "#2ca02c" \
       title "64 workers per daemon (K x 64 in total)", \
     pooled skip 1 using 1:(pooled eq results . "/daemons_best.csv" ? NaN : $3) with linespoints lw 2.5 dt 4 pt 9 ps 1.3 lc rgb "#ff7f0e" \
       title "64 per daemon through one PgBouncer (transaction mode, 20 server connections)", \
     "" skip 1 using 1:(pooled eq results . "/daemons_best.csv" ? NaN : $3):(sprintf("%.0f", $3)) with labels offset 0,-1.1 font ",9" tc rgb "#ff7f0e" notitle, \
     "" skip 1 using 1:(pooled eq results . "/daemons_best.csv" ? NaN : $2) with linespoints lw 1.5 dt 2 pt 6 ps 1 lc rgb "#2ca02c" \
       title "64 per daemon, direct, same phase as the PgBouncer runs", \
     results . "/daemons_best.csv" skip 1 using 1:2:(sprintf("%.0f", $2)) with labels offset 0,1.1 font ",9" tc rgb "#2ca02c" notitle, \
     results . "/daemons_best.csv" skip 1 using 1:3 with linespoints lw 2.5 pt 5 ps 1.2 lc rgb "#9467bd" \
       title "64 workers split between the daemons (64/K each)", \
     results . "/daemons_best.csv" skip 1 using 1:3:($1 == 1 ? "" : sprintf("%.0f", $3)) with labels offset 0,-1.1 font ",9" tc rgb "#9467bd" notitle, \
     results . "/daemons.csv" skip 1 using 3:8 with points pt 1 ps 1 lc rgb "#888888" title "each run", \
     target with lines dt 3 lw 1.5 lc rgb "#555555" title "target 20,000 jobs/s"

# --- right panel ---------------------------------------------------------------------
# Each phase's ratio to its anchor in this run (http to wrk, limited to unlimited, through
# PgBouncer to direct, 10M pending to 100k); a goal of 0 is reported only.
ratios = "< bench/ratios.sh " . results
set title "Real work against its anchor (this run; diamond: the goal)"
unset logscale x
set xrange [-0.6:*]
set yrange [0:1.25]
set offsets 0, 0.6, 0, 0
set format y "%.1f"
set ylabel "ratio to the anchor"
set xlabel ""
set xtics rotate by -30 font ",9" nomirror
set style fill solid 0.45
set boxwidth 0.7
plot ratios using 0:2:xtic(1) with boxes lc rgb "#1f77b4" title "ratio", \
     "" using 0:2:(sprintf("%.2f", $2)) with labels offset 0,0.8 font ",9" notitle, \
     "" using 0:($3 > 0 ? $3 : NaN) with points pt 13 ps 1.6 lc rgb "#d62728" title "goal"

unset multiplot
