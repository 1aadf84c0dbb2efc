#!/usr/bin/env bash
# A steady stream into pgjobd and into graphile-worker, on one private cluster in one run
# (issue 15, point 1: "a steady stream ahead of it too"): the same producers, pgbench
# connections each sending one job per autocommit transaction at a fixed total rate (a
# Poisson schedule, `pgbench -R`), through each system's own SQL way of enqueueing:
#
#   pgjobd           INSERT INTO peers_pgjobd.jobs (type) VALUES ('noop')
#                    one `pgjobd run`, worker.concurrency 64, builtin noop
#   graphile-worker  SELECT graphile_worker.add_job('noop')
#                    `node peer.js graphile-worker work`, its fastest published settings
#                    (concurrency 24, pool 25, localQueue.size 500, no completion delay)
#
#   bench/peers/stream.sh                  the real thing (RATES x 2 systems x DURATION)
#   PEERS_SMOKE=1 bench/peers/stream.sh    100 jobs/s for 3 s, one pass (tests/ops)
#
# Pick-up latency, the same definition for both: from the start of the enqueueing
# transaction to the start of the claiming one, both now() on the database's clock.
#   pgjobd           started_at - created_at of each job (done rows are kept for the run)
#   graphile-worker  locked_at - created_at of each job; it deletes a job when it completes
#                    it, so an AFTER DELETE statement trigger copies the two columns of the
#                    deleted rows (a transition table, one INSERT per completion batch) into
#                    an unlogged table
# Each system is started and awaited (pgjobd: /readyz; graphile-worker: its LISTEN session
# open) before the producers start, and the run ends when no job is left; every job
# inserted must have been picked up.
#
# Environment:
#   PEERS_SMOKE   1: RATES=100 DURATION=3 REPEAT=1 CLIENTS=2
#   RATES         jobs/s asked of the producers in total (default "500 2000 4000")
#   DURATION      seconds of producing per run (default 60)
#   CLIENTS       producer connections (default 8)
#   REPEAT        passes, alternating the systems' order (default 2)
#   SYSTEMS       default "pgjobd graphile-worker"
#   PGJOBD_BIN    default build/release/pgjobd
#   OUT           default bench/results/peers_stream.csv (smoke: a temporary file)
#
# Columns: pass, system, rate (asked), duration_s, clients, inserted, inserted_per_s,
# pgbench_lag_ms (how far behind schedule the producers fell, on average),
# insert_latency_ms (pgbench's average per enqueueing transaction), picked (jobs with a
# pick-up time: must equal inserted), p50_ms, p99_ms, p999_ms, max_ms, share_over_10ms,
# load1_before, dsync_8k_write_ms_before (bench/lib.sh's disk probe).
set -euo pipefail
shopt -s inherit_errexit  # also inside $(...)

here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
# shellcheck source=bench/peers/lib.sh
source "$here/lib.sh"

smoke=${PEERS_SMOKE:-0}
if [[ "$smoke" == 1 ]]; then
  rates=${RATES:-100} duration=${DURATION:-3} repeat=${REPEAT:-1} clients=${CLIENTS:-2}
else
  rates=${RATES:-500 2000 4000} duration=${DURATION:-60} repeat=${REPEAT:-2} clients=${CLIENTS:-8}
fi
systems=${SYSTEMS:-pgjobd graphile-worker}
bin=${PGJOBD_BIN:-build/release/pgjobd}
[[ -x "$bin" ]] || { echo "peers/stream.sh: $bin not built" >&2; exit 1; }
peers_require peers/stream.sh
command -v curl >/dev/null || { echo "peers/stream.sh: curl not found (pgjobd's /readyz)" >&2; exit 1; }
peers_cluster
out=${OUT:-}
if [[ -z "$out" ]]; then
  if [[ "$smoke" == 1 ]]; then out=$work/peers_stream.csv; else out=bench/results/peers_stream.csv; fi
fi

