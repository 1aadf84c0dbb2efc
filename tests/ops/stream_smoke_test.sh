#!/usr/bin/env bash
# Smoke run of bench/stream.sh (a steady stream of single-row INSERTs from pgbench, one
# daemon, per-second latency and backlog) against the test database, a few seconds at a
# low rate, so that CI keeps the script working:
#
#   PGJOBD_TEST_DATABASE_URL=... bash tests/ops/stream_smoke_test.sh PATH/TO/pgjobd
#
# Without PGJOBD_TEST_DATABASE_URL or pgbench it prints a SKIP line and exits 77
# (ctest: skipped).
set -euo pipefail
cd "$(dirname "$0")/../.."

bin=${1:?usage: stream_smoke_test.sh PATH/TO/pgjobd}
url=${PGJOBD_TEST_DATABASE_URL:-}
if [[ -z "$url" ]]; then echo "SKIP: PGJOBD_TEST_DATABASE_URL not set"; exit 77; fi
for tool in pgbench psql curl; do
  if ! command -v "$tool" >/dev/null; then echo "SKIP: $tool not found"; exit 77; fi
done

out=$(mktemp -d /tmp/pgjobd-stream-smoke.XXXXXX)
trap 'rm -rf "$out"' EXIT
# 200 jobs/s for 6 s: 1,200 jobs.
if ! DATABASE_URL=$url PGJOBD_BIN=$bin DURATION=6 FRACTIONS=0.5 BURST_RATE=400 CLIENTS=2 CEILING=2 \
  SCHEMA="pgjobd_stream_smoke_$$" OUT=$out timeout 60 bench/stream.sh >"$out/log" 2>&1; then
  echo "FAIL: bench/stream.sh (smoke) failed:" >&2
  cat "$out/log" >&2
  exit 1
fi
fail() { echo "FAIL: $1" >&2; cat "$out/log" "$out"/stream_* >&2; exit 1; }
[[ -f "$out/stream_0.5.csv" && -f "$out/stream_summary.csv" ]] || fail "no CSV written"
# The summary: rate 200, about 1,200 jobs inserted (pgbench's Poisson schedule), the
# backlog empty at the end.
awk -F, 'NR == 2 && $2 == 200 && $6 >= 900 && $6 <= 1500 && $15 == 0 { ok = 1 }
         END { exit !ok }' "$out/stream_summary.csv" ||
  fail "unexpected summary (rate 200, 900-1500 inserted, backlog 0 at the end)"
# The producers' own INSERT times (pgbench's log, a tenth sampled): a p50 above zero, a
# p99 at least as long, a share between 0 and 1.
awk -F, 'NR == 2 && NF == 23 && $20 > 0 && $21 >= $20 && $22 >= 0 && $22 <= 1 { ok = 1 }
         END { exit !ok }' "$out/stream_summary.csv" ||
  fail "no INSERT times in the summary (insert_p50_ms, insert_p99_ms, insert_share_over_10ms)"
# The producers' ceiling, measured before the run with no daemon: above the 200/s asked
# (2 producers on the test cluster), in the summary and in the log, and no warning that
# the rate asked could not be offered.
ceiling=$(awk -F, 'NR == 2 { print $23 }' "$out/stream_summary.csv")
if ! [[ "$ceiling" =~ ^[0-9]+$ ]] || ((ceiling <= 200)); then
  fail "producer_ceiling_per_s is '$ceiling', not a rate above 200"
fi
grep -q "producers alone (no daemon, 2s): $ceiling INSERTs/s" "$out/log" || fail "the log does not give the ceiling"
! grep -q "more than the producers alone reach" "$out/log" || fail "a rate under the ceiling was called too high"
# Every job finished, and each was seen in some second's sample exactly once.
finished=$(awk -F, 'NR > 1 { n += $3 } END { print n + 0 }' "$out/stream_0.5.csv")
inserted=$(awk -F, 'NR == 2 { print $6 }' "$out/stream_summary.csv")
[[ "$finished" == "$inserted" ]] || fail "the samples count $finished finished jobs, $inserted were inserted"
# A latency for the seconds in which jobs finished.
awk -F, 'NR > 1 && $3 > 0 && $4 > 0 { n++ } END { exit !(n >= 4) }' "$out/stream_0.5.csv" ||
  fail "fewer than 4 seconds with finished jobs and a latency"
# The daemon's claims, from its /metrics: some seconds with claims and a mean time for
# them; none of 1 s or more at this rate; the oldest transaction's age, a number.
awk -F, 'NR > 1 && NF == 17 && $14 >= 0 && $17 == 0 { rows++ }
         NR > 1 && $15 > 0 && $16 > 0 { claimed++ }
         END { exit !(rows == NR - 1 && claimed >= 3) }' "$out/stream_0.5.csv" ||
  fail "per-second claims missing (oldest_xact_s, claims, claim_mean_ms, slow_claims)"
echo "PASS: stream smoke ($inserted jobs, every one sampled once)"
