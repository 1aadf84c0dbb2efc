#!/usr/bin/env bash
# Reproduces every figure in bench/README.md and the chart bench/results/throughput.png.
#
#   bench/run.sh                 the full set (18 minutes on a quiet 2-core machine, 31 on a busy one)
#   QUICK=1 bench/run.sh         a short smoke run (about 2 minutes; numbers not comparable)
#
# Run as root on Debian 12 from anywhere in the repository (the PostgreSQL it starts runs
# as the `postgres` user, like scripts/pg-cluster.sh). It
#   1. installs the packages, gnuplot included (scripts/install-deps.sh --with-bench);
#   2. builds build/release/pgjobd (`cmake --preset release`, `cmake --build --preset
#      release --target pgjobd`; quick when up to date; SKIP_BUILD=1 skips it) and copies
#      the binary aside, so a rebuild during the run cannot change what is measured;
#   3. starts a fresh, dedicated PostgreSQL 15 in $PGDIR with scripts/pg-cluster.sh
#      *without* --fast: durable settings, fsync, full_page_writes and synchronous_commit
#      on (every commit waits for its WAL flush), as in production; stopped on exit;
#   4. runs, recording before and after each phase (results/load.csv) the load average
#      and the time of one synchronous 8 kB write on the cluster's disk (the other
#      tenants' I/O shows there first; every commit waits for one):
#        main     pgjobd bench --json --finished-rows 5000000: the default run (100,000
#                 jobs, concurrency 64, latency at 100 jobs/s, idle cost) plus the same
#                 burn-down with 5,000,000 done rows in the table   -> results/bench.json
#        sync     the same without --finished-rows, with database.synchronous_claims:
#                 true (claims wait for their WAL flush too)         -> results/bench_sync.json
#        sweep    pgjobd bench --no-latency --jobs N --concurrency C --json for
#                 C in 1 2 4 8 16 32 64 128 256, N = min(50000, 2000 x C): at low
#                 concurrency every job costs two synchronous commits, so 50,000 jobs
#                 would take minutes per point without making it more precise
#                                                                    -> results/sweep.csv
#        daemons  bench/daemons.sh: 1, 2 and 4 real daemons, one database
#                                                                    -> results/daemons.csv
#        finished bench/daemons.sh with one daemon: 100,000 jobs in an otherwise empty
#                 table vs next to 5,000,000 done rows, alternating, a CHECKPOINT before
#                 each timed run                                     -> results/finished_rows.csv
#        pooler   bench/daemons.sh with 1, 2, 4 and 8 daemons x 64 workers, 200,000 jobs,
#                 connecting directly and through one PgBouncer in transaction mode (pool
#                 of 20 server connections, database.pooler: transaction, LISTEN past
#                 it), alternating                           -> results/pooler.csv
#        rss      bench/rss.sh: one real daemon over 1,000,000 jobs, VmRSS every second
#                                                                    -> results/rss.csv, rss.txt
#        backlog  pgjobd bench --pending-rows 10000000: the first 100,000 jobs of a backlog
#                 of 10,000,000 pending ones against 100,000 alone, alternating, five
#                 passes; the ratio of the rates (goal: at least 0.8) and of the CPU per
#                 job (this process's and the cluster's: steadier on a shared machine)
#                                                -> results/backlog.json, backlog.csv
#        http     bench/http.sh: wrk against a local keep-alive HTTP server (node), bare
#                 and with the daemon's own request, then one daemon POSTing 100,000 jobs
#                 to it, again with done jobs deleted at completion (retention.done 0),
#                 then the same jobs with builtin noop, two passes; jobs/s, TCP
#                 connections and CPU per job, and http's jobs/s and CPU over wrk's
#                                                                    -> results/http.csv
#        exec     bench/exec.sh: `xargs -P 64 -n 1 /bin/true` over 5,000 processes, then
#                 one daemon running 5,000 jobs with `{exec: [/bin/true]}`, alternated, two
#                 passes; the daemon's jobs/s over xargs' (goal: at least 0.95)
#                                                                    -> results/exec.csv
#        limits   bench/limits.sh: one daemon over 200,000 jobs with no limit, `concurrency:
#                 1000`, a rate that never holds, a keyed limit over 1,000 keys and one
#                 partition, alternated, 3 passes; then bench/held_limit.sh (claims next to
#                 200 held jobs with 1 MB payloads or keys); each ratio beside its anchor
#                                                      -> results/limits.csv, limits.txt
#        unclaimable  pgjobd bench --no-latency --jobs N --unclaimable-rows 200000 --json
#                 for N in 20000 50000: burn-downs with 200,000 due rows of a type no
#                 handler serves, and with as many in a paused queue the engine serves,
#                 each against none, with and without prefetch; the ratios beside their
#                 anchor (issue 42: >= 0.8)                          -> results/unclaimable.csv
#        stream   (not in the default set: 21 minutes) bench/stream.sh: single-row INSERTs
#                 from 16 pgbench producers at 0.5 and 0.9 of the burst rate for 10
#                 minutes each, pick-up latency and backlog every second
#                                                -> results/stream_*.csv, stream.png
#   5. renders bench/plot.gp -> results/throughput.png, and writes results/machine.txt
#      (CPU, memory, PostgreSQL version and settings, commit, date) and results/summary.txt.
#
# Environment (defaults in brackets):
#   OUT            results directory [bench/results]; raw files only, all small
#   PGDIR          the benchmark cluster's directory, wiped and re-created [/tmp/bench-pg]
#   PHASES         which phases to run [main sync sweep daemons finished pooler rss backlog http
#                  exec limits unclaimable; "stream" on
#                  request]; a partial run
#                  replaces only its phases' files and appends to load.csv and machine.txt
#   JOBS           jobs of the main and sync runs [100000]
#   FINISHED_ROWS  done rows for the main run's second burn-down [5000000]
#   SWEEP          concurrencies [1 2 4 8 16 32 64 128 256]
#   SWEEP_JOBS     most jobs per sweep point [50000]; SWEEP_JOBS_PER_WORKER [2000]
#   SWEEP_PASSES   passes over all the concurrencies [2]; the chart plots the best
#   DAEMON_JOBS    jobs per multi-daemon run [100000]; REPEAT runs each [2]
#   POOLER_JOBS    jobs per pooler run [200000]
#   RSS_JOBS       jobs of the RSS run [1000000]
#   UNCLAIMABLE_JOBS  jobs per unclaimable-rows run [20000 50000]; UNCLAIMABLE_ROWS [200000]
#   PENDING_ROWS   the backlog phase's backlog [10000000]; BACKLOG_PASSES [5]
#   STREAM_SECONDS length of each stream run [600]; STREAM_FRACTIONS [0.5 0.9]
#   QUICK=1        small everything: a smoke test of the scripts, not a measurement
#   SKIP_BUILD=1   use build/release/pgjobd as it is
set -euo pipefail

