# shellcheck shell=bash
# Shared by bench/peers/run.sh and bench/peers/stream.sh (sourced, after bench/lib.sh, with
# $here set to bench/peers and the working directory at the repository's top).

# The tools both need, and the peers from npm (pinned by package-lock.json) unless present.
# shellcheck disable=SC2154  # here: the sourcing script's own
peers_require() {  # SCRIPT_NAME
  command -v pgbench >/dev/null || { echo "$1: pgbench not found (postgresql-client)" >&2; exit 1; }
  command -v node >/dev/null || { echo "$1: node not found" >&2; exit 1; }
  if [[ ! -d "$here/node_modules/graphile-worker" || ! -d "$here/node_modules/pg-boss" ]]; then
    (cd "$here" && npm ci --no-audit --no-fund --loglevel=error)
  fi
}

# A temporary directory ($work) holding a private durable cluster (scripts/pg-cluster.sh,
# fsync and synchronous_commit on; its URL in $url) and the disk probe; both go when the
# script ends, with any worker or poll still running.
peers_cluster() {
  work=$(mktemp -d /tmp/pgjobd-peers.XXXXXX)
  chmod 755 "$work"  # the cluster inside runs as postgres
  cluster=$work/cluster
  worker_pid=""
  watch_pid=""
  bench_frame
  url=$(scripts/pg-cluster.sh start "$cluster")
  export DSYNC_PROBE=$work/dsync-probe
  dsync_probe_init "$DSYNC_PROBE"
}
# shellcheck disable=SC2317  # (called from the trap)
cleanup() {
  if [[ -n "${watch_pid:-}" ]]; then kill "$watch_pid" 2>/dev/null || true; fi
  if [[ -n "${worker_pid:-}" ]]; then kill -KILL "$worker_pid" 2>/dev/null || true; fi
  if [[ -n "${cluster:-}" ]]; then scripts/pg-cluster.sh stop "$cluster" || true; fi
  if [[ -n "${work:-}" ]]; then rm -rf "$work"; fi
}

# $systems in the order of pass PASS: reversed in every second pass.
pass_order() {  # PASS
  if (($1 % 2 == 0)); then tr ' ' '\n' <<<"$systems" | tac | tr '\n' ' '; else echo "$systems"; fi
}

now() { date +%s.%N; }
peer() { node "$here/peer.js" "$@"; }

# Polls QUERY (true when no job is left) every 50 ms in one psql session, while $worker_pid
# lives; fails after 600 s.
wait_none_left() {  # QUERY
  local fd all_done deadline=$(($(date +%s) + 600))
  exec {fd}< <(echo "$1 \\watch 0.05" | psql "$url" -qAt 2>/dev/null)
  watch_pid=$!
  while read -r -u "$fd" all_done; do
    [[ "$all_done" == t ]] && break
    if (($(date +%s) > deadline)); then echo "${0##*/}: run timed out" >&2; exit 1; fi
    kill -0 "$worker_pid" 2>/dev/null || { echo "${0##*/}: the worker died:" >&2; cat "$work/worker.log" >&2; exit 1; }
  done
  kill "$watch_pid" 2>/dev/null || true
  exec {fd}<&-
  watch_pid=""
}

stop_worker() {
  kill -TERM "$worker_pid" 2>/dev/null || true
  wait "$worker_pid" || true  # a worker stopped mid-poll may exit non-zero: its jobs are done
  worker_pid=""
  if [[ -s "$work/worker.log" ]]; then echo "${0##*/}: worker output:" >&2; tail -n 20 "$work/worker.log" >&2; fi
  return 0
}

# graphile-worker's schema, new and empty (its own migrations).
graphile_fresh() {
  sql -c "DROP SCHEMA IF EXISTS graphile_worker CASCADE"
  peer graphile-worker setup "$url"
}
