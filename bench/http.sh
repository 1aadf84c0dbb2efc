#!/usr/bin/env bash
# The http handler's throughput, measured from outside like the noop runs: a real
# `pgjobd run` (64 workers) POSTs every job to a local keep-alive server
# (bench/http_sink.js, node: answers 204 at once and counts the TCP connections); then the
# same again with `retention.done: 0` (handler column "http-done-deleted": each done job
# deleted by its completion instead of written a second time, as graphile-worker does
# with every job that succeeds); then the same jobs with `builtin: noop`; all in the same
# pass, for comparison.
#
#   DATABASE_URL=postgresql://... bench/http.sh
#
# It reuses bench/daemons.sh (one daemon, timed from just before its start to the poll
# that finds no job left). Environment:
#   DATABASE_URL  the database (required); daemons.sh's scratch schema in it is recreated
#   BINS          binaries to compare, in this order in every pass (default $PGJOBD_BIN,
#                 else build/release/pgjobd); e.g. "/tmp/old/pgjobd build/release/pgjobd"
#                 for a before-and-after in one run
#   JOBS          jobs per run (default 100000: about as long as wrk's run; a 20,000-job
#                 run lasts about a second, of which the start (the first job comes 0.03 to
#                 0.08 s after it) and the 50 ms poll are up to a tenth)
#   REPEAT        passes (default 2); each pass runs every binary with http, then with noop
#   OUT           CSV (default bench/results/http.csv): pass, binary, handler, jobs, jobs/s,
#                 TCP connections the sink accepted, connections per job, load average before,
#                 CPU milliseconds per job (the daemon's user + system over its whole run,
#                 start and drain included), for http the jobs/s over wrk's requests/s, then
#                 the sink's CPU milliseconds per request and its busy share (its CPU seconds
#                 over the run's elapsed seconds: near 1 it is the bottleneck, Node's one
#                 thread), and the CPU milliseconds per job of the PostgreSQL backends
#                 serving the daemon (empty for wrk)
#   WRK_SECONDS   how long wrk runs per pass (default 5)
#   EXTRA_YAML    more configuration for every daemon (daemons.sh's; without a retention
#                 section: the done-deleted run adds its own)
#
# Each pass starts with wrk (Debian package `wrk`) against the same sink: as many keep-alive
# connections as the daemon has workers, two threads (the cores), the jobs' body; its row
# has binary "wrk", its requests as jobs and its CPU (user + system, /usr/bin/time) per
# request. The ceiling the issue measures the daemon against (issue 44: >= 0.5 of wrk's
# requests/s, at most 2x its CPU per request). Then wrk again sending the daemon's whole
# request (binary "wrk-same-request"): its header lines too (User-Agent, Accept, the four
# X-Pgjobd-Job-* lines), which the sink parses; the daemon's rows give their jobs/s over
# that one too, in the last column.
#
# Needs node (bench/peers uses it too; `scripts/install-deps.sh --with-bench`) and wrk.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
: "${DATABASE_URL:?http.sh: set DATABASE_URL}"  # daemons.sh's
read -r -a bins <<<"${BINS:-${PGJOBD_BIN:-build/release/pgjobd}}"
jobs=${JOBS:-100000}
repeat=${REPEAT:-2}
out=${OUT:-bench/results/http.csv}
wrk_seconds=${WRK_SECONDS:-5}
workers=64  # daemons.sh's CONCURRENCY default, and wrk's connections
command -v node >/dev/null || { echo "http.sh: needs node (scripts/install-deps.sh --with-bench)" >&2; exit 2; }
command -v wrk >/dev/null || { echo "http.sh: needs wrk (apt-get install wrk)" >&2; exit 2; }

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

# The sink's CPU seconds so far (user + system).
sink_cpu() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.3f", ($14 + $15) / hz }' "/proc/$sink_pid/stat"; }
sink_stat() { curl -sf "$sink/stats" | sed -E "s/.*\"$1\":([0-9]+).*/\\1/"; }

# The jobs' payload as daemons.sh inserts it (jsonb_build_object('n', g)), as wrk's body.
cat >"$work/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"n": 12345}'
wrk.headers["Content-Type"] = "application/json"
LUA
# The same request, with the header lines the daemon sends (src/handlers/http_handler.cpp;
# Host and Content-Length wrk writes itself), values as long as this benchmark's.
cat "$work/post.lua" - >"$work/post_same.lua" <<'LUA'
wrk.headers["Accept"] = "*/*"
wrk.headers["X-Pgjobd-Job-Id"] = "54321"
wrk.headers["X-Pgjobd-Job-Type"] = "noop"
wrk.headers["X-Pgjobd-Job-Queue"] = "default"
wrk.headers["X-Pgjobd-Job-Attempt"] = "1"
wrk.headers["User-Agent"] = "pgjobd/0.1.0"
LUA