cd "$(dirname "$0")/.."
if [[ $EUID -ne 0 ]]; then
  echo "bench/run.sh: run as root (the benchmark PostgreSQL runs as user postgres)" >&2
  exit 2
fi

out=${OUT:-bench/results}
pgdir=${PGDIR:-/tmp/bench-pg}
all_phases="main sync sweep daemons finished pooler rss backlog http exec limits unclaimable"
phases=${PHASES:-$all_phases}
stream_fractions=${STREAM_FRACTIONS:-0.5 0.9}
if [[ "${QUICK:-0}" == 1 ]]; then
  jobs=${JOBS:-10000} finished_rows=${FINISHED_ROWS:-200000}
  sweep=${SWEEP:-1 4 16 64 256} sweep_jobs=${SWEEP_JOBS:-5000}
  sweep_per_worker=${SWEEP_JOBS_PER_WORKER:-500} sweep_passes=${SWEEP_PASSES:-1}
  daemon_jobs=${DAEMON_JOBS:-20000} repeat=${REPEAT:-1} pooler_jobs=${POOLER_JOBS:-20000}
  rss_jobs=${RSS_JOBS:-100000} rss_batch=20000 http_jobs=5000 exec_jobs=500
  stream_seconds=${STREAM_SECONDS:-30} limit_jobs=5000 limit_passes=1
  unclaimable_jobs=${UNCLAIMABLE_JOBS:-5000} unclaimable_rows=${UNCLAIMABLE_ROWS:-20000}
  pending_rows=${PENDING_ROWS:-500000} backlog_passes=${BACKLOG_PASSES:-1}
  stream_seconds=${STREAM_SECONDS:-30}
  main_extra=(--latency-jobs 200 --idle-seconds 5)