# Waits up to 30 s for QUERY to return t.
await() {  # QUERY WHAT
  local _
  for _ in $(seq 300); do
    [[ "$(sql -c "$1")" == t ]] && return 0
    kill -0 "$worker_pid" 2>/dev/null || { echo "peers/stream.sh: the worker died:" >&2; cat "$work/worker.log" >&2; exit 1; }
    sleep 0.1
  done
  echo "peers/stream.sh: timed out waiting for $2" >&2
  exit 1
}

# The producers: prints pgbench's report into $work/pgbench.log.
produce() {  # RATE SCRIPT_TEXT
  echo "$2" >"$work/produce.sql"
  pgbench -n -R "$1" -c "$clients" -j 2 -T "$duration" -f "$work/produce.sql" "$url" \
    >"$work/pgbench.log" 2>&1 || { cat "$work/pgbench.log" >&2; exit 1; }
}

# Each run leaves the pick-up times, in milliseconds, one per line, in $work/pickup.txt.
run_pgjobd() {  # RATE
  local port
  sql -c "DROP SCHEMA IF EXISTS peers_pgjobd CASCADE"
  port=$(free_port)
  cat >"$work/pgjobd.yaml" <<EOF
database: {url: '${url//\'/\'\'}', schema: peers_pgjobd}
worker: {concurrency: 64}
handlers: {noop: {builtin: noop}}
retention: {done: 1h}
metrics: {listen: "127.0.0.1:$port"}
log: {level: warn}
EOF
  "$bin" migrate -c "$work/pgjobd.yaml" >/dev/null
  "$bin" run -c "$work/pgjobd.yaml" >"$work/worker.log" 2>&1 &
  worker_pid=$!
  local _ ready=0
  for _ in $(seq 300); do
    if curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; then ready=1; break; fi
    sleep 0.1
  done
  ((ready)) || { echo "peers/stream.sh: pgjobd not ready after 30 s:" >&2; cat "$work/worker.log" >&2; exit 1; }
  produce "$1" "INSERT INTO peers_pgjobd.jobs (type) VALUES ('noop');"
  wait_none_left "SELECT NOT EXISTS (SELECT 1 FROM peers_pgjobd.jobs WHERE status <> 'done')"
  stop_worker
  sql -c "SELECT extract(epoch FROM started_at - created_at) * 1000 FROM peers_pgjobd.jobs" >"$work/pickup.txt"
}

run_graphile() {  # RATE
  graphile_fresh  # (its trigger goes with it)
  sql -c "DROP TABLE IF EXISTS public.peers_gw_pickup; DROP FUNCTION IF EXISTS public.peers_gw_pickup()"
  sql <<'SQL'
CREATE UNLOGGED TABLE public.peers_gw_pickup (created_at timestamptz, locked_at timestamptz);
CREATE FUNCTION public.peers_gw_pickup() RETURNS trigger LANGUAGE plpgsql AS
  $$ BEGIN INSERT INTO public.peers_gw_pickup SELECT created_at, locked_at FROM gone; RETURN NULL; END $$;
CREATE TRIGGER peers_gw_pickup AFTER DELETE ON graphile_worker._private_jobs
  REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION public.peers_gw_pickup();
SQL
  node "$here/peer.js" graphile-worker work "$url" >"$work/worker.log" 2>&1 &  # node itself: $! is what SIGTERM must reach
  worker_pid=$!
  await "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database()
                          AND query ILIKE 'listen %jobs:insert%')" "graphile-worker's LISTEN"
  produce "$1" "SELECT graphile_worker.add_job('noop');"
  wait_none_left "SELECT NOT EXISTS (SELECT 1 FROM graphile_worker._private_jobs)"
  stop_worker
  sql -c "SELECT extract(epoch FROM locked_at - created_at) * 1000 FROM public.peers_gw_pickup" >"$work/pickup.txt"
}

