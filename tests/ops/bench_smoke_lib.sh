# shellcheck shell=bash
# Shared by the smoke tests of the bench scripts (http_smoke_test.sh, exec_smoke_test.sh),
# sourced after their own checks. Sets $out, a temporary directory removed on exit, and:
#   run_smoke SCRIPT CSV [VAR=VALUE ...]  runs bench/SCRIPT with that environment and
#       OUT=$out/CSV, for at most 120 s, its output in $out/log; a failure prints the log
#       and exits 1
#   fail MESSAGE  prints MESSAGE, the log and the CSV, and exits 1
out=$(mktemp -d /tmp/pgjobd-smoke.XXXXXX)
trap 'rm -rf "$out"' EXIT
smoke_csv=""

run_smoke() {
  local script=$1
  smoke_csv=$out/$2
  shift 2
  if ! env "$@" OUT="$smoke_csv" timeout 120 "bench/$script" >"$out/log" 2>&1; then
    echo "FAIL: bench/$script (smoke) failed:" >&2
    cat "$out/log" >&2
    exit 1
  fi
}

fail() {
  echo "FAIL: $1" >&2
  cat "$out/log" "$smoke_csv" >&2
  exit 1
}
