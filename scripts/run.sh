#!/usr/bin/env bash
# Quick start: builds pgjobd and runs it in the foreground with a few sample jobs.
#
#   scripts/run.sh [ARGS...]          ARGS go to `pgjobd run`
#
# Run as root on Debian 12 from anywhere in the repository. It
#   1. installs the build dependencies (scripts/install-deps.sh; quick when present);
#   2. builds the release preset (quick when already built);
#   3. uses the database in $PGJOBD_DATABASE_URL or $DATABASE_URL; when neither is set it
#      starts a throwaway PostgreSQL 15 in a temp dir, stopped and removed on exit;
#   4. writes a demo config (handlers greet, flaky and ping; metrics on 127.0.0.1:9464;
#      log level debug so every finished job shows), or uses yours: PGJOBD_CONFIG=FILE;
#   5. migrates, enqueues sample jobs (demo config only) and runs the daemon.
# Ctrl-C or SIGTERM drains the daemon; a second one stops waiting for running jobs.
# The script exits with the daemon's exit code.
#
# PGJOBD_RUN_METRICS_LISTEN=HOST:PORT moves the demo config's HTTP endpoint (default
# 127.0.0.1:9464), e.g. when another pgjobd already holds the port.
set -euo pipefail

user_config=""
if [[ -n "${PGJOBD_CONFIG:-}" ]]; then
  user_config=$(realpath -m -- "$PGJOBD_CONFIG")  # before the cd below
  [[ -r "$user_config" ]] || { echo "run.sh: cannot read PGJOBD_CONFIG=$PGJOBD_CONFIG" >&2; exit 2; }
fi
cd "$(dirname "$0")/.."
repo=$(pwd)

given_url=${PGJOBD_DATABASE_URL:-${DATABASE_URL:-}}
if [[ $EUID -ne 0 && -z "$given_url" ]]; then
  echo "run.sh: run as root (the throwaway PostgreSQL runs as user postgres), or set DATABASE_URL" >&2
  exit 2
fi

workdir=""
pgdir=""
daemon_pid=""
# shellcheck disable=SC2317  # (called from traps)
cleanup() {
  if [[ -n "$daemon_pid" ]] && kill -0 "$daemon_pid" 2>/dev/null; then
    kill -KILL "$daemon_pid" 2>/dev/null || true  # only when this script itself failed
  fi
  if [[ -n "$pgdir" ]]; then
    scripts/pg-cluster.sh stop "$pgdir" || true
    echo "run.sh: stopped the throwaway PostgreSQL" >&2
  fi
  if [[ -n "$workdir" ]]; then rm -rf "$workdir"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# 1, 2: dependencies and build.
scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j"$(nproc)" --target pgjobd  # the tests are built by scripts/test.sh
bin=$repo/build/release/pgjobd

workdir=$(mktemp -d /tmp/pgjobd-run.XXXXXX)
chmod 711 "$workdir"  # the postgres user must reach $workdir/pg

# 3: the database.
if [[ -n "$given_url" ]]; then
  url=$given_url
else
  pgdir=$workdir/pg
  url=$(scripts/pg-cluster.sh start "$pgdir")
  export DATABASE_URL=$url
  echo "run.sh: started a throwaway PostgreSQL 15 at $url" >&2
fi

# 4: the config.
if [[ -n "$user_config" ]]; then
  config=$user_config
else
  config=$workdir/pgjobd.yaml
  yaml_url=${url//\'/\'\'}  # a YAML single-quoted string
  (
    umask 077  # the URL may hold a password
    cat >"$config" <<EOF
# Written by scripts/run.sh for one demo run; config/pgjobd.yaml documents every key.
database:
  url: '$yaml_url'
  schema: public
  migrate_on_start: true
worker:
  concurrency: 4
  queues:
    default: {}
poll: {min_interval: 50ms, max_interval: 5s, listen_notify: true}
retry: {base: 1s, max_delay: 10m, jitter: 0.1}
lease: {duration: 30s}
shutdown: {timeout: 30s}
retention: {done: 24h, dead: 7d}
metrics: {listen: '${PGJOBD_RUN_METRICS_LISTEN:-127.0.0.1:9464}'}
# debug: "claimed job N" and "job N done" lines show each job's progress.
log: {level: debug, format: text}
handlers:
  # Reads the payload on stdin and takes a moment (its stdout is discarded).
  greet:
    exec: [/bin/sh, -c, 'cat; echo; sleep 0.5']
    timeout: 30s
  # Fails its first attempt (retried after retry.base), succeeds on the second.
  flaky:
    exec: [/bin/sh, -c, 'if [ "\$PGJOBD_JOB_ATTEMPT" -lt 2 ]; then echo "simulated failure on attempt \$PGJOBD_JOB_ATTEMPT" >&2; exit 1; fi']
    timeout: 30s
  ping: {builtin: noop}
EOF
  )
fi

# 5: schema, sample jobs, daemon.
"$bin" migrate -c "$config"
if [[ -z "$user_config" ]]; then
  enqueue() {
    local id
    id=$("$bin" enqueue -c "$config" "$@")
    echo "run.sh: enqueued job $id: $*" >&2
  }
  enqueue greet '{"name":"ada"}'
  enqueue greet '{"name":"grace"}' --priority 10
  enqueue greet '{"name":"linus"}' --run-at "$(date -u -d '+10 seconds' '+%Y-%m-%d %H:%M:%SZ')"
  enqueue flaky '{}'
  enqueue ping
fi

{
  echo
  echo "run.sh: starting pgjobd (Ctrl-C drains it). Meanwhile, in another shell in $repo:"
  echo "  export PGJOBD_CONFIG=$config${pgdir:+ DATABASE_URL=$url}"
  if [[ -z "$user_config" ]]; then
    metrics_port=${PGJOBD_RUN_METRICS_LISTEN:-127.0.0.1:9464}
    cat <<EOF
  psql "\$DATABASE_URL" -c "INSERT INTO jobs (type, payload) VALUES ('greet', '{\"name\":\"ada\"}')"
  psql "\$DATABASE_URL" -c "SELECT id, type, status, attempts, last_error FROM jobs ORDER BY id"
  build/release/pgjobd stats -c "\$PGJOBD_CONFIG"
  curl -s localhost:${metrics_port##*:}/metrics | grep pgjobd_jobs_total
EOF
  else
    echo "  build/release/pgjobd stats -c \"\$PGJOBD_CONFIG\""
  fi
  echo
} >&2

if [[ -z "$pgdir" && "$config" == "$user_config" ]]; then
  # Nothing to clean up afterwards: become the daemon.
  rm -rf "$workdir"
  trap - EXIT
  exec "$bin" run -c "$config" "$@"
fi

# The daemon runs in a session of its own so that a Ctrl-C reaches it once, through the
# forwarding below, and this shell stays to stop PostgreSQL when the daemon has exited.
# shellcheck disable=SC2317
forward() { kill -TERM "$daemon_pid" 2>/dev/null || true; }
trap forward INT TERM HUP
setsid "$bin" run -c "$config" "$@" &
daemon_pid=$!
while kill -0 "$daemon_pid" 2>/dev/null; do wait "$daemon_pid" || true; done
status=0
wait "$daemon_pid" || status=$?
daemon_pid=""
exit "$status"