mkdir -p "$(dirname "$out")"
echo "pass,binary,handler,jobs,jobs_per_s,connections,connections_per_job,load1_before,cpu_ms_per_job,ratio_to_wrk,sink_cpu_ms_per_job,sink_busy,db_cpu_ms_per_job,ratio_to_wrk_same_request" >"$out"
# wrk with script $1 as row $2 of pass $r: sets wrk_rate and wrk_cpu_ms.
run_wrk() {
  curl -sf -X POST "$sink/reset"
  load1=$(cut -d' ' -f1 /proc/loadavg)
  sink_before=$(sink_cpu)
  /usr/bin/time -f "%U %S" -o "$work/wrk.time" \
    wrk -t2 -c"$workers" -d"${wrk_seconds}s" -s "$1" "$sink/job" >"$work/wrk.out"
  sink_after=$(sink_cpu)
  wrk_requests=$(awk '/requests in/ {print $1}' "$work/wrk.out")
  wrk_rate=$(awk '/^Requests\/sec:/ {print $2}' "$work/wrk.out")
  wrk_cpu_ms=$(awk -v n="$wrk_requests" '{ printf "%.4f", ($1 + $2) * 1000 / n }' "$work/wrk.time")
  connections=$(sink_stat connections)
  row=$(awk -v r="$r" -v b="$2" -v j="$wrk_requests" -v rate="$wrk_rate" -v c="$connections" -v l="$load1" \
    -v cpu="$wrk_cpu_ms" -v sb="$sink_before" -v sa="$sink_after" -v d="$wrk_seconds" \
    'BEGIN { printf "%d,%s,http,%d,%.0f,%d,%.4f,%s,%s,1,%.4f,%.2f,,1", r, b, j, rate, c, c / j, l, cpu, (sa - sb) * 1000 / j, (sa - sb) / d }')
  echo "$row" >>"$out"
  echo "http.sh: $row" >&2
}
for ((r = 1; r <= repeat; r++)); do
  run_wrk "$work/post_same.lua" wrk-same-request
  same_rate=$wrk_rate
  run_wrk "$work/post.lua" wrk
  for bin in "${bins[@]}"; do
    for handler in http http-done-deleted noop; do
      spec="{http: {url: '$sink/job'}}"
      extra=${EXTRA_YAML:-}
      if [[ "$handler" == noop ]]; then spec="{builtin: noop}"; fi
      if [[ "$handler" == http-done-deleted ]]; then extra="${extra:+$extra$'\n'}retention: {done: 0}"; fi
      curl -sf -X POST "$sink/reset"
      load1=$(cut -d' ' -f1 /proc/loadavg)
      rm -f "$work/cpu" "$work/db_cpu"
      sink_before=$(sink_cpu)
      EXTRA_YAML="$extra" HANDLER="$spec" PGJOBD_BIN="$bin" JOBS="$jobs" DAEMONS=1 MODES=each REPEAT=1 \
        CONCURRENCY="$workers" CPU_OUT="$work/cpu" DB_CPU_OUT="$work/db_cpu" OUT="$work/run.csv" bench/daemons.sh
      sink_after=$(sink_cpu)
      rate=$(tail -1 "$work/run.csv" | cut -d, -f8)
      elapsed=$(tail -1 "$work/run.csv" | cut -d, -f7)
      requests=$(sink_stat requests)
      connections=$(sink_stat connections)
      if [[ "$handler" != noop && "$requests" != "$jobs" ]]; then
        echo "http.sh: the sink saw $requests requests for $jobs jobs" >&2; exit 1
      fi
      cpu_ms=$(awk -v j="$jobs" '{ printf "%.4f", $1 * 1000 / j }' "$work/cpu")
      db_cpu_ms=$(awk -v j="$jobs" '{ printf "%.4f", $1 * 1000 / j }' "$work/db_cpu")
      sink_cols=$(awk -v j="$jobs" -v sb="$sink_before" -v sa="$sink_after" -v e="$elapsed" -v h="$handler" \
        'BEGIN { if (h != "noop") printf "%.4f,%.2f", (sa - sb) * 1000 / j, (sa - sb) / e; else printf "," }')
      ratio=""
      same=""
      if [[ "$handler" != noop ]]; then
        ratio=$(awk -v a="$rate" -v b="$wrk_rate" 'BEGIN { printf "%.3f", a / b }')
        same=$(awk -v a="$rate" -v b="$same_rate" 'BEGIN { printf "%.3f", a / b }')
      fi
      row=$(awk -v r="$r" -v b="$bin" -v h="$handler" -v j="$jobs" -v rate="$rate" -v c="$connections" \
        -v l="$load1" -v cpu="$cpu_ms" -v ratio="$ratio" -v sink="$sink_cols" -v db="$db_cpu_ms" -v same="$same" \
        'BEGIN { printf "%d,%s,%s,%d,%s,%d,%.4f,%s,%s,%s,%s,%s,%s", r, b, h, j, rate, c, c / j, l, cpu, ratio, sink, db, same }')
      echo "$row" >>"$out"
      echo "http.sh: $row" >&2
      if [[ "$handler" != noop ]]; then
        echo "http.sh: pass $r $bin: $handler $rate jobs/s = $ratio of wrk's $wrk_rate requests/s ($same of its $same_rate with the daemon's request); CPU per job $cpu_ms ms = $(awk -v a="$cpu_ms" -v b="$wrk_cpu_ms" 'BEGIN { printf "%.2f", a / b }')x wrk's $wrk_cpu_ms ms" >&2
      fi
    done
  done
done
