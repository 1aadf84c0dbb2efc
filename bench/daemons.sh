#!/usr/bin/env bash
# Throughput of the real `pgjobd run` binary, measured from outside, with 1, 2 and 4
# daemons serving one database.
#
#   DATABASE_URL=postgresql://... bench/daemons.sh        (bench/run.sh calls it for you)
#
# For each mode and each K in $DAEMONS: empty the scratch schema's jobs table, bulk-INSERT
# $JOBS pending noop jobs (one INSERT ... generate_series, then VACUUM ANALYZE), start K
# daemons (`pgjobd run -c CONFIG`, handler `noop: {builtin: noop}`, log level warn), and
# poll with psql every 50 ms until no job is left unfinished. Throughput = JOBS / elapsed,
# elapsed counted from just before the first daemon is started (so start-up, connecting
# and the first claims are included: conservative) to the poll that found none left. Then the
# daemons get SIGTERM and the script waits for them (each must exit 0).
#
# Modes (MODES, default "each split"):
#   each   every daemon runs worker.concurrency = $CONCURRENCY (64): the way one scales out
#          in practice, the same config file on every host. K daemons = K x 64 workers.
#   split  the daemons share $CONCURRENCY between them (64/K each): the same number of
#          workers in total, so only the process count changes.
#
# Environment:
#   DATABASE_URL   the database (required); the schema $SCHEMA in it is dropped and recreated
#   PGJOBD_BIN     the binary (default build/release/pgjobd)
#   JOBS           jobs per run (default 100000)
#   DAEMONS        daemon counts (default "1 2 4")
#   CONCURRENCY    workers per daemon in "each" mode, total in "split" mode (default 64)
#   MODES          "each split" (default), or one of them
#   REPEAT         passes over all (mode, K) (default 2); the chart plots the best run of
#                  each. One daemon is the same setup in both modes, so "split" skips K=1
#                  when "each" runs it.
#   DAEMON_URL     where the daemons connect (default DATABASE_URL), e.g. a PgBouncer
#   POOLER         database.pooler of the daemons (default none); with "transaction" their
#                  LISTEN session goes to DATABASE_URL (database.listen_url), past the pooler
#   DSYNC_PROBE    optional file on the database's disk: records the time of a synchronous
#                  8 kB write before each run (bench/lib.sh; run.sh sets it)
#   FINISHED       finished-row counts (default "0"): before each run the table also gets
#                  this many done rows (inserted first, as by `pgjobd bench --finished-rows`),
#                  one more loop around the modes; run.sh's "finished" phase uses
#                  FINISHED="0 5000000" with one daemon to compare the two
#   STALE          statistics states (default "0"); "0 1" adds a loop: with 1, the table is
#                  analysed while it holds only the done rows and 5 pending ones, then the
#                  jobs are bulk-loaded and the run starts at once (no ANALYZE, autovacuum
#                  off for the table during the run): the planner believes in a few pending
#                  rows, as right after a bulk enqueue in production (autovacuum analyses a
#                  minute later at best)
#   SCHEMA         scratch schema (default pgjobd_bench_daemons)
#   OUT            CSV to write (default bench/results/daemons.csv)
#   HANDLER        the handler of the jobs (type noop), as YAML flow (default
#                  "{builtin: noop}"); bench/http.sh uses "{http: {url: ...}}"
#   PAYLOAD        each job's payload as SQL over g, its number (default
#                  "jsonb_build_object('n', g)"); bench/limits.sh gives keys
#   EXTRA_YAML     appended to each daemon's config, e.g. a `limits:` section (bench/limits.sh)
#   CPU_OUT        if set, a file each daemon's CPU seconds (user + system, from
#                  /proc/PID/stat just before it is stopped) are appended to, one a line
#   DB_CPU_OUT     if set, a file the CPU seconds of the PostgreSQL backends serving the
#                  daemons (application_name "pgjobd ...", read the same way; the cluster
#                  must run on this host) are appended to, one line per run
#
# The CSV has one row per run: mode, daemons, workers per daemon, total workers, jobs,
# elapsed seconds (polled), jobs/s, elapsed by the database's own max(finished_at) (no
# polling granularity), each daemon's share of the jobs (from its /metrics), the largest
# VmHWM (peak RSS) among the daemons in MB, the 1-minute load average and the disk probe
# before the run, the number of done rows that were in the table, whether the statistics
# were stale, and when each daemon began its first job (seconds after the start, by the
# database's clock, earliest first).
#
# Every run starts after VACUUM ANALYZE and a CHECKPOINT, so that no checkpoint set off
# by the bulk INSERTs (or by the previous run) runs during the timed part: right after a
# checkpoint starts, the first change to each page also writes the whole page to the WAL,
# which slows whatever runs then.
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
url=${DATABASE_URL:?daemons.sh: set DATABASE_URL (bench/run.sh starts a cluster and sets it)}
bin=${PGJOBD_BIN:-build/release/pgjobd}
jobs=${JOBS:-100000}
daemon_counts=${DAEMONS:-1 2 4}
concurrency=${CONCURRENCY:-64}
modes=${MODES:-each split}
finished_counts=${FINISHED:-0}
stale_states=${STALE:-0}
repeat=${REPEAT:-2}
schema=${SCHEMA:-pgjobd_bench_daemons}
daemon_url=${DAEMON_URL:-$url}
pooler=${POOLER:-none}
out=${OUT:-bench/results/daemons.csv}
handler=${HANDLER:-"{builtin: noop}"}
payload=${PAYLOAD:-"jsonb_build_object('n', g)"}
[[ "$schema" =~ ^[a-z_][a-z0-9_]*$ && "$schema" != public ]] || {
  echo "daemons.sh: SCHEMA must be a plain scratch identifier, not public" >&2; exit 2; }

