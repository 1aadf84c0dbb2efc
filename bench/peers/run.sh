#!/usr/bin/env bash
# pgjobd and its peers on one PostgreSQL cluster, in one run: graphile-worker, pg-boss
# (from npm, pinned by package-lock.json) and the bare SQL loop (pgbench), with the same
# job counts and the same timing rule as bench/daemons.sh.
#
#   bench/peers/run.sh                  the real thing (about 2 minutes on 2 cores, plus npm ci once)
#   PEERS_SMOKE=1 bench/peers/run.sh    tiny job counts, one pass (tests/ops/peers_smoke_test.sh)
#
# It starts its own durable cluster (scripts/pg-cluster.sh, fsync and synchronous_commit
# on) in a temporary directory, installs the npm packages with `npm ci` into
# bench/peers/node_modules unless they are there, then for each pass, each load and each
# system: empties the system's tables, preloads the jobs (untimed), runs VACUUM ANALYZE and
# a CHECKPOINT, starts the system and times it from just before its process starts to the
# last completion recorded in its own tables:
#
#   pgjobd           bench/daemons.sh with one `pgjobd run`, worker.concurrency 64, builtin
#                    noop: max(finished_at)
#   graphile-worker  `node peer.js graphile-worker work`: it deletes a job when it completes
#                    it, so a statement-level AFTER DELETE trigger on its jobs table records
#                    clock_timestamp() per completion batch: the last one
#   pg-boss          `node peer.js pg-boss work`: max(completed_on) of its job table
#   bare-50, bare-200  pgbench -M prepared, 4 clients, bare.sql (claim B with SKIP LOCKED,
#                    then complete them), on bare_schema.sql's table: max(finished_at)
#
# The workers run until an external poll (one psql session, \watch 0.05, as daemons.sh
# does) sees no job left; then they get SIGTERM. Every job must be done.
#
# Environment:
#   PEERS_SMOKE     1: loads "burst:300 backlog:1000", one pass
#   LOADS           "name:jobs ..." (default "burst:20000 backlog:100000")
#   SYSTEMS         default "pgjobd graphile-worker pg-boss bare-50 bare-200"
#   REPEAT          passes, alternating the systems' order (default 2)
#   PGJOBD_BIN      default build/release/pgjobd
#   OUT             default bench/results/peers.csv (smoke: a temporary file)
#   GW_CONCURRENCY, GW_POOL, GW_LOCAL_QUEUE, PGBOSS_WORKERS, PGBOSS_BATCH, PGBOSS_POOL
#                   the peers' settings (peer.js; defaults are the ones bench/README.md gives)
set -euo pipefail
shopt -s inherit_errexit  # also inside $(run_...)

here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

smoke=${PEERS_SMOKE:-0}
if [[ "$smoke" == 1 ]]; then
  loads=${LOADS:-burst:300 backlog:1000}
  repeat=${REPEAT:-1}
else
  loads=${LOADS:-burst:20000 backlog:100000}
  repeat=${REPEAT:-2}
fi
systems=${SYSTEMS:-pgjobd graphile-worker pg-boss bare-50 bare-200}
bin=${PGJOBD_BIN:-build/release/pgjobd}
[[ -x "$bin" ]] || { echo "peers/run.sh: $bin not built" >&2; exit 1; }
# shellcheck source=bench/peers/lib.sh
source "$here/lib.sh"
peers_require peers/run.sh
peers_cluster

out=${OUT:-}
if [[ -z "$out" ]]; then
  if [[ "$smoke" == 1 ]]; then out=$work/peers.csv; else out=bench/results/peers.csv; fi
fi

quiesce() {  # TABLE: statistics fresh, no checkpoint pending during the timed part
  sql -c "VACUUM ANALYZE $1"
  sql -c "CHECKPOINT"
}

# Each run prints "elapsed_polled_s elapsed_db_s".
run_pgjobd() {  # JOBS
  DATABASE_URL=$url PGJOBD_BIN=$bin JOBS=$1 DAEMONS=1 MODES=each REPEAT=1 CONCURRENCY=64 \
    SCHEMA=peers_pgjobd OUT="$work/pgjobd.csv" bench/daemons.sh 2>"$work/daemons.log" ||
    { cat "$work/daemons.log" >&2; exit 1; }
  # pass,mode,daemons,workers_per_daemon,total_workers,jobs,elapsed_s,jobs_per_s,elapsed_db_s,...
  awk -F, 'NR == 2 { print $7, $9 }' "$work/pgjobd.csv"
}