else
  jobs=${JOBS:-100000} finished_rows=${FINISHED_ROWS:-5000000}
  sweep=${SWEEP:-1 2 4 8 16 32 64 128 256} sweep_jobs=${SWEEP_JOBS:-50000}
  sweep_per_worker=${SWEEP_JOBS_PER_WORKER:-2000} sweep_passes=${SWEEP_PASSES:-2}
  daemon_jobs=${DAEMON_JOBS:-100000} repeat=${REPEAT:-2} pooler_jobs=${POOLER_JOBS:-200000}
  rss_jobs=${RSS_JOBS:-1000000} rss_batch=100000 http_jobs=100000 exec_jobs=5000
  stream_seconds=${STREAM_SECONDS:-600} limit_jobs=200000 limit_passes=3
  unclaimable_jobs=${UNCLAIMABLE_JOBS:-20000 50000} unclaimable_rows=${UNCLAIMABLE_ROWS:-200000}
  pending_rows=${PENDING_ROWS:-10000000} backlog_passes=${BACKLOG_PASSES:-5}
  stream_seconds=${STREAM_SECONDS:-600}
  main_extra=()
fi

# The cluster directory is wiped: refuse anything that is not a previous benchmark cluster.
if [[ -e "$pgdir" && ! -f "$pgdir/data/PG_VERSION" && -n "$(ls -A "$pgdir" 2>/dev/null)" ]]; then
  echo "bench/run.sh: $pgdir exists and is not a cluster made by pg-cluster.sh; set PGDIR" >&2
  exit 2
fi

work=$(mktemp -d /tmp/pgjobd-bench.XXXXXX)
# The pooler phase's PgBouncer runs as postgres, which cannot enter $work (mode 700).
bouncer_dir=${pgdir%/}-pgbouncer
started_pg=0
# shellcheck disable=SC2317  # (called from traps)
cleanup() {
  scripts/pgbouncer.sh stop "$bouncer_dir" >/dev/null 2>&1 || true
  if ((started_pg)); then
    scripts/pg-cluster.sh stop "$pgdir" || true
    echo "bench/run.sh: stopped the benchmark PostgreSQL in $pgdir" >&2
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

log() { echo "bench/run.sh: $*" >&2; }
# shellcheck source=bench/lib.sh
source bench/lib.sh

# 1, 2: packages and the binary.
scripts/install-deps.sh --with-bench
if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
  cmake --preset release >/dev/null
  cmake --build --preset release --target pgjobd
fi
cp build/release/pgjobd "$work/pgjobd"
bin=$work/pgjobd
export PGJOBD_BIN=$bin

# 3: a fresh durable cluster.
scripts/pg-cluster.sh stop "$pgdir"
rm -rf "$pgdir"
started_pg=1
# No --fast: fsync and synchronous_commit on. pg-cluster.sh picks a random free port; on
# a busy machine another process may take it first, so try again a couple of times.
url=""
for attempt in 1 2 3; do
  if url=$(scripts/pg-cluster.sh start "$pgdir"); then break; fi
  url=""
  log "PostgreSQL did not start (attempt $attempt): $(tail -2 "$pgdir/server.log" 2>/dev/null)"
done
[[ -n "$url" ]] || exit 1
export DATABASE_URL=$url PGJOBD_DATABASE_URL=$url
unset PGJOBD_CONFIG
log "PostgreSQL at $url"
export PGOPTIONS="-c client_min_messages=warning"

mkdir -p "$out"
partial=0
if [[ "$phases" != "$all_phases" && -f "$out/machine.txt" ]]; then partial=1; fi
settings=$(sql -F= -c "SELECT name, current_setting(name) FROM pg_settings WHERE name IN ('fsync',
  'synchronous_commit', 'full_page_writes', 'wal_sync_method', 'shared_buffers',
  'max_wal_size', 'checkpoint_timeout') ORDER BY name")
for must in fsync=on synchronous_commit=on full_page_writes=on; do
  grep -qx "$must" <<<"$settings" || { log "expected $must in the benchmark cluster"; exit 1; }
done
pg_version=$(sql -c "SHOW server_version")
cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ -n "$(git status --porcelain -- src include sql CMakeLists.txt 2>/dev/null)" ]]; then
  commit="$commit (with uncommitted changes to src/include/sql)"
