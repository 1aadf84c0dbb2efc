#!/usr/bin/env bash
# A steady stream: producers insert jobs at a fixed rate, one job per INSERT from several
# client connections, while one real `pgjobd run` works them off; every second the script
# records the backlog, the pick-up latency of the jobs finished in that second, and the
# sizes of the table and of its claim index (issue 15, point 2).
#
#   DATABASE_URL=postgresql://... bench/stream.sh         (bench/run.sh's "stream" phase)
#
# First the burst rate is measured (bench/daemons.sh: one daemon, $BURST_JOBS preloaded
# jobs, best of two), unless BURST_RATE is given; then, for each fraction in $FRACTIONS,
# a fresh scratch schema, one daemon (worker.concurrency $CONCURRENCY, builtin noop,
# retention.done $RETENTION) and pgbench inserting at fraction x burst rate for $DURATION
# seconds:
#
#   pgbench -n -R RATE -c CLIENTS -j 2 -T DURATION -f insert.sql   (INSERT ... VALUES ('noop'))
#
# pgbench spaces the INSERTs as a Poisson process at RATE in total and reports how far
# behind its schedule it fell (its "schedule lag"), so a run where the producers, not the
# daemon, fell short says so in its log.
#
# Pick-up latency = started_at - created_at of each job: from the start of the INSERT's
# transaction to the start of the claim's (both now(), one clock: the database's). Each
# sample covers the jobs finished in one whole second of the database's clock, one second
# behind (so that completions in flight have committed), read through the finished-rows
# index; samples are taken every half second and deduplicated, so no second is missed.
#
# Environment:
#   DATABASE_URL   the database (required); scratch schema $SCHEMA in it is dropped and recreated
#   PGJOBD_BIN     default build/release/pgjobd
#   FRACTIONS      default "0.5 0.9"
#   DURATION       seconds per run (default 600; the 1-hour churn run: DURATION=3600 FRACTIONS=0.5)
#   CLIENTS        producer connections (default 16)
#   CONCURRENCY    the daemon's worker.concurrency (default 64)
#   RETENTION      the daemon's retention.done (default 1m: done rows are pruned, so the table
#                  stays bounded only if retention and autovacuum keep up, which is measured)
#   BURST_RATE     jobs/s to take fractions of (default: measured first)
#   BURST_JOBS     jobs of that measurement (default 20000)
#   SCHEMA         default pgjobd_bench_stream
#   CEILING        seconds of the producers' ceiling, measured before the runs (default 30; 0
#                  skips it): the same producers, unthrottled, with no daemon, into a fresh
#                  scratch schema. A rate asked above it cannot be offered on this machine
#                  (issue 15's point 2 asks for 0.5 and 0.9 of the burst rate): such a run
#                  shows the daemon at the producers' maximum, and the script says so
#   PRODUCER_OPTIONS  extra server settings for the producers' sessions only, e.g.
#                  "-c synchronous_commit=off" to take their own commit's WAL flush out of
#                  the pick-up and see the daemon's part of it (default none)
#   OUT            output directory (default bench/results): stream_<fraction>.csv per run
#                  and stream_summary.csv, one row per run
#
# stream_<fraction>.csv columns: t (seconds since the run started), second (epoch of the
# window), finished (jobs finished in that second), p50_ms, p99_ms, max_ms, over_10ms (jobs
# whose pick-up took longer than 10 ms), backlog (pending and failed rows at the sample),
# running, table_mb (jobs heap, with TOAST), claim_idx_mb, indexes_mb (all indexes of jobs),
# dead_rows (pg_stat_user_tables.n_dead_tup), oldest_xact_s (the age of the oldest open
# transaction holding a snapshot in the database: while one is open, no dead row newer than
# it can be cleaned up), claims (the daemon's claim queries that second, from
# pgjobd_claim_duration_seconds scraped every half second), claim_mean_ms and slow_claims
# (those of 1 s or more). stream_summary.csv's columns 20-22 are the producers' own
# INSERT times (sent to commit acknowledged, a tenth of them sampled): p50, p99 and the
# share over 10 ms, the floor under the pick-up latency; its last is their ceiling
# (producer_ceiling_per_s, empty when CEILING=0).
set -euo pipefail
shopt -s inherit_errexit

