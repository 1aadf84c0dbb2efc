#!/usr/bin/env bash
# ctest driver for pqxx_cut_connection (ASan builds only): the program leaks libpqxx 6.4's
# error result on a cut connection every time, so
#   1. with tests/lsan.supp, as scripts/test.sh runs the suite, it must exit 0;
#   2. without suppressions it must fail with a LeakSanitizer report naming libpq,
# which proves the suppressions hide this leak and that the test can see it at all.
# Usage: run_pqxx_cut_connection.sh <pqxx_cut_connection binary> <lsan.supp>
set -euo pipefail

binary=$1
supp=$2
# The ASan options scripts/test.sh sets, unless the caller already set its own.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# Runs the program with LSAN_OPTIONS=$1; its output goes to $out, its exit code to $rc.
run() {
  set +e
  LSAN_OPTIONS=$1 "$binary" >"$out" 2>&1
  rc=$?
  set -e
  cat "$out"
  if ((rc == 2)); then
    echo "FAIL: the program's setup failed (see above)" >&2
    exit 1
  fi
}

echo "== with $supp"
run "suppressions=$supp:print_suppressions=0"
if ((rc != 0)); then
  echo "FAIL: the leak is not suppressed by $supp (exit $rc)" >&2
  exit 1
fi

echo "== without suppressions"
run print_suppressions=0
if ((rc == 0)) || ! grep -q 'ERROR: LeakSanitizer' "$out" || ! grep -q 'libpq' "$out"; then
  echo "FAIL: expected a LeakSanitizer report through libpq (exit $rc): the test no longer" \
    "reproduces the leak, so it proves nothing about the suppressions" >&2
  exit 1
fi
echo "OK: the leak happens and tests/lsan.supp suppresses it"
