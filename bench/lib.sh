# shellcheck shell=bash
# Shared by bench/run.sh, bench/daemons.sh and bench/rss.sh (sourced, not run).

# A loopback port nobody listens on, for a daemon's /metrics. Below Linux's ephemeral range
# (32768-60999), where the local end of some outgoing connection makes bind() fail though
# a connect() probe sees nothing (scripts/pg-cluster.sh picks its ports the same way).
free_port() {
  local p
  for p in $(shuf -i 20000-32700 -n 50); do
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
  done
  echo "${0##*/}: no free port" >&2
  exit 1
}

# The disk probe. On a shared machine the other tenants' I/O shows first in the time a
# synchronous write takes, and with synchronous_commit on every commit waits for one (the
# WAL flush), so this number explains most of the run-to-run noise. 200 synchronous
# (O_DSYNC) 8 kB overwrites of a preallocated file on the cluster's disk, like WAL flushes;
# prints milliseconds per write, or nothing when DSYNC_PROBE (the file) is not set.
dsync_probe_init() {  # FILE
  dd if=/dev/zero of="$1" bs=8k count=200 status=none
}
dsync_ms() {
  [[ -n "${DSYNC_PROBE:-}" && -f "${DSYNC_PROBE}" ]] || return 0
  dd if=/dev/zero of="$DSYNC_PROBE" bs=8k count=200 oflag=dsync conv=notrunc 2>&1 |
    awk -F', ' '/copied/ { split($(NF - 1), t, " "); printf "%.2f", t[1] / 200 * 1000 }'
}

# The scratch scripts' common frame, once they have defined cleanup(): it runs however the
# script ends (an interrupt too), psql is quiet about notices, and sql() runs a statement
# on the script's $url.
bench_frame() {
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  export PGOPTIONS="-c client_min_messages=warning"
}
# shellcheck disable=SC2154  # url: each script's own
sql() { psql "$url" -v ON_ERROR_STOP=1 -qAt "$@"; }