fi
machine_txt=$out/machine.txt
if ((partial)); then
  machine_txt=$work/machine.txt
fi
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  built=$(date -u -r build/release/pgjobd '+%Y-%m-%d %H:%M UTC')
  if [[ "${SKIP_BUILD:-0}" == 1 ]]; then
    echo "pgjobd: $("$bin" --version), release binary built $built (SKIP_BUILD=1: it may predate HEAD $commit)"
  else
    echo "pgjobd: $("$bin" --version), release build of HEAD $commit, $built"
  fi
  echo "nproc: $(nproc)"
  echo "cpu: $cpu"
  echo "memory (free -g):"
  free -g | sed 's/^/  /'
  echo "kernel: $(uname -r)"
  echo "postgresql: $pg_version on the same host, over TCP to 127.0.0.1; settings:"
  # shellcheck disable=SC2001
  sed 's/^/  /' <<<"$settings"
  echo "quick: ${QUICK:-0}"
  quick_note=""
  if [[ "${QUICK:-0}" == 1 ]]; then quick_note=" (QUICK=1 smoke run, not a measurement)"; fi
  echo "caption: $(nproc) vCPU $cpu, PostgreSQL ${pg_version%% *} on the same host, fsync and synchronous_commit on, $(date -u '+%Y-%m-%d')$quick_note"
} >"$machine_txt"
if ((partial)); then
  { echo; echo "--- partial run, PHASES=\"$phases\":"; grep -v '^caption: ' "$machine_txt"; } >>"$out/machine.txt"
fi

# The disk probe (bench/lib.sh), next to the cluster's WAL.
export DSYNC_PROBE=$pgdir/dsync-probe
dsync_probe_init "$DSYNC_PROBE"
load_csv=$out/load.csv
if ((!partial)) || [[ ! -f "$load_csv" ]]; then
  echo "phase,when,load1,load5,load15,dsync_8k_write_ms" >"$load_csv"
fi
mark() {
  local line
  line="$1,$2,$(cut -d' ' -f1-3 /proc/loadavg | tr ' ' ,),$(dsync_ms)"
  echo "$line" >>"$load_csv"
  log "load: $line"
}
wants() { [[ " $phases " == *" $1 "* ]]; }
# A number from `pgjobd bench --json` (one key per line); "" for null.
jnum() { sed -n "s/^ *\"$2\": *\([-0-9.e]*\),\{0,1\}$/\1/p" "$1" | head -1; }
# A percentile of one latency object: jlat FILE latency_ms p99.
jlat() { sed -n "/\"$2\": {/,/}/s/^ *\"$3\": *\([-0-9.e]*\),\{0,1\}$/\1/p" "$1" | head -1; }

