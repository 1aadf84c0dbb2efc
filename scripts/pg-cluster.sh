#!/usr/bin/env bash
# A throwaway PostgreSQL 15 cluster for tests, benchmarks and the quick-start.
#
#   scripts/pg-cluster.sh start DIR [--fast]   prints the DATABASE_URL; writes DIR/url
#   scripts/pg-cluster.sh stop DIR             stops it (safe when it is not running)
#
# PostgreSQL refuses to run as root, so the server runs as the unprivileged `postgres`
# user (created by the postgresql package) on a free loopback port, with trust auth for
# the local role `pgjobd`. --fast turns off fsync (tests only: durability is not tested
# against power loss here, and it halves the suite's time). Benchmarks run without it.
# PGJOBD_TEST_LISTEN_ALSO: more addresses to listen on besides 127.0.0.1 (a fault test's
# veth address; its pg_hba.conf line is the test's to add).
set -euo pipefail

cmd=${1:?usage: pg-cluster.sh start|stop DIR [--fast]}
dir=${2:?usage: pg-cluster.sh start|stop DIR [--fast]}
pgbin=/usr/lib/postgresql/15/bin
run_as_postgres() { runuser -u postgres -- "$@"; }

case "$cmd" in
start)
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  chown postgres: "$dir"
  chmod 755 "$dir"
  if [[ ! -f "$dir/data/PG_VERSION" ]]; then
    run_as_postgres "$pgbin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 \
      --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
  fi
  extra=()
  if [[ "${3:-}" == "--fast" ]]; then extra+=(-c fsync=off -c full_page_writes=off); fi
  free_port() {
    local candidate
    # Below Linux's ephemeral range (32768-60999): a port there can be the local end of
    # some outgoing connection, which a connect() probe does not see but bind() does.
    for candidate in $(shuf -i 20000-32700 -n 50); do
      if ! (exec 3<>"/dev/tcp/127.0.0.1/$candidate") 2>/dev/null; then echo "$candidate"; return; fi
    done
  }
  # A free port can still be taken before the server binds it (the machine is shared):
  # then try another, unless the caller asked for this one (PGJOBD_TEST_PORT).
  for attempt in 1 2 3 4 5; do
    port=${PGJOBD_TEST_PORT:-$(free_port)}
    log_from=$(($(stat -c %s "$dir/server.log" 2>/dev/null || echo 0) + 1))  # this attempt's lines
    if run_as_postgres "$pgbin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start \
      -o "-p $port -k $dir -c listen_addresses=127.0.0.1${PGJOBD_TEST_LISTEN_ALSO:+,$PGJOBD_TEST_LISTEN_ALSO} -c max_connections=300 ${extra[*]}" \
      >/dev/null; then
      break
    fi
    if [[ -z "${PGJOBD_TEST_PORT:-}" && "$attempt" -lt 5 ]] &&
      tail -c "+$log_from" "$dir/server.log" | grep -q "could not bind\|Address already in use"; then
      echo "pg-cluster.sh: port $port was taken meanwhile; trying another" >&2
      continue
    fi
    echo "pg-cluster.sh: the server did not start; its log ends:" >&2
    tail -c "+$log_from" "$dir/server.log" | tail -n 20 >&2
    exit 1
  done
  psql_admin() { "$pgbin/psql" -h 127.0.0.1 -p "$port" -U postgres -v ON_ERROR_STOP=1 -qAt "$@"; }
  if [[ -z "$(psql_admin -d postgres -c "select 1 from pg_roles where rolname='pgjobd'")" ]]; then
    psql_admin -d postgres -c "create role pgjobd login superuser"
    psql_admin -d postgres -c "create database pgjobd owner pgjobd"
  fi
  echo "$port" >"$dir/port"
  echo "postgresql://pgjobd@127.0.0.1:$port/pgjobd" | tee "$dir/url"
  ;;
stop)
  if [[ -f "$dir/data/postmaster.pid" ]]; then
    run_as_postgres "$pgbin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  ;;
restart)
  run_as_postgres "$pgbin/pg_ctl" -D "$dir/data" -m fast -w restart >/dev/null
  ;;
*)
  echo "unknown command: $cmd" >&2
  exit 2
  ;;
esac