run_graphile() {  # JOBS
  graphile_fresh  # (its trigger goes with it)
  sql -c "DROP TABLE IF EXISTS public.peers_gw_done; DROP FUNCTION IF EXISTS public.peers_gw_done()"
  peer graphile-worker load "$url" "$1"
  sql <<'SQL'
CREATE TABLE public.peers_gw_done (at timestamptz NOT NULL);
CREATE FUNCTION public.peers_gw_done() RETURNS trigger LANGUAGE plpgsql AS
  $$ BEGIN INSERT INTO public.peers_gw_done VALUES (clock_timestamp()); RETURN NULL; END $$;
CREATE TRIGGER peers_gw_done AFTER DELETE ON graphile_worker._private_jobs
  FOR EACH STATEMENT EXECUTE FUNCTION public.peers_gw_done();
SQL
  [[ "$(sql -c "SELECT count(*) FROM graphile_worker._private_jobs")" == "$1" ]] ||
    { echo "peers/run.sh: graphile-worker preload failed" >&2; exit 1; }
  quiesce graphile_worker._private_jobs
  local start end
  start=$(now)
  node "$here/peer.js" graphile-worker work "$url" >"$work/worker.log" 2>&1 &  # node itself: $! is what SIGTERM must reach
  worker_pid=$!
  wait_none_left "SELECT NOT EXISTS (SELECT 1 FROM graphile_worker._private_jobs)"
  end=$(now)
  stop_worker
  awk -v s="$start" -v e="$end" -v edb="$(sql -c "SELECT extract(epoch FROM max(at)) FROM public.peers_gw_done")" \
    'BEGIN { printf "%.3f %.3f\n", e - s, edb - s }'
}

run_pgboss() {  # JOBS
  sql -c "DROP SCHEMA IF EXISTS pgboss CASCADE"
  peer pg-boss setup "$url"
  peer pg-boss load "$url" "$1"
  [[ "$(sql -c "SELECT count(*) FROM pgboss.job WHERE name = 'noop' AND state = 'created'")" == "$1" ]] ||
    { echo "peers/run.sh: pg-boss preload failed: $(sql -c "SELECT string_agg(name || ' ' || state || ' ' || n, ', ') FROM (SELECT name, state, count(*) n FROM pgboss.job GROUP BY 1, 2) s")" >&2; exit 1; }
  quiesce pgboss.job
  local start end left
  start=$(now)
  node "$here/peer.js" pg-boss work "$url" >"$work/worker.log" 2>&1 &
  worker_pid=$!
  wait_none_left "SELECT NOT EXISTS (SELECT 1 FROM pgboss.job WHERE name = 'noop' AND state IN ('created', 'retry', 'active'))"
  end=$(now)
  stop_worker
  left=$(sql -c "SELECT count(*) FROM pgboss.job WHERE name = 'noop' AND state <> 'completed'")
  [[ "$left" == 0 ]] || { echo "peers/run.sh: pg-boss left $left jobs not completed" >&2; exit 1; }
  awk -v s="$start" -v e="$end" -v edb="$(sql -c "SELECT extract(epoch FROM max(completed_on)) FROM pgboss.job WHERE name = 'noop'")" \
    'BEGIN { printf "%.3f %.3f\n", e - s, edb - s }'
}

run_bare() {  # JOBS BATCH
  sql -f "$here/bare_schema.sql"
  sql -c "INSERT INTO peers_bare.jobs (payload) SELECT jsonb_build_object('n', g) FROM generate_series(1, $1) g"
  quiesce peers_bare.jobs
  local start end left clients=4 per_client
  per_client=$(( ($1 + clients * $2 - 1) / (clients * $2) + 2 ))  # a few spare (empty) claims
  start=$(now)
  while :; do
    pgbench -n -M prepared -c "$clients" -j 2 -t "$per_client" -D batch="$2" -f "$here/bare.sql" "$url" \
      >"$work/worker.log" 2>&1 || { cat "$work/worker.log" >&2; exit 1; }
    left=$(sql -c "SELECT count(*) FROM peers_bare.jobs WHERE status <> 'done'")
    ((left > 0)) || break
    per_client=$(( (left + clients * $2 - 1) / (clients * $2) + 2 ))  # claims skipped past each other
  done
  end=$(now)
  awk -v s="$start" -v e="$end" -v edb="$(sql -c "SELECT extract(epoch FROM max(finished_at)) FROM peers_bare.jobs")" \
    'BEGIN { printf "%.3f %.3f\n", e - s, edb - s }'
}

