#!/usr/bin/env bash
# The http handler's throughput, measured from outside like the noop runs: a real
# `pgjobd run` (64 workers) POSTs every job to a local keep-alive server
# (bench/http_sink.js, node: answers 204 at once and counts the TCP connections), and the
# same binary runs the same jobs with `builtin: noop` in the same pass for comparison.
#
#   DATABASE_URL=postgresql://... bench/http.sh
#
# It reuses bench/daemons.sh (one daemon, timed from just before its start to the poll
# that finds no job left). Environment:
#   DATABASE_URL  the database (required); daemons.sh's scratch schema in it is recreated
#   BINS          binaries to compare, in this order in every pass (default $PGJOBD_BIN,
#                 else build/release/pgjobd); e.g. "/tmp/old/pgjobd build/release/pgjobd"
#                 for a before-and-after in one run
#   JOBS          jobs per run (default 20000)
#   REPEAT        passes (default 2); each pass runs every binary with http, then with noop
#   OUT           CSV (default bench/results/http.csv): pass, binary, handler, jobs, jobs/s,
#                 TCP connections the sink accepted, connections per job, load average before
#
# Needs node (bench/peers uses it too; `scripts/install-deps.sh --with-bench`).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
: "${DATABASE_URL:?http.sh: set DATABASE_URL}"  # daemons.sh's
read -r -a bins <<<"${BINS:-${PGJOBD_BIN:-build/release/pgjobd}}"
jobs=${JOBS:-20000}
repeat=${REPEAT:-2}
out=${OUT:-bench/results/http.csv}
command -v node >/dev/null || { echo "http.sh: needs node (scripts/install-deps.sh --with-bench)" >&2; exit 2; }

work=$(mktemp -d /tmp/pgjobd-http.XXXXXX)
sink_pid=""
# shellcheck disable=SC2317  # (called from the trap)
cleanup() {
  if [[ -n "$sink_pid" ]]; then kill "$sink_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
bench_frame

node bench/http_sink.js "$work/port" &
sink_pid=$!
for _ in $(seq 100); do [[ -s "$work/port" ]] && break; sleep 0.05; done
[[ -s "$work/port" ]] || { echo "http.sh: the sink did not start" >&2; exit 1; }
sink="http://127.0.0.1:$(cat "$work/port")"

sink_stat() { curl -sf "$sink/stats" | sed -E "s/.*\"$1\":([0-9]+).*/\\1/"; }

mkdir -p "$(dirname "$out")"
echo "pass,binary,handler,jobs,jobs_per_s,connections,connections_per_job,load1_before" >"$out"
for ((r = 1; r <= repeat; r++)); do
  for bin in "${bins[@]}"; do
    for handler in http noop; do
      if [[ "$handler" == http ]]; then spec="{http: {url: '$sink/job'}}"; else spec="{builtin: noop}"; fi
      curl -sf -X POST "$sink/reset"
      load1=$(cut -d' ' -f1 /proc/loadavg)
      HANDLER="$spec" PGJOBD_BIN="$bin" JOBS="$jobs" DAEMONS=1 MODES=each REPEAT=1 \
        OUT="$work/run.csv" bench/daemons.sh
      rate=$(tail -1 "$work/run.csv" | cut -d, -f8)
      requests=$(sink_stat requests)
      connections=$(sink_stat connections)
      if [[ "$handler" == http && "$requests" != "$jobs" ]]; then
        echo "http.sh: the sink saw $requests requests for $jobs jobs" >&2; exit 1
      fi
      row=$(awk -v r="$r" -v b="$bin" -v h="$handler" -v j="$jobs" -v rate="$rate" -v c="$connections" \
        -v l="$load1" 'BEGIN { printf "%d,%s,%s,%d,%s,%d,%.4f,%s", r, b, h, j, rate, c, c / j, l }')
      echo "$row" >>"$out"
      echo "http.sh: $row" >&2
    done
  done
done