here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

url=${DATABASE_URL:?"stream.sh: DATABASE_URL is required"}
bin=${PGJOBD_BIN:-build/release/pgjobd}
fractions=${FRACTIONS:-0.5 0.9}
duration=${DURATION:-600}
clients=${CLIENTS:-16}
concurrency=${CONCURRENCY:-64}
retention=${RETENTION:-1m}
burst_jobs=${BURST_JOBS:-20000}
ceiling_seconds=${CEILING:-30}
schema=${SCHEMA:-pgjobd_bench_stream}
out=${OUT:-bench/results}
[[ -x "$bin" ]] || { echo "stream.sh: $bin not built" >&2; exit 1; }
command -v pgbench >/dev/null || { echo "stream.sh: pgbench not found (postgresql-client)" >&2; exit 1; }
[[ "$ceiling_seconds" =~ ^[0-9]+$ ]] || { echo "stream.sh: CEILING must be whole seconds" >&2; exit 2; }
[[ "$schema" =~ ^[a-z_][a-z0-9_]*$ && "$schema" != public ]] || {
  echo "stream.sh: SCHEMA must be a plain scratch identifier, not public" >&2; exit 2; }

work=$(mktemp -d /tmp/pgjobd-stream.XXXXXX)
daemon_pid=""
watch_pid=""
scrape_pid=""
# shellcheck disable=SC2317  # (called from the trap)
cleanup() {
  if [[ -n "$watch_pid" ]]; then kill "$watch_pid" 2>/dev/null || true; fi
  if [[ -n "$scrape_pid" ]]; then kill "$scrape_pid" 2>/dev/null || true; fi
  if [[ -n "$daemon_pid" ]]; then kill -KILL "$daemon_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
bench_frame


mkdir -p "$out"
burst=${BURST_RATE:-}
if [[ -z "$burst" ]]; then
  DATABASE_URL=$url PGJOBD_BIN=$bin JOBS=$burst_jobs DAEMONS=1 MODES=each REPEAT=2 \
    OUT="$work/burst.csv" bench/daemons.sh 2>"$work/burst.log" ||
    { cat "$work/burst.log" >&2; exit 1; }
  burst=$(awk -F, 'NR > 1 && $8 > best { best = $8 } END { print best }' "$work/burst.csv")
  echo "stream.sh: burst of $burst_jobs jobs, one daemon: $burst jobs/s (best of 2)" >&2
fi

cat >"$work/insert.sql" <<EOF
INSERT INTO $schema.jobs (type) VALUES ('noop');
EOF

# The sample of one whole second, one second behind the database's clock.
cat >"$work/sample.sql" <<EOF
WITH w AS (
  SELECT date_trunc('second', clock_timestamp()) - interval '2 seconds' AS a
), f AS (
  SELECT extract(epoch FROM j.started_at - j.created_at) * 1000 AS ms
  FROM $schema.jobs j, w
  WHERE j.status IN ('done', 'dead', 'cancelled')
    AND j.finished_at >= w.a AND j.finished_at < w.a + interval '1 second'
)
SELECT extract(epoch FROM w.a)::bigint,
       (SELECT count(*) FROM f),
       (SELECT coalesce(round(percentile_disc(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 2), 0) FROM f),
       (SELECT coalesce(round(percentile_disc(0.99) WITHIN GROUP (ORDER BY ms)::numeric, 2), 0) FROM f),
       (SELECT coalesce(round(max(ms)::numeric, 2), 0) FROM f),
       (SELECT count(*) FROM f WHERE ms > 10),
       (SELECT count(*) FROM $schema.jobs WHERE status IN ('pending', 'failed')),
       (SELECT count(*) FROM $schema.jobs WHERE status = 'running'),
       round(pg_table_size('$schema.jobs') / 1048576.0, 1),
       round(pg_relation_size('$schema.jobs_claim_idx') / 1048576.0, 1),
       round(pg_indexes_size('$schema.jobs') / 1048576.0, 1),
       (SELECT n_dead_tup FROM pg_stat_user_tables WHERE schemaname = '$schema' AND relname = 'jobs'),
       (SELECT coalesce(round(extract(epoch FROM max(clock_timestamp() - xact_start))::numeric, 1), 0)
        FROM pg_stat_activity
        WHERE datname = current_database() AND backend_xmin IS NOT NULL AND pid <> pg_backend_pid())
FROM w
EOF

summary=$out/stream_summary.csv
header="fraction,rate,duration_s,clients,burst_rate,inserted,inserted_per_s,pgbench_lag_ms,insert_latency_ms,finished,p50_ms,p99_bound_ms,share_over_10ms,backlog_max,backlog_end,backlog_slope_per_min,table_mb_max,claim_idx_mb_max,load1_before,insert_p50_ms,insert_p99_ms,insert_share_over_10ms,producer_ceiling_per_s"
if [[ ! -f "$summary" ]]; then
  echo "$header" >"$summary"
elif old_header=$(head -1 "$summary") && [[ "$old_header" != "$header" ]]; then
  # A summary of an older stream.sh, whose columns are the first of today's: the new
  # header, and the old rows given empty fields for the columns they lack.
  [[ "$header" == "$old_header",* ]] || {
    echo "stream.sh: $summary has other columns than this script writes; choose another OUT" >&2
    exit 2
  }
  awk -F, -v h="$header" 'NR == 1 { print h; n = split(h, f, ","); next }
    { line = $0; for (i = NF; i < n; i++) line = line ","; print line }' "$summary" >"$work/summary"
  cat "$work/summary" >"$summary"
fi

# The producers' ceiling: the same INSERTs from the same connections, as fast as they go,
# with no daemon running. On a small machine the producers and the daemon share the CPU,
# so a stream runs below this; a rate asked above it is not what the run can measure.
ceiling=""
if ((ceiling_seconds > 0)); then
  sql -c "DROP SCHEMA IF EXISTS $schema CASCADE"
  cat >"$work/ceiling.yaml" <<EOF
database: {url: '${url//\'/\'\'}', schema: $schema}
handlers: {noop: {builtin: noop}}
log: {level: warn}
EOF
  "$bin" migrate -c "$work/ceiling.yaml" >/dev/null
  PGOPTIONS="$PGOPTIONS ${PRODUCER_OPTIONS:-}" \
    pgbench -n -c "$clients" -j 2 -T "$ceiling_seconds" -f "$work/insert.sql" "$url" \
    >"$work/ceiling.log" 2>&1 || { cat "$work/ceiling.log" >&2; exit 1; }
  ceiling=$(awk '/^tps = / { printf "%.0f", $3 }' "$work/ceiling.log")
  [[ -n "$ceiling" ]] || { echo "stream.sh: no rate in pgbench's report:" >&2; cat "$work/ceiling.log" >&2; exit 1; }
  echo "stream.sh: the $clients producers alone (no daemon, ${ceiling_seconds}s): $ceiling INSERTs/s" >&2
fi

for fraction in $fractions; do
  rate=$(awk -v b="$burst" -v f="$fraction" 'BEGIN { printf "%d", b * f }')
  csv=$out/stream_$fraction.csv
  sql -c "DROP SCHEMA IF EXISTS $schema CASCADE"
  port=$(free_port)
  cat >"$work/daemon.yaml" <<EOF
database: {url: '${url//\'/\'\'}', schema: $schema}
worker: {concurrency: $concurrency}
handlers: {noop: {builtin: noop}}
retention: {done: $retention}
metrics: {listen: "127.0.0.1:$port"}
log: {level: warn}
EOF
  "$bin" migrate -c "$work/daemon.yaml" >/dev/null
  load1=$(cut -d' ' -f1 /proc/loadavg)
  echo "stream.sh: $fraction of $burst = $rate jobs/s for ${duration}s, $clients producers${PRODUCER_OPTIONS:+ ($PRODUCER_OPTIONS)}" >&2
  if [[ -n "$ceiling" ]] && ((rate > ceiling)); then
    echo "stream.sh: $rate/s asked is more than the producers alone reach here ($ceiling/s):" \
      "this run shows the daemon at the producers' maximum, not at $fraction of the burst rate" >&2
  fi

  "$bin" run -c "$work/daemon.yaml" >"$work/daemon.log" 2>&1 &
  daemon_pid=$!
  for _ in $(seq 100); do
    curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
    sleep 0.1
  done
  # One psql session samples every half second; rows are deduplicated by their second below.
  { echo "\\pset tuples_only on"; echo "\\pset format unaligned"; echo "\\pset fieldsep ,"
    cat "$work/sample.sql"; echo "\\watch 0.5"; } |
    psql "$url" -qX >"$work/samples.raw" 2>"$work/watch.log" &
  watch_pid=$!
  # The claim histogram every half second: "epoch count sum count_under_1s" per scrape.
  while true; do
    curl -fsS "http://127.0.0.1:$port/metrics" 2>/dev/null | awk -v now="$(date +%s)" '
      /^pgjobd_claim_duration_seconds_count / { c = $2 }
      /^pgjobd_claim_duration_seconds_sum / { s = $2 }
      /^pgjobd_claim_duration_seconds_bucket\{le="1(\.0+)?"\} / { f = $2 }
      END { if (c != "") print now, c, s, f }'
    sleep 0.5
  done >"$work/claims.raw" &
  scrape_pid=$!
  # -l: a tenth of the INSERTs logged with their latency, the floor under the pick-up.
  rm -f "$work"/insert_log.*
  PGOPTIONS="$PGOPTIONS ${PRODUCER_OPTIONS:-}" \
    pgbench -n -R "$rate" -c "$clients" -j 2 -T "$duration" -f "$work/insert.sql" \
    -l --sampling-rate=0.1 --log-prefix="$work/insert_log" "$url" \
    >"$work/pgbench.log" 2>&1 || { cat "$work/pgbench.log" >&2; exit 1; }
  # The last jobs' pick-up, and the sample of the last whole second.
  for _ in $(seq 100); do
    [[ "$(sql -c "SELECT count(*) FROM $schema.jobs WHERE status IN ('pending', 'failed', 'running')")" == 0 ]] && break
    sleep 0.1
  done
  sleep 3  # two more whole seconds of samples, so the last second of the stream is read
  kill "$watch_pid"; wait "$watch_pid" 2>/dev/null || true; watch_pid=""
  kill "$scrape_pid"; wait "$scrape_pid" 2>/dev/null || true; scrape_pid=""
  kill -TERM "$daemon_pid"
  wait "$daemon_pid" || { echo "stream.sh: the daemon did not exit 0" >&2; cat "$work/daemon.log" >&2; exit 1; }
  daemon_pid=""
  if grep -q . "$work/daemon.log"; then echo "stream.sh: daemon warnings:" >&2; cat "$work/daemon.log" >&2; fi

  echo "t,second,finished,p50_ms,p99_ms,max_ms,over_10ms,backlog,running,table_mb,claim_idx_mb,indexes_mb,dead_rows,oldest_xact_s,claims,claim_mean_ms,slow_claims" >"$csv"
  # Each second's claims: the last scrape within it less the last one before it.
  awk -F, -v scrapes="$work/claims.raw" '
    BEGIN { while ((getline line < scrapes) > 0) {
              split(line, f, " "); c[f[1]] = f[2]; s[f[1]] = f[3]; u[f[1]] = f[4] } }
    NF >= 13 && !seen[$1]++ {
      if (!first) first = $1
      n = 0; mean = 0; slow = 0
      if (($1 in c) && (($1 - 1) in c)) {
        n = c[$1] - c[$1 - 1]
        if (n > 0) mean = (s[$1] - s[$1 - 1]) / n * 1000
        slow = n - (u[$1] - u[$1 - 1])
      }
      printf "%d,%s,%d,%.2f,%d\n", $1 - first, $0, n, mean, slow }' \
    "$work/samples.raw" >>"$csv"
  inserted=$(sql -c "SELECT coalesce(max(id), 0) FROM $schema.jobs")
  # "rate limit schedule lag: avg 1.287 (max 77.721) ms", "latency average = 3.037 ms"
  lag=$(awk '/schedule lag: avg/ { for (i = 1; i < NF; i++) if ($i == "avg") print $(i + 1) }' "$work/pgbench.log")
  insert_ms=$(awk '/^latency average =/ { print $4 }' "$work/pgbench.log")
  # Each logged INSERT's own time, from being sent to its commit acknowledged: pgbench's
  # latency less its schedule lag (fields 3 and 7, in microseconds). The pick-up is measured
  # from the start of the INSERT's transaction, so it cannot be shorter than its commit.
  read -r ins_p50 ins_p99 ins_over < <(cat "$work"/insert_log.* | awk 'NF >= 7 { print ($3 - $7) / 1000 }' |
    sort -n | awk '{ v[NR] = $1; if ($1 > 10) over++ }
      END { if (!NR) { print "0 0 0"; exit }
            i = int(NR * 0.99); if (i < NR * 0.99) i++  # nearest rank
            printf "%.2f %.2f %.4f\n", v[int((NR + 1) / 2)], v[i], over / NR }')
  cat "$work/pgbench.log" >"$out/stream_${fraction}_pgbench.log"
  # Steady part: the samples between the first and the last 10 seconds of the stream; the
  # median of its per-second medians.
  steady() { awk -F, -v d="$duration" 'NR > 1 && $1 >= 10 && $1 <= d - 10' "$csv"; }
  med=$(steady | cut -d, -f4 | sort -n | awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : 0 }')
  awk -F, -v med="$med" -v f="$fraction" -v rate="$rate" -v d="$duration" -v c="$clients" -v b="$burst" \
      -v ins="$inserted" -v lag="${lag:-}" -v insms="${insert_ms:-}" -v load="$load1" \
      -v ip50="$ins_p50" -v ip99="$ins_p99" -v iover="$ins_over" -v ceil="$ceiling" '
    NR == 1 { next }
    { t[NR] = $1; fin[NR] = $3; over[NR] = $7; bl[NR] = $8
      tb[NR] = $10; ci[NR] = $11; n = NR }
    END {
      for (i = 2; i <= n; i++) {
        if (t[i] < 10 || t[i] > d - 10) continue
        total += fin[i]; slow += over[i]; if (bl[i] > blmax) blmax = bl[i]
        if (tb[i] > tbmax) tbmax = tb[i]; if (ci[i] > cimax) cimax = ci[i]
        sx += t[i]; sy += bl[i]; sxx += t[i] * t[i]; sxy += t[i] * bl[i]; m++
      }
      # The p99 as a bound: the share of the jobs whose pick-up took over 10 ms.
      slope = (m > 1 && m * sxx - sx * sx) ? (m * sxy - sx * sy) / (m * sxx - sx * sx) * 60 : 0
      share = total ? slow / total : 0
      p99b = (share < 0.01) ? "10" : ">10"
      printf "%s,%d,%d,%d,%s,%d,%.0f,%s,%s,%d,%.2f,%s,%.4f,%d,%d,%.1f,%.1f,%.1f,%s,%s,%s,%s,%s\n", f, rate, d, c, b,
        ins, ins / d, lag, insms, total, med, p99b, share, blmax, bl[n], slope,
        tbmax, cimax, load, ip50, ip99, iover, ceil
    }' "$csv" >>"$summary"
  tail -1 "$summary" >&2
done
sql -c "DROP SCHEMA IF EXISTS $schema CASCADE"
