#!/usr/bin/env bash
# The exec handler against the machine's own cost of starting processes (issue 44: at
# least 0.95 of `xargs -P <concurrency>` running the same command in the same run). Each
# pass runs, alternated:
#   xargs   `seq JOBS | xargs -P 64 -n 1 COMMAND`: as many processes, 64 at a time, timed
#           from its start to its exit;
#   pgjobd  a real `pgjobd run` (64 workers) over JOBS jobs with the handler
#           `{exec: [COMMAND]}` (bench/daemons.sh, one daemon: start-up included, timed to
#           the poll that finds no job left), which runs each job's command in its own
#           process group under the orphan reaper, the payload on its stdin.
#
#   DATABASE_URL=postgresql://... bench/exec.sh
#
# Environment:
#   DATABASE_URL  the database (required); daemons.sh's scratch schema in it is recreated
#   PGJOBD_BIN    the binary (default build/release/pgjobd)
#   JOBS          jobs (and xargs' processes) per run (default 5000)
#   REPEAT        passes (default 2)
#   COMMAND       the command, one word (default /bin/true)
#   OUT           CSV (default bench/results/exec.csv): pass, pgjobd's jobs/s, xargs'
#                 processes/s, their ratio, the load average before the pass
set -euo pipefail
cd "$(dirname "$0")/.."
: "${DATABASE_URL:?exec.sh: set DATABASE_URL}"  # daemons.sh's
bin=${PGJOBD_BIN:-build/release/pgjobd}
jobs=${JOBS:-5000}
repeat=${REPEAT:-2}
command=${COMMAND:-/bin/true}
out=${OUT:-bench/results/exec.csv}
workers=64  # daemons.sh's CONCURRENCY default, and xargs' -P

work=$(mktemp -d /tmp/pgjobd-exec.XXXXXX)
trap 'rm -rf "$work"' EXIT

mkdir -p "$(dirname "$out")"
echo "pass,pgjobd_jobs_per_s,xargs_jobs_per_s,ratio_to_xargs,load1_before" >"$out"
for ((r = 1; r <= repeat; r++)); do
  load1=$(cut -d' ' -f1 /proc/loadavg)
  start=$(date +%s.%N)
  seq "$jobs" | xargs -P "$workers" -n 1 "$command" >/dev/null
  end=$(date +%s.%N)
  xargs_rate=$(awk -v j="$jobs" -v s="$start" -v e="$end" 'BEGIN { printf "%.0f", j / (e - s) }')
  HANDLER="{exec: ['$command']}" PGJOBD_BIN="$bin" JOBS="$jobs" DAEMONS=1 MODES=each REPEAT=1 \
    CONCURRENCY="$workers" OUT="$work/run.csv" bench/daemons.sh >&2
  rate=$(tail -1 "$work/run.csv" | cut -d, -f8)
  row=$(awk -v r="$r" -v a="$rate" -v b="$xargs_rate" -v l="$load1" \
    'BEGIN { printf "%d,%s,%s,%.3f,%s", r, a, b, a / b, l }')
  echo "$row" >>"$out"
  echo "exec.sh: pass $r: pgjobd $rate jobs/s against xargs' $xargs_rate processes/s: $(cut -d, -f4 <<<"$row")" >&2
done
