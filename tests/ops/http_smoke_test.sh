#!/usr/bin/env bash
# Smoke run of bench/http.sh (one real daemon POSTing every job to a local keep-alive HTTP
# server, bench/http_sink.js, then the same jobs with builtin noop) against the test
# database, a few hundred jobs, so that CI keeps the script working and sees, through the
# real binary, that the http handler keeps its connections between jobs:
#
#   PGJOBD_TEST_DATABASE_URL=... bash tests/ops/http_smoke_test.sh PATH/TO/pgjobd
#
# Without PGJOBD_TEST_DATABASE_URL, node, psql, curl or wrk it prints a SKIP line and exits 77
# (ctest: skipped).
set -euo pipefail
cd "$(dirname "$0")/../.."

bin=${1:?usage: http_smoke_test.sh PATH/TO/pgjobd}
url=${PGJOBD_TEST_DATABASE_URL:-}
if [[ -z "$url" ]]; then echo "SKIP: PGJOBD_TEST_DATABASE_URL not set"; exit 77; fi
for tool in node psql curl wrk; do
  if ! command -v "$tool" >/dev/null; then echo "SKIP: $tool not found"; exit 77; fi
done

# shellcheck source=tests/ops/bench_smoke_lib.sh
source tests/ops/bench_smoke_lib.sh
jobs=300
run_smoke http.sh http.csv DATABASE_URL="$url" BINS="$bin" JOBS="$jobs" REPEAT=1 \
  SCHEMA="pgjobd_http_smoke_$$"
# Five rows: wrk with the daemon's whole request and wrk bare against the same sink (the
# anchors), pgjobd's http, kept and deleted at completion (every job reached the server,
# http.sh checks the count), each with its jobs/s over both, and its noop.
awk -F, 'NR == 2 && $2 == "wrk-same-request" { s = 1 } NR == 3 && $2 == "wrk" { w = 1 }
         NR == 4 && $3 == "http" && $10 > 0 && $14 > 0 { h = 1 }
         NR == 5 && $3 == "http-done-deleted" && $10 > 0 && $14 > 0 { d = 1 }
         NR == 6 && $3 == "noop" { n = 1 }
         END { exit !(NR == 6 && s && w && h && d && n) }' "$out/http.csv" ||
  fail "expected two wrk rows, two http rows (done kept, done deleted) with their ratios to both and a noop row"
# The daemon has 64 workers: 300 jobs over at most 64 connections, not one each.
connections=$(awk -F, 'NR == 4 { print $6 }' "$out/http.csv")
((connections >= 1 && connections <= 64)) ||
  fail "$connections TCP connections for $jobs jobs (64 workers keep theirs between jobs)"
echo "PASS: http smoke ($jobs jobs over $connections connections)"