# 4: the phases.
if wants main; then
  log "main: pgjobd bench --jobs $jobs --finished-rows $finished_rows (a few minutes)"
  mark main before
  "$bin" bench --json --jobs "$jobs" --finished-rows "$finished_rows" "${main_extra[@]}" \
    >"$out/bench.json" 2>"$out/bench.log"
  mark main after
  cat "$out/bench.json" >&2
fi

if wants sync; then
  log "sync: pgjobd bench --jobs $jobs with synchronous claims"
  printf 'database: {synchronous_claims: true}\n' >"$work/sync.yaml"  # url: from the env
  mark sync before
  "$bin" bench -c "$work/sync.yaml" --json --jobs "$jobs" "${main_extra[@]}" \
    >"$out/bench_sync.json" 2>"$out/bench_sync.log"
  mark sync after
  cat "$out/bench_sync.json" >&2
fi

if wants sweep; then
  echo "pass,concurrency,jobs,throughput_jobs_per_s,ceiling_jobs_per_s,ratio,cpu_s_per_10k_jobs,queries_per_job,peak_rss_mb,load1_before,dsync_8k_write_ms_before" \
    >"$out/sweep.csv"
  mark sweep before
  # Whole passes over the concurrencies, so that a burst of load hits different points in
  # each pass; the chart takes the best of the passes for each point.
  for ((pass = 1; pass <= sweep_passes; pass++)); do
    for c in $sweep; do
      n=$((c * sweep_per_worker < sweep_jobs ? c * sweep_per_worker : sweep_jobs))
      log "sweep: pass $pass, concurrency $c, $n jobs"
      load1=$(cut -d' ' -f1 /proc/loadavg)
      dsync=$(dsync_ms)
      "$bin" bench --no-latency --jobs "$n" --concurrency "$c" --json \
        >"$work/sweep-$c.json" 2>"$work/sweep-$c.log" || { cat "$work/sweep-$c.log" >&2; exit 1; }
      f=$work/sweep-$c.json
      echo "$pass,$c,$n,$(jnum "$f" throughput_jobs_per_s),$(jnum "$f" ceiling_jobs_per_s),$(jnum "$f" ratio),$(jnum "$f" cpu_s_per_10k_jobs),$(jnum "$f" queries_per_job),$(jnum "$f" peak_rss_mb),$load1,$dsync" |
        awk -F, -v OFS=, '{ for (i = 4; i <= 9; i++) $i = sprintf(i <= 5 ? "%.0f" : "%.3f", $i); print }' |
        tee -a "$out/sweep.csv" >&2
    done
  done
  mark sweep after
fi

if wants daemons; then
  log "daemons: 1, 2 and 4 daemons, $daemon_jobs jobs, $repeat run(s) each"
  mark daemons before
  JOBS=$daemon_jobs REPEAT=$repeat OUT=$out/daemons.csv bench/daemons.sh
  mark daemons after
fi

if wants finished; then
  log "finished: one daemon, $daemon_jobs jobs, with 0 and with $finished_rows done rows"
  mark finished before
  JOBS=$daemon_jobs REPEAT=$repeat DAEMONS=1 MODES=each FINISHED="0 $finished_rows" \
    OUT=$out/finished_rows.csv bench/daemons.sh
  mark finished after
fi