mkdir -p "$(dirname "$out")"
echo "pass,system,load,jobs,elapsed_s,elapsed_db_s,jobs_per_s,load1_before,dsync_8k_write_ms_before" >"$out"
for ((r = 1; r <= repeat; r++)); do
  order=$(pass_order "$r")
  for spec in $loads; do
    name=${spec%%:*}
    jobs=${spec#*:}
    for system in $order; do
      load1=$(cut -d' ' -f1 /proc/loadavg)
      dsync=$(dsync_ms)
      case "$system" in
        pgjobd) times=$(run_pgjobd "$jobs") ;;
        graphile-worker) times=$(run_graphile "$jobs") ;;
        pg-boss) times=$(run_pgboss "$jobs") ;;
        bare-50) times=$(run_bare "$jobs" 50) ;;
        bare-200) times=$(run_bare "$jobs" 200) ;;
        *) echo "peers/run.sh: unknown system $system" >&2; exit 2 ;;
      esac
      read -r polled db <<<"$times"
      awk -v d="$db" 'BEGIN { exit !(d > 0) }' || { echo "peers/run.sh: $system: no completion time recorded" >&2; exit 1; }
      row=$(awk -v r="$r" -v sys="$system" -v load="$name" -v n="$jobs" -v p="$polled" -v d="$db" \
        -v l="$load1" -v ds="$dsync" 'BEGIN { printf "%d,%s,%s,%d,%.3f,%.3f,%.0f,%s,%s", r, sys, load, n, p, d, n / d, l, ds }')
      echo "$row" >>"$out"
      echo "peers/run.sh: $row" >&2
    done
  done
done

# The table: best jobs/s of the passes (and the range), with the ratios of pgjobd to each.
echo
awk -F, 'NR > 1 {
    k = $3 SUBSEP $2; v = $7 + 0
    if (!(k in best) || v > best[k]) best[k] = v
    if (!(k in worst) || v < worst[k]) worst[k] = v
    if (!($3 in seenl)) { seenl[$3] = 1; loads[++nl] = $3 }
    if (!($2 in seens)) { seens[$2] = 1; syss[++ns] = $2 }
  } END {
    printf "%-9s", "load"; for (i = 1; i <= ns; i++) printf " %17s", syss[i]; print ""
    for (j = 1; j <= nl; j++) {
      printf "%-9s", loads[j]
      for (i = 1; i <= ns; i++) { k = loads[j] SUBSEP syss[i]; printf " %17s", sprintf("%d-%d", worst[k], best[k]) }
      print ""
      p = best[loads[j] SUBSEP "pgjobd"]
      if (p) {
        printf "%-9s", "  pgjobd/"
        for (i = 1; i <= ns; i++) { k = loads[j] SUBSEP syss[i]; printf " %17s", (best[k] ? sprintf("%.2f", p / best[k]) : "-") }
        print ""
      }
    }
  }' "$out"
echo "(jobs/s, worst-best of $repeat pass(es); ratios of the best; rows in $out)"

if [[ "$smoke" != 1 ]] && command -v gnuplot >/dev/null; then
  awk -F, 'NR > 1 { k = $3 SUBSEP $2; if ($7 + 0 > best[k]) best[k] = $7 + 0
      if (!($3 in sl)) { sl[$3] = 1; L[++nl] = $3 } if (!($2 in ss)) { ss[$2] = 1; S[++ns] = $2 } }
    END { printf "load"; for (i = 1; i <= ns; i++) printf " %s", S[i]; print ""
      for (j = 1; j <= nl; j++) { printf "%s", L[j]; for (i = 1; i <= ns; i++) printf " %d", best[L[j] SUBSEP S[i]]; print "" } }' \
    "$out" >"$work/best.dat"
  gnuplot -e "datafile='$work/best.dat'; outfile='${out%.csv}.png'; loadavg='$(cut -d' ' -f1-3 /proc/loadavg)'; ncol=$(($(wc -w <<<"$systems") + 1))" "$here/plot.gp"
  echo "chart: ${out%.csv}.png"
fi
