# shellcheck shell=bash
# Shared by bench/run.sh and bench/daemons.sh (sourced, not run).

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