if wants pooler; then
  # Twice daemon_jobs: a run of 100,000 lasted about a second, of which the start and the
  # 50 ms poll are a part; one daemon's ratio moved from 0.87 to 0.95 between passes
  # (bench/README.md, "Through PgBouncer").
  log "pooler: 1, 2, 4 and 8 daemons, $pooler_jobs jobs, direct and through PgBouncer"
  mark pooler before
  pooled=$(scripts/pgbouncer.sh start "$bouncer_dir" "$url" 20 | tail -1)
  echo "pass,route,mode,daemons,workers_per_daemon,total_workers,jobs,elapsed_s,jobs_per_s,elapsed_db_s,jobs_per_daemon,max_peak_rss_mb,load1_before,dsync_8k_write_ms_before,finished_rows,stale_stats,first_job_s" >"$out/pooler.csv"
  for ((pass = 1; pass <= repeat; pass++)); do
    for route in direct pgbouncer; do
      if [[ "$route" == direct ]]; then target=$url pooler=none; else target=$pooled pooler=transaction; fi
      JOBS=$pooler_jobs REPEAT=1 DAEMONS="1 2 4 8" MODES=each DAEMON_URL=$target POOLER=$pooler \
        OUT="$work/pooler_run.csv" bench/daemons.sh
      tail -n +2 "$work/pooler_run.csv" | sed "s/^1,/$pass,$route,/" >>"$out/pooler.csv"
    done
  done
  scripts/pgbouncer.sh stop "$bouncer_dir"
  mark pooler after
fi

if wants rss; then
  log "rss: one daemon over $rss_jobs jobs"
  mark rss before
  TOTAL=$rss_jobs BATCH=$rss_batch OUT=$out/rss.csv bench/rss.sh
  mark rss after
fi

if wants backlog; then
  log "backlog: the first $jobs of $pending_rows pending jobs against $jobs alone, $backlog_passes passes"
  mark backlog before
  "$bin" bench --json --no-latency --jobs "$jobs" --pending-rows "$pending_rows" \
    --backlog-passes "$backlog_passes" >"$out/backlog.json" 2>"$out/backlog.log"
  mark backlog after
  b=$out/backlog.json
  echo "concurrency,jobs,pending_rows,small_backlog_jobs_per_s,backlog_jobs_per_s,backlog_ratio,backlog_ratio_min,backlog_ratio_max,small_backlog_cpu_ms_per_job,backlog_cpu_ms_per_job,backlog_cpu_ratio,load1" >"$out/backlog.csv"
  echo "$(jnum "$b" concurrency),$(jnum "$b" jobs),$(jnum "$b" pending_rows),$(jnum "$b" small_backlog_jobs_per_s),$(jnum "$b" backlog_jobs_per_s),$(jnum "$b" backlog_ratio),$(jnum "$b" backlog_ratio_min),$(jnum "$b" backlog_ratio_max),$(jnum "$b" small_backlog_cpu_ms_per_job),$(jnum "$b" backlog_cpu_ms_per_job),$(jnum "$b" backlog_cpu_ratio),$(cut -d' ' -f1 /proc/loadavg)" >>"$out/backlog.csv"
  grep -h "backlog pass" "$out/backlog.log" >&2 || true
fi

if wants http; then
  log "http: one daemon POSTing $http_jobs jobs to a keep-alive server, and noop"
  mark http before
  JOBS=$http_jobs REPEAT=$repeat OUT=$out/http.csv bench/http.sh
  mark http after
fi

if wants exec; then
  log "exec: one daemon running $exec_jobs jobs with /bin/true, and xargs -P 64"
  mark exec before
  JOBS=$exec_jobs REPEAT=$repeat OUT=$out/exec.csv bench/exec.sh
  mark exec after
fi

if wants limits; then
  log "limits: one daemon, $limit_jobs jobs under each limit and none, then held partitions"
  mark limits before
  JOBS=$limit_jobs REPEAT=$limit_passes HELD_ROUNDS=$limit_passes OUT=$out/limits.csv \
    bench/limits.sh >"$out/limits.txt"
  mark limits after
  cat "$out/limits.txt" >&2
fi

