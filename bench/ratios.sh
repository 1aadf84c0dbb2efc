#!/usr/bin/env bash
# The ratios issue 44 asks for, each beside its goal, from one bench/run.sh run's results
# (bench/plot.gp draws them): label,ratio,goal. A phase that was not run adds no line.
#   bench/ratios.sh bench/results
set -euo pipefail
dir=${1:-bench/results}
if [[ -f $dir/http.csv ]]; then
  # pgjobd's best pass over wrk's requests/s, and wrk's CPU per request over pgjobd's CPU
  # per job in the same pass (the goal: at most 2x, so at least 0.5 here).
  # With the daemon's whole request (its header lines too: http.sh), when the run had it;
  # and with retention.done 0 (done jobs deleted at completion), when the run had it.
  awk -F, 'NR > 1 && $2 == "wrk" { wrk_cpu[$1] = $9 }
           NR > 1 && $2 !~ /^wrk/ && $3 == "http" {
             if ($10 > rate) rate = $10
             if ($14 > same) same = $14
             if ($9 > 0 && wrk_cpu[$1] / $9 > cpu) cpu = wrk_cpu[$1] / $9 }
           NR > 1 && $2 !~ /^wrk/ && $3 == "http-done-deleted" && $10 > deleted { deleted = $10 }
           END { if (rate) printf "http jobs/s / wrk,%.3f,0.5\n", rate
                 if (same) printf "http jobs/s / wrk (same request),%.3f,0.5\n", same
                 if (deleted) printf "http jobs/s / wrk (done jobs deleted),%.3f,0.5\n", deleted
                 if (cpu) printf "wrk CPU / http CPU,%.3f,0.5\n", cpu }' "$dir/http.csv"
fi
if [[ -f $dir/exec.csv ]]; then
  # pgjobd's best pass over xargs -P 64 running the same command in the same pass.
  awk -F, 'NR > 1 && $4 > best { best = $4 }
           END { if (best) printf "exec jobs/s / xargs,%.3f,0.95\n", best }' "$dir/exec.csv"
fi
if [[ -f $dir/limits.csv ]]; then
  awk -F, 'NR > 1 { if ($4 + 0 > best[$2] + 0) best[$2] = $4 }
           END { if (!best["none"]) exit
                 split("concurrency rate keys single", v, " ")
                 split("concurrency: 1000,rate never holding,1000 keys,one key", l, ",")
                 split("0.9 0.9 0.8 0", g, " ")
                 for (i = 1; i <= 4; i++)
                   if (v[i] in best) printf "%s / none,%.3f,%s\n", l[i], best[v[i]] / best["none"], g[i] }' \
    "$dir/limits.csv"
fi
if [[ -f $dir/pooler_best.csv ]]; then
  awk -F, 'NR > 1 && $2 > 0 && ($1 == 1 || $1 == 2 || $1 == 4) {
             printf "PgBouncer / direct at %d daemon%s,%.3f,0.9\n", $1, ($1 > 1 ? "s" : ""), $3 / $2 }' \
    "$dir/pooler_best.csv"
fi
if [[ -f $dir/backlog.csv ]]; then
  awk -F, 'NR == 2 { printf "%.0fM pending / %.0fk,%.3f,0.8\n", $3 / 1e6, $2 / 1e3, $6 }' "$dir/backlog.csv"
fi
