#!/usr/bin/env bash
# Retention backlog against throughput: one real `pgjobd run` (64 workers, noop jobs)
# burns down $JOBS pending jobs next to $EXPIRED done rows that are either past
# retention.done (the leader deletes them meanwhile) or not (the control), alternating;
# then the same backlog is deleted with no jobs to run.
#
#   DATABASE_URL=postgresql://... bench/prune.sh
#
# For each run: empty the scratch schema's jobs table, bulk-INSERT $EXPIRED done rows (finished
# two days ago, one per millisecond, or now), then $JOBS pending noop jobs, VACUUM ANALYZE
# and a CHECKPOINT; start the daemon and poll with psql every 200 ms until no job is left
# unfinished; wait for its "retention: deleted N finished job(s) in S s" line (the backlog's
# end). The daemon's first prune pass comes 5 s after its start, so the jobs' throughput is
# reported over the whole burn-down and over a window from 6 s to 6 s + $WINDOW s after the
# start (by finished_at), when the prune runs throughout.
#
# Environment:
#   DATABASE_URL   the database (required); the schema $SCHEMA in it is dropped and recreated
#   PGJOBD_BIN     the binary (default build/release/pgjobd)
#   EXPIRED        done rows per run (default 3000000)
#   JOBS           jobs per run (default 600000)
#   WINDOW         seconds of the throughput window (default 15)
#   REPEAT         passes over the modes (default 2)
#   MODES          "fresh expired" (default), or one of them
#   ALONE          1 (default): then the backlog once more with no jobs; 0: not
#   SCHEMA         scratch schema (default pgjobd_bench_prune)
#   OUT            CSV to write (default bench/results/prune.csv)
#
# CSV: pass, mode (expired: the rows are past retention; fresh: they are not; alone: expired
# with no jobs), jobs, elapsed_db_s (start to max(finished_at)), jobs_per_s, window_jobs_per_s,
# pruned rows, prune_s (as the daemon logged it), prune_rows_per_s, load1 before.
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
url=${DATABASE_URL:?prune.sh: set DATABASE_URL}
bin=${PGJOBD_BIN:-build/release/pgjobd}
expired=${EXPIRED:-3000000}
jobs=${JOBS:-600000}
window=${WINDOW:-15}
repeat=${REPEAT:-2}
modes=${MODES:-fresh expired}
alone=${ALONE:-1}
schema=${SCHEMA:-pgjobd_bench_prune}
out=${OUT:-bench/results/prune.csv}
[[ "$schema" =~ ^[a-z_][a-z0-9_]*$ && "$schema" != public ]] || {
  echo "prune.sh: SCHEMA must be a plain scratch identifier, not public" >&2; exit 2; }

work=$(mktemp -d /tmp/pgjobd-prune.XXXXXX)
pid=""
# shellcheck disable=SC2317  # (called from the trap)
cleanup() {
  if [[ -n "$pid" ]]; then kill -KILL "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
bench_frame

cat >"$work/pgjobd.yaml" <<EOF
database: {url: '${url//\'/\'\'}', schema: $schema, migrate_on_start: false}
worker: {concurrency: 64, queues: {default: {}}}
metrics: {listen: ''}
retention: {done: 24h}
log: {level: info, format: text}
handlers:
  noop: {builtin: noop}
EOF
sql -c "DROP SCHEMA IF EXISTS $schema CASCADE"
"$bin" migrate -c "$work/pgjobd.yaml" >/dev/null

mkdir -p "$(dirname "$out")"
echo "pass,mode,jobs,elapsed_db_s,jobs_per_s,window_jobs_per_s,pruned,prune_s,prune_rows_per_s,load1_before" >"$out"

run() {  # PASS MODE
  local mode=$2 finished="now()" n=$jobs
  [[ "$mode" == fresh ]] || finished="now() - interval '2 days' + g * interval '1 millisecond'"
  [[ "$mode" != alone ]] || n=0
  sql -c "TRUNCATE $schema.jobs RESTART IDENTITY"
  sql -c "INSERT INTO $schema.jobs (type, status, attempts, started_at, finished_at) SELECT 'old', 'done', 1, now(), $finished FROM generate_series(1, $expired) g"
  sql -c "INSERT INTO $schema.jobs (type, payload) SELECT 'noop', jsonb_build_object('n', g) FROM generate_series(1, $n) g"
  sql -c "VACUUM ANALYZE $schema.jobs"
  sql -c "CHECKPOINT" 2>/dev/null || true
  local load start
  load=$(cut -d' ' -f1 /proc/loadavg)
  start=$(sql -c "SELECT clock_timestamp()")
  "$bin" run -c "$work/pgjobd.yaml" >"$work/out" 2>"$work/log" &
  pid=$!
  until [[ "$(sql -c "SELECT NOT EXISTS (SELECT 1 FROM $schema.jobs WHERE status IN ('pending', 'failed')) AND NOT EXISTS (SELECT 1 FROM $schema.jobs WHERE status = 'running')")" == t ]]; do
    sleep 0.2
  done
  if [[ "$mode" != fresh ]]; then
    for _ in $(seq 1 3000); do
      grep -q "retention: deleted" "$work/log" && break
      sleep 0.2
    done
  fi
  kill -TERM "$pid"
  wait "$pid"
  pid=""
  local pruned=0 prune_s=0 rate=0
  local line
  line=$(sed -n 's/.*retention: deleted \([0-9]*\) finished job(s) in \([0-9.]*\) s.*/\1 \2/p' "$work/log" | tail -1)
  if [[ -n "$line" ]]; then
    read -r pruned prune_s <<<"$line"
    rate=$(awk -v n="$pruned" -v s="$prune_s" 'BEGIN { if (s > 0) printf "%.0f", n / s }')
  fi
  local stats
  stats=$(sql -F, -c "SELECT round(extract(epoch FROM max(finished_at) - '$start')::numeric, 2), round(($n / nullif(extract(epoch FROM max(finished_at) - '$start'), 0))::numeric), round(count(*) FILTER (WHERE finished_at >= timestamptz '$start' + interval '6 seconds' AND finished_at < timestamptz '$start' + interval '6 seconds' + $window * interval '1 second') / $window::numeric) FROM $schema.jobs WHERE type = 'noop'")
  echo "$1,$mode,$n,$stats,$pruned,$prune_s,$rate,$load" | tee -a "$out"
}

for ((r = 1; r <= repeat; r++)); do
  for mode in $modes; do run "$r" "$mode"; done
done
if [[ "$alone" == 1 ]]; then run 1 alone; fi
sql -c "DROP SCHEMA $schema CASCADE"
