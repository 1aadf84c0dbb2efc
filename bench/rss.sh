#!/usr/bin/env bash
# Does the daemon's memory grow with the number of jobs it has run? One real `pgjobd run`
# (worker.concurrency 64, handler `noop: {builtin: noop}`, log level warn) works through
# $TOTAL noop jobs while this script samples its VmRSS from /proc/PID/status every second.
#
#   DATABASE_URL=postgresql://... bench/rss.sh            (bench/run.sh calls it for you)
#
# Jobs are fed in bulk INSERTs of $BATCH (100,000) whenever fewer than BATCH/2 are left
# unfinished, so the daemon never runs dry and is woken by the INSERT trigger's NOTIFY as
# in production, and the claim index never holds the whole million. Finished rows stay in
# the table (retention.done is the default 24 h), so it ends with $TOTAL done rows.
# The number of jobs done so far comes from the daemon's own /metrics
# (pgjobd_jobs_total{outcome="done"}).
#
# Environment:
#   DATABASE_URL   the database (required); the schema $SCHEMA in it is dropped and recreated
#   PGJOBD_BIN     the binary (default build/release/pgjobd)
#   TOTAL          jobs in all (default 1000000)
#   BATCH          jobs per INSERT (default 100000)
#   CONCURRENCY    worker.concurrency (default 64)
#   SCHEMA         scratch schema (default pgjobd_bench_rss)
#   OUT            CSV of the samples (default bench/results/rss.csv); a summary line
#                  (RSS after the first BATCH jobs vs at the end) goes to stdout and to
#                  OUT with .csv replaced by .txt
set -euo pipefail

cd "$(dirname "$0")/.."
url=${DATABASE_URL:?rss.sh: set DATABASE_URL (bench/run.sh starts a cluster and sets it)}
bin=${PGJOBD_BIN:-build/release/pgjobd}
total=${TOTAL:-1000000}
batch=${BATCH:-100000}
concurrency=${CONCURRENCY:-64}
schema=${SCHEMA:-pgjobd_bench_rss}
out=${OUT:-bench/results/rss.csv}
summary=${out%.csv}.txt
[[ "$schema" =~ ^[a-z_][a-z0-9_]*$ && "$schema" != public ]] || {
  echo "rss.sh: SCHEMA must be a plain scratch identifier, not public" >&2; exit 2; }

work=$(mktemp -d /tmp/pgjobd-rss.XXXXXX)
pid=""
# shellcheck disable=SC2317  # (called from the trap)
cleanup() {
  if [[ -n "$pid" ]]; then kill -KILL "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
# shellcheck source=bench/lib.sh
source bench/lib.sh
bench_frame
port=$(free_port)

cat >"$work/pgjobd.yaml" <<EOF
database: {url: '${url//\'/\'\'}', schema: $schema, migrate_on_start: false}
worker: {concurrency: $concurrency, queues: {default: {}}}
metrics: {listen: '127.0.0.1:$port'}
log: {level: warn, format: text}
handlers:
  noop: {builtin: noop}
EOF
sql -c "DROP SCHEMA IF EXISTS $schema CASCADE"
"$bin" migrate -c "$work/pgjobd.yaml" >/dev/null

inserted=0
feed() {
  local n=$((total - inserted < batch ? total - inserted : batch))
  sql -c "INSERT INTO $schema.jobs (type, payload) SELECT 'noop', jsonb_build_object('n', g) FROM generate_series(1, $n) g"
  inserted=$((inserted + n))
}
done_so_far() {
  curl -sf "http://127.0.0.1:$port/metrics" |
    awk '/^pgjobd_jobs_total\{/ && /outcome="done"/ {s += $NF} END {printf "%d", s}'
}
field() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$pid/status"; }

feed
mkdir -p "$(dirname "$out")"
echo "seconds,jobs_done,jobs_inserted,rss_kb,hwm_kb" >"$out"
"$bin" run -c "$work/pgjobd.yaml" 2>"$work/pgjobd.log" &
pid=$!
start=$(date +%s.%N)
deadline=$(($(date +%s) + ${TIMEOUT:-1800}))
done_jobs=0
while :; do
  sleep 1
  kill -0 "$pid" 2>/dev/null || { echo "rss.sh: the daemon died:" >&2; cat "$work/pgjobd.log" >&2; exit 1; }
  done_jobs=$(done_so_far || echo "$done_jobs")
  [[ -n "$done_jobs" ]] || done_jobs=0
  t=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN {printf "%.1f", e - s}')
  echo "$t,$done_jobs,$inserted,$(field VmRSS),$(field VmHWM)" >>"$out"
  ((done_jobs >= total)) && break
  if ((inserted < total && inserted - done_jobs < batch / 2)); then feed; fi
  if (($(date +%s) > deadline)); then echo "rss.sh: timed out at $done_jobs jobs" >&2; exit 1; fi
done
elapsed=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN {printf "%.1f", e - s}')
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
pid=""
((status == 0)) || { echo "rss.sh: the daemon exited $status" >&2; cat "$work/pgjobd.log" >&2; exit 1; }
if [[ -s "$work/pgjobd.log" ]]; then echo "rss.sh: daemon warnings:" >&2; cat "$work/pgjobd.log" >&2; fi
unfinished=$(sql -c "SELECT count(*) FROM $schema.jobs WHERE status <> 'done'")
sql -c "DROP SCHEMA IF EXISTS $schema CASCADE"

# RSS at the first sample after BATCH jobs were done, against the last sample.
awk -F, -v batch="$batch" -v total="$total" -v elapsed="$elapsed" -v unfinished="$unfinished" '
  NR > 1 && first == "" && $2 >= batch { first = $4; first_done = $2 }
  NR > 1 { last = $4; last_done = $2; if ($4 > max) max = $4 }
  NR > 1 { hwm = $5 }
  END {
    printf "jobs %d in %.1f s (%.0f jobs/s, %d unfinished); RSS after %d jobs %.1f MB, at the end (%d jobs) %.1f MB, growth %+.1f MB (%+.1f%%); largest sample %.1f MB, VmHWM %.1f MB\n",
      total, elapsed, total / elapsed, unfinished, first_done, first / 1024, last_done, last / 1024,
      (last - first) / 1024, (last - first) / first * 100, max / 1024, hwm / 1024
  }' "$out" | tee "$summary"