if wants unclaimable; then
  log "unclaimable: $unclaimable_rows due rows no claim may take, against none, $unclaimable_jobs jobs"
  mark unclaimable before
  echo "jobs,rows,rows_kind,prefetch,ratio,anchor,load1_before" >"$out/unclaimable.csv"
  for n in $unclaimable_jobs; do
    load1=$(cut -d' ' -f1 /proc/loadavg)
    f=$work/unclaimable-$n.json
    "$bin" bench --no-latency --jobs "$n" --unclaimable-rows "$unclaimable_rows" --json \
      >"$f" 2>"$work/unclaimable-$n.log" || { cat "$work/unclaimable-$n.log" >&2; exit 1; }
    for kind in unserved_type paused_queue; do
      key=unclaimable_ratio
      [[ "$kind" == paused_queue ]] && key=paused_rows_ratio
      for prefetch in on off; do
        suffix=prefetch
        [[ "$prefetch" == off ]] && suffix=no_prefetch
        echo "$n,$unclaimable_rows,$kind,$prefetch,$(jnum "$f" "${key}_$suffix"),>= 0.8,$load1" |
          tee -a "$out/unclaimable.csv" >&2
      done
    done
  done
  mark unclaimable after
fi

if wants stream; then
  log "stream: single-row INSERTs at ${stream_fractions} of the burst rate, ${stream_seconds} s each"
  mark stream before
  rm -f "$out"/stream_*.csv "$out"/stream_*_pgbench.log
  DURATION=$stream_seconds FRACTIONS=$stream_fractions OUT=$out bench/stream.sh
  rates=$(awk -F, 'NR > 1 { printf "%s%s", sep, $2; sep = " " }' "$out/stream_summary.csv")
  gnuplot -e "results='$out'; fractions='$stream_fractions'; rates='$rates'" bench/stream.gp
  mark stream after
fi

# 5: chart and summary. Best of the runs for each point: noise on a shared machine (CPU
# and, above all, disk flushes of other tenants) only ever slows a run down.
if [[ -f "$out/sweep.csv" ]]; then
  awk -F, 'NR > 1 { c = $2; if (!(c in seen)) { seen[c] = 1; cs[++n] = c }
                    if ($4 + 0 > t[c] + 0) t[c] = $4; if ($5 + 0 > ce[c] + 0) ce[c] = $5 }
    END { print "concurrency,best_throughput_jobs_per_s,best_ceiling_jobs_per_s"
          for (i = 1; i <= n; i++) print cs[i] "," t[cs[i]] "," ce[cs[i]] }' \
    "$out/sweep.csv" >"$out/sweep_best.csv"
fi
if [[ -f "$out/daemons.csv" ]]; then
  # One daemon with 64 workers is the same setup in both modes: its runs count for both.
  awk -F, 'NR > 1 { k = $3; if (!(k in seen)) { seen[k] = 1; ks[++n] = k }
                    m = (k == 1) ? "each split" : $2; split(m, ms, " ")
                    for (j in ms) if ($8 + 0 > best[ms[j], k] + 0) best[ms[j], k] = $8 }
    END { print "daemons,each_best_jobs_per_s,split_best_jobs_per_s"
          for (i = 1; i <= n; i++) print ks[i] "," best["each", ks[i]] + 0 "," best["split", ks[i]] + 0 }' \
    "$out/daemons.csv" >"$out/daemons_best.csv"
fi
if [[ -f "$out/pooler.csv" ]]; then
  awk -F, 'NR > 1 { k = $4; if (!(k in seen)) { seen[k] = 1; ks[++n] = k }
                    if ($9 + 0 > best[$2, k] + 0) best[$2, k] = $9 }
    END { print "daemons,direct_best_jobs_per_s,pgbouncer_best_jobs_per_s"
          for (i = 1; i <= n; i++) print ks[i] "," best["direct", ks[i]] + 0 "," best["pgbouncer", ks[i]] + 0 }' \
    "$out/pooler.csv" >"$out/pooler_best.csv"
fi
if [[ -f "$out/sweep_best.csv" && -f "$out/daemons_best.csv" ]]; then
  gnuplot -e "results='$out'" bench/plot.gp
  log "chart: $out/throughput.png"
fi

