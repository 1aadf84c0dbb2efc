#!/usr/bin/env bash
# A throwaway PgBouncer in transaction pooling mode in front of a PostgreSQL (tests and the
# benchmark's scale-out runs), as an operator would run Debian's pgbouncer 1.18.
#
#   scripts/pgbouncer.sh start DIR POSTGRES_URL [POOL_SIZE]   prints the pooled URL; writes DIR/url
#   scripts/pgbouncer.sh stop DIR                              stops it (safe when not running)
#
# PgBouncer refuses to run as root, so it runs as the unprivileged `postgres` user, on a
# free loopback port, with trust auth for the URL's user. Every database of the server is
# reachable through it (a `*` entry); at most POOL_SIZE (default 20) server connections
# per database and user, however many clients connect.
set -euo pipefail

cmd=${1:?usage: pgbouncer.sh start|stop DIR [POSTGRES_URL [POOL_SIZE]]}
dir=${2:?usage: pgbouncer.sh start|stop DIR [POSTGRES_URL [POOL_SIZE]]}
run_as_postgres() { runuser -u postgres -- "$@"; }

case "$cmd" in
start)
  url=${3:?usage: pgbouncer.sh start DIR POSTGRES_URL [POOL_SIZE]}
  pool=${4:-20}
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  chown postgres: "$dir"
  # host, port, user and database of a postgresql://user@host:port/db URL.
  read -r host port user db < <(python3 -c '
import sys, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1])
print(u.hostname or "127.0.0.1", u.port or 5432, u.username or "postgres", (u.path or "/").lstrip("/") or "postgres")
' "$url")
  free_port() {
    local candidate
    for candidate in $(shuf -i 20000-32700 -n 50); do
      if ! (exec 3<>"/dev/tcp/127.0.0.1/$candidate") 2>/dev/null; then echo "$candidate"; return; fi
    done
  }
  listen_port=$(free_port)
  printf '"%s" ""\n' "$user" >"$dir/userlist.txt"
  cat >"$dir/pgbouncer.ini" <<INI
[databases]
* = host=$host port=$port

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $listen_port
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = transaction
default_pool_size = $pool
max_client_conn = 2000
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
INI
  chown postgres: "$dir"/*
  run_as_postgres pgbouncer -d "$dir/pgbouncer.ini"
  for _ in $(seq 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$listen_port") 2>/dev/null; then
      echo "postgresql://$user@127.0.0.1:$listen_port/$db" | tee "$dir/url"
      exit 0
    fi
    sleep 0.1
  done
  echo "pgbouncer.sh: PgBouncer did not start; its log ends:" >&2
  tail -n 20 "$dir/pgbouncer.log" >&2
  exit 1
  ;;
stop)
  if [[ -f "$dir/pgbouncer.pid" ]]; then
    kill "$(cat "$dir/pgbouncer.pid")" 2>/dev/null || true
    for _ in $(seq 50); do
      [[ -f "$dir/pgbouncer.pid" ]] && kill -0 "$(cat "$dir/pgbouncer.pid")" 2>/dev/null || break
      sleep 0.1
    done
  fi
  ;;
*)
  echo "unknown command: $cmd" >&2
  exit 2
  ;;
esac