mkdir -p "$(dirname "$out")"
echo "pass,system,rate,duration_s,clients,inserted,inserted_per_s,pgbench_lag_ms,insert_latency_ms,picked,p50_ms,p99_ms,p999_ms,max_ms,share_over_10ms,load1_before,dsync_8k_write_ms_before" >"$out"
for ((r = 1; r <= repeat; r++)); do
  order=$(pass_order "$r")
  for rate in $rates; do
    for system in $order; do
      load1=$(cut -d' ' -f1 /proc/loadavg)
      dsync=$(dsync_ms)
      sql -c "CHECKPOINT"
      case "$system" in
        pgjobd) run_pgjobd "$rate" ;;
        graphile-worker) run_graphile "$rate" ;;
        *) echo "peers/stream.sh: unknown system $system" >&2; exit 2 ;;
      esac
      # "number of transactions actually processed: 5993", "latency average = 3.037 ms",
      # "rate limit schedule lag: avg 1.287 (max 77.721) ms"
      inserted=$(awk -F': ' '/^number of transactions actually processed/ { split($2, n, "/"); print n[1] }' "$work/pgbench.log")
      insert_ms=$(awk '/^latency average =/ { print $4 }' "$work/pgbench.log")
      lag=$(awk '/schedule lag: avg/ { for (i = 1; i < NF; i++) if ($i == "avg") print $(i + 1) }' "$work/pgbench.log")
      row=$(sort -n "$work/pickup.txt" | awk -v r="$r" -v sys="$system" -v rate="$rate" -v d="$duration" \
          -v c="$clients" -v ins="$inserted" -v lag="$lag" -v insms="$insert_ms" -v l="$load1" -v ds="$dsync" '
        function rank(q,  i) { i = int(NR * q); if (i < NR * q) i++; return v[i < 1 ? 1 : i] }  # nearest rank
        { v[NR] = $1; if ($1 > 10) over++ }
        END { printf "%d,%s,%d,%d,%d,%d,%.0f,%s,%s,%d,%.2f,%.2f,%.2f,%.2f,%.4f,%s,%s", r, sys, rate, d, c,
                ins, ins / d, lag, insms, NR, rank(0.5), rank(0.99), rank(0.999), v[NR], NR ? over / NR : 0, l, ds }')
      echo "$row" >>"$out"
      echo "peers/stream.sh: $row" >&2
      [[ "$(cut -d, -f10 <<<"$row")" == "$inserted" ]] ||
        { echo "peers/stream.sh: $system: $inserted inserted, $(cut -d, -f10 <<<"$row") picked up" >&2; exit 1; }
    done
  done
done

# The table: per rate and system, the best pass by p99 (and the range of the shares over
# 10 ms).
echo
awk -F, 'NR > 1 {
    k = $3 SUBSEP $2
    if (!(k in p99) || $12 + 0 < p99[k]) { p99[k] = $12 + 0; p50[k] = $11; ins[k] = $7 }
    if (!(k in lo) || $15 + 0 < lo[k]) lo[k] = $15 + 0
    if (!(k in hi) || $15 + 0 > hi[k]) hi[k] = $15 + 0
    if (!($3 in sr)) { sr[$3] = 1; R[++nr] = $3 }
    if (!($2 in ss)) { ss[$2] = 1; S[++ns] = $2 }
  } END {
    printf "%-8s %-16s %10s %8s %8s %17s\n", "rate", "system", "inserted/s", "p50_ms", "p99_ms", "over_10ms"
    for (j = 1; j <= nr; j++) for (i = 1; i <= ns; i++) {
      k = R[j] SUBSEP S[i]
      printf "%-8s %-16s %10s %8.2f %8.2f %17s\n", R[j], S[i], ins[k], p50[k], p99[k], sprintf("%.2f-%.2f%%", lo[k] * 100, hi[k] * 100)
    }
  }' "$out"
echo "(best pass by p99 of $repeat; rows in $out)"