{
  echo "# $(sed -n 's/^caption: //p' "$out/machine.txt")"
  if [[ -f "$out/bench.json" ]]; then
    b=$out/bench.json
    echo "main run ($(jnum "$b" jobs) jobs, concurrency $(jnum "$b" concurrency)):"
    echo "  throughput $(jnum "$b" throughput_jobs_per_s) jobs/s, ceiling $(jnum "$b" ceiling_jobs_per_s), ratio $(jnum "$b" ratio)"
    echo "  with $(jnum "$b" finished_rows) done rows: $(jnum "$b" throughput_with_finished_rows_jobs_per_s) jobs/s (ratio $(jnum "$b" finished_rows_ratio))"
    echo "  latency from the INSERT's commit p50 $(jlat "$b" latency_ms p50) ms, p95 $(jlat "$b" latency_ms p95) ms, p99 $(jlat "$b" latency_ms p99) ms"
    echo "  latency from sending the INSERT p50 $(jlat "$b" latency_from_send_ms p50) ms, p95 $(jlat "$b" latency_from_send_ms p95) ms, p99 $(jlat "$b" latency_from_send_ms p99) ms"
    echo "  idle $(jnum "$b" idle_queries_per_s) queries/s, $(jnum "$b" idle_cpu_percent) % CPU"
    echo "  enqueue $(jnum "$b" enqueue_jobs_per_s) jobs/s with the trigger, $(jnum "$b" enqueue_no_trigger_jobs_per_s) without"
    echo "  peak RSS $(jnum "$b" peak_rss_mb) MB, $(jnum "$b" queries_per_job) queries/job, $(jnum "$b" cpu_s_per_10k_jobs) CPU s per 10k jobs"
  fi
  if [[ -f "$out/bench_sync.json" ]]; then
    b=$out/bench_sync.json
    echo "synchronous claims ($(jnum "$b" jobs) jobs, concurrency $(jnum "$b" concurrency)):"
    echo "  throughput $(jnum "$b" throughput_jobs_per_s) jobs/s, ceiling $(jnum "$b" ceiling_jobs_per_s), ratio $(jnum "$b" ratio)"
    echo "  latency from the INSERT's commit p50 $(jlat "$b" latency_ms p50) ms, p95 $(jlat "$b" latency_ms p95) ms, p99 $(jlat "$b" latency_ms p99) ms"
    echo "  latency from sending the INSERT p50 $(jlat "$b" latency_from_send_ms p50) ms, p95 $(jlat "$b" latency_from_send_ms p95) ms, p99 $(jlat "$b" latency_from_send_ms p99) ms"
  fi
  if [[ -f "$out/backlog.json" ]]; then
    b=$out/backlog.json
    echo "backlog: the first $(jnum "$b" jobs) of $(jnum "$b" pending_rows) pending jobs, best pass $(jnum "$b" backlog_jobs_per_s) jobs/s; anchor, $(jnum "$b" jobs) alone: $(jnum "$b" small_backlog_jobs_per_s) jobs/s"
    echo "  ratio $(jnum "$b" backlog_ratio) (median of the passes; $(jnum "$b" backlog_ratio_min)-$(jnum "$b" backlog_ratio_max)), goal >= 0.8"
    echo "  CPU per job $(jnum "$b" backlog_cpu_ms_per_job) ms against $(jnum "$b" small_backlog_cpu_ms_per_job) alone, ratio $(jnum "$b" backlog_cpu_ratio) (alone / backlog, median of the passes)"
  fi
  for f in sweep.csv daemons.csv finished_rows.csv pooler.csv rss.txt http.csv exec.csv limits.txt \
    unclaimable.csv stream_summary.csv; do
    if [[ -f "$out/$f" ]]; then echo "${f%.*}:"; sed 's/^/  /' "$out/$f"; fi
  done
  echo "load (1, 5, 15 min):"
  sed 's/^/  /' "$load_csv"
} >"$out/summary.txt"
cat "$out/summary.txt"