work=$(mktemp -d /tmp/pgjobd-daemons.XXXXXX)
pids=()
watch_pid=""
# shellcheck disable=SC2317  # (called from the trap)
cleanup() {
  if [[ -n "$watch_pid" ]]; then kill "$watch_pid" 2>/dev/null || true; fi
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
bench_frame

now() { date +%s.%N; }

write_config() {  # FILE WORKERS PORT [URL POOLER]
  local to=${4:-$url} listen=""
  if [[ "${5:-none}" == transaction ]]; then listen=", listen_url: '${url//\'/\'\'}'"; fi
  cat >"$1" <<EOF
database: {url: '${to//\'/\'\'}', schema: $schema, migrate_on_start: false, pooler: ${5:-none}$listen}
worker: {concurrency: $2, queues: {default: {}}}
metrics: {listen: '127.0.0.1:$3'}
log: {level: warn, format: text}
handlers:
  noop: $handler
${EXTRA_YAML:-}
EOF
}

# A fresh scratch schema, migrated by the binary under test.
sql -c "DROP SCHEMA IF EXISTS $schema CASCADE"
write_config "$work/migrate.yaml" 1 0
"$bin" migrate -c "$work/migrate.yaml" >/dev/null

mkdir -p "$(dirname "$out")"
echo "pass,mode,daemons,workers_per_daemon,total_workers,jobs,elapsed_s,jobs_per_s,elapsed_db_s,jobs_per_daemon,max_peak_rss_mb,load1_before,dsync_8k_write_ms_before,finished_rows,stale_stats,first_job_s" >"$out"

# Whole passes, so that a burst of load on the shared machine hits different runs each time.
for ((r = 1; r <= repeat; r++)); do
  for finished in $finished_counts; do
   for stale in $stale_states; do
    for mode in $modes; do
      for k in $daemon_counts; do
        if [[ "$mode" == each ]]; then per=$concurrency; else per=$((concurrency / k)); fi
        if [[ "$mode" == split && "$per" == "$concurrency" && " $modes " == *" each "* ]]; then
          continue  # the same setup as "each" with K=1
        fi
        sql -c "TRUNCATE $schema.jobs RESTART IDENTITY"
        if ((finished > 0)); then
          sql -c "INSERT INTO $schema.jobs (type, status, attempts, started_at, finished_at) SELECT 'noop', 'done', 1, now(), now() FROM generate_series(1, $finished)"
        fi
        if [[ "$stale" == 1 ]]; then
          sql -c "ALTER TABLE $schema.jobs SET (autovacuum_enabled = false)"
          sql -c "INSERT INTO $schema.jobs (type) SELECT 'noop' FROM generate_series(1, 5)"
          sql -c "VACUUM ANALYZE $schema.jobs"
          sql -c "INSERT INTO $schema.jobs (type, payload) SELECT 'noop', $payload FROM generate_series(1, $jobs - 5) g"
        else
          sql -c "ALTER TABLE $schema.jobs RESET (autovacuum_enabled)"
          sql -c "INSERT INTO $schema.jobs (type, payload) SELECT 'noop', $payload FROM generate_series(1, $jobs) g"
          sql -c "VACUUM ANALYZE $schema.jobs"
        fi
        sql -c "CHECKPOINT"  # no checkpoint of the INSERTs' or the last run's WAL in this one
        load1=$(cut -d' ' -f1 /proc/loadavg)
        dsync=$(dsync_ms)
        ports=()
        for ((i = 0; i < k; i++)); do
          # free_port only sees ports in use now: one it gave an earlier daemon of this run,
          # not yet listening, could come again (a daemon died of it, 2026-12-05).
          port=$(free_port)
          while [[ " ${ports[*]} " == *" $port "* ]]; do port=$(free_port); done
          ports+=("$port")
          write_config "$work/d$i.yaml" "$per" "${ports[i]}" "$daemon_url" "$pooler"
        done

        start_db=$(sql -c "SELECT extract(epoch FROM clock_timestamp())")
        start=$(now)
        pids=()
        for ((i = 0; i < k; i++)); do
          "$bin" run -c "$work/d$i.yaml" 2>"$work/d$i.log" &
          pids+=($!)
        done
        # The poll must be cheap: on 2 cores a `count(*)` every 50 ms (even one answered by
        # the partial indexes) took 20% of the throughput it was measuring (19,300-19,700
        # jobs/s against 23,800-25,400 unpolled, same daemon). So one psql session
        # (\watch: no process spawned per poll) asks whether any unfinished row is left,
        # which stops at the first one the partial indexes (pending/failed, running) hold.
        # For noop jobs, which never fail, "none left" is `status <> 'done'` = 0, which is
        # checked with that very count once the loop ends.
        exec {watch_fd}< <(echo "SELECT NOT EXISTS (SELECT 1 FROM $schema.jobs WHERE status IN ('pending', 'failed')) AND NOT EXISTS (SELECT 1 FROM $schema.jobs WHERE status = 'running') \\watch 0.05" |
          psql "$url" -qAt 2>/dev/null)
        watch_pid=$!
        deadline=$(($(date +%s) + 600))
        while read -r -u "$watch_fd" all_done; do
          [[ "$all_done" == t ]] && break
          if (($(date +%s) > deadline)); then echo "daemons.sh: run timed out" >&2; exit 1; fi
          for pid in "${pids[@]}"; do
            kill -0 "$pid" 2>/dev/null || { echo "daemons.sh: a daemon died:" >&2; cat "$work"/d*.log >&2; exit 1; }
          done
        done
        end=$(now)
        kill "$watch_pid" 2>/dev/null || true
        exec {watch_fd}<&-
        watch_pid=""
        unfinished=$(sql -c "SELECT count(*) FROM $schema.jobs WHERE status <> 'done'")
        [[ "$unfinished" == 0 ]] || { echo "daemons.sh: $unfinished jobs not done" >&2; exit 1; }
        end_db=$(sql -c "SELECT extract(epoch FROM max(finished_at)) FROM $schema.jobs WHERE id > $finished")
        # When each daemon began its first job, in seconds after the start: how far apart
        # daemons started together join the work.
        first_jobs=$(sql -c "SELECT string_agg(to_char(f - $start_db, 'FM990.000'), '/' ORDER BY f) FROM (SELECT extract(epoch FROM min(started_at)) AS f FROM $schema.jobs WHERE id > $finished GROUP BY locked_by) d")

        shares=()
        peak_kb=0
        for ((i = 0; i < k; i++)); do
          shares+=("$(curl -s "http://127.0.0.1:${ports[i]}/metrics" |
            awk '/^pgjobd_jobs_total\{/ && /outcome="done"/ {s += $NF} END {printf "%d", s}')")
          kb=$(awk '/^VmHWM:/ {print $2}' "/proc/${pids[i]}/status")
          if ((kb > peak_kb)); then peak_kb=$kb; fi
          # CPU seconds (user + system) the daemon used since its start, for bench/http.sh.
          if [[ -n "${CPU_OUT:-}" ]]; then
            awk -v hz="$(getconf CLK_TCK)" '{ printf "%.3f\n", ($14 + $15) / hz }' \
              "/proc/${pids[i]}/stat" >>"$CPU_OUT"
          fi
        done
        # CPU seconds of the backends serving the daemons, for bench/limits.sh: the claims'
        # cost is spent there more than in the daemon.
        if [[ -n "${DB_CPU_OUT:-}" ]]; then
          for bpid in $(sql -c "SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'pgjobd %'"); do
            cat "/proc/$bpid/stat" 2>/dev/null || true
          done | awk -v hz="$(getconf CLK_TCK)" '{ s += $14 + $15 } END { printf "%.3f\n", s / hz }' >>"$DB_CPU_OUT"
        fi
        kill -TERM "${pids[@]}"
        for pid in "${pids[@]}"; do
          status=0
          wait "$pid" || status=$?
          ((status == 0)) || { echo "daemons.sh: daemon $pid exited $status" >&2; cat "$work"/d*.log >&2; exit 1; }
        done
        pids=()
        if cat "$work"/d*.log | grep -q .; then
          echo "daemons.sh: daemon warnings:" >&2; cat "$work"/d*.log >&2
        fi

        row=$(awk -v pass="$r" -v mode="$mode" -v k="$k" -v per="$per" -v jobs="$jobs" -v s="$start" -v e="$end" \
          -v sdb="$start_db" -v edb="$end_db" -v shares="$(IFS=/; echo "${shares[*]}")" \
          -v kb="$peak_kb" -v load="$load1" -v dsync="$dsync" -v finished="$finished" -v stale="$stale" -v first="$first_jobs" 'BEGIN {
            printf "%d,%s,%d,%d,%d,%d,%.3f,%.0f,%.3f,%s,%.1f,%s,%s,%d,%d,%s", pass, mode, k, per, k * per, jobs,
              e - s, jobs / (e - s), edb - sdb, shares, kb / 1024, load, dsync, finished, stale, first }')
        echo "$row" >>"$out"
        echo "daemons.sh: $row" >&2
      done
    done
   done
  done
done
sql -c "DROP SCHEMA IF EXISTS $schema CASCADE"
