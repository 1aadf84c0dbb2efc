#!/usr/bin/env bash
# Smoke runs of bench/peers/run.sh (pgjobd, graphile-worker, pg-boss and the bare SQL loop
# on one private cluster), with tiny job counts and one pass, and of bench/peers/stream.sh
# (pgjobd and graphile-worker under one stream of enqueueing transactions, 3 s at 100/s):
#
#   bash tests/ops/peers_smoke_test.sh PATH/TO/pgjobd
#
# The peers come from npm, which CI cannot reach: without bench/peers/node_modules (made by
# `cd bench/peers && npm ci`), pgbench or node this prints a SKIP line and exits 77, which
# ctest reports as skipped.
set -euo pipefail
cd "$(dirname "$0")/../.."

bin=${1:?usage: peers_smoke_test.sh PATH/TO/pgjobd}
for need in bench/peers/node_modules/graphile-worker bench/peers/node_modules/pg-boss; do
  if [[ ! -d "$need" ]]; then
    echo "SKIP: $need absent (run 'npm ci' in bench/peers; needs the network)"
    exit 77
  fi
done
for tool in pgbench node psql; do
  if ! command -v "$tool" >/dev/null; then echo "SKIP: $tool not found"; exit 77; fi
done

log=$(mktemp /tmp/pgjobd-peers-smoke.XXXXXX)
trap 'rm -f "$log"' EXIT
if ! PEERS_SMOKE=1 PGJOBD_BIN="$bin" timeout 55 bench/peers/run.sh >"$log" 2>&1; then
  echo "FAIL: bench/peers/run.sh (smoke) failed:" >&2
  tail -n 40 "$log" >&2
  exit 1
fi
# One row per system and load, each with a positive rate.
rows=$(grep -c '^peers/run.sh: 1,' "$log" || true)
if [[ "$rows" != 10 ]]; then
  echo "FAIL: expected 10 runs (5 systems x 2 loads), saw $rows:" >&2
  cat "$log" >&2
  exit 1
fi
if grep '^peers/run.sh: 1,' "$log" | awk -F, '$7 + 0 <= 0 { bad = 1 } END { exit !bad }'; then
  echo "FAIL: a run without a rate:" >&2; cat "$log" >&2; exit 1
fi
grep -A4 '^load ' "$log"

if ! PEERS_SMOKE=1 PGJOBD_BIN="$bin" timeout 60 bench/peers/stream.sh >"$log" 2>&1; then
  echo "FAIL: bench/peers/stream.sh (smoke) failed:" >&2
  tail -n 40 "$log" >&2
  exit 1
fi
# One row per system; the script itself fails unless every job inserted was picked up.
# Each row: about 300 jobs inserted (pgbench's Poisson schedule), a p50 above zero, a p99
# at least as long, a share over 10 ms between 0 and 1.
if ! grep '^peers/stream.sh: 1,' "$log" | awk -F, '
    $6 >= 200 && $6 <= 420 && $10 == $6 && $11 > 0 && $12 >= $11 && $15 >= 0 && $15 <= 1 { ok[$2] = 1 }
    END { exit !(("pgjobd" in ok) && ("graphile-worker" in ok)) }'; then
  echo "FAIL: expected a stream row for pgjobd and one for graphile-worker:" >&2
  cat "$log" >&2
  exit 1
fi
grep -A3 '^rate ' "$log"
echo "PASS: peers smoke (5 systems x 2 loads; 2 systems x 1 stream)"
