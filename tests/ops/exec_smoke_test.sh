#!/usr/bin/env bash
# Smoke run of bench/exec.sh (xargs -P 64 starting /bin/true, then one real daemon running
# as many jobs with the exec handler) against the test database, a few hundred jobs, so
# that CI keeps the script working: one row per pass, both rates and their ratio.
#
#   PGJOBD_TEST_DATABASE_URL=... bash tests/ops/exec_smoke_test.sh PATH/TO/pgjobd
#
# Without PGJOBD_TEST_DATABASE_URL or psql it prints a SKIP line and exits 77 (ctest:
# skipped).
set -euo pipefail
cd "$(dirname "$0")/../.."

bin=${1:?usage: exec_smoke_test.sh PATH/TO/pgjobd}
url=${PGJOBD_TEST_DATABASE_URL:-}
if [[ -z "$url" ]]; then echo "SKIP: PGJOBD_TEST_DATABASE_URL not set"; exit 77; fi
if ! command -v psql >/dev/null; then echo "SKIP: psql not found"; exit 77; fi

# shellcheck source=tests/ops/bench_smoke_lib.sh
source tests/ops/bench_smoke_lib.sh
jobs=200
run_smoke exec.sh exec.csv DATABASE_URL="$url" PGJOBD_BIN="$bin" JOBS="$jobs" REPEAT=1 \
  SCHEMA="pgjobd_exec_smoke_$$"
# One pass: the daemon's jobs/s, xargs' processes/s, and the first over the second.
awk -F, 'NR == 2 && $1 == 1 && $2 > 0 && $3 > 0 && $4 > 0 &&
         ($4 - $2 / $3) ^ 2 < 0.001 ^ 2 { ok = 1 }
         END { exit !(NR == 2 && ok) }' "$out/exec.csv" ||
  fail "expected one pass with both rates and their ratio"
# And bench/ratios.sh gives that ratio beside its goal.
ratio=$(bench/ratios.sh "$out" | awk -F, '$1 == "exec jobs/s / xargs" && $3 == 0.95 { print $2 }')
[[ -n "$ratio" ]] || fail "bench/ratios.sh gave no exec line"
echo "PASS: exec smoke ($jobs jobs, $ratio of xargs)"
