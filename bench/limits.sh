#!/usr/bin/env bash
# Limited jobs against unlimited ones (issue 44), and claims next to a limit partition
# that cannot run (issue 42), each ratio printed beside its anchor, in one invocation.
#
#   DATABASE_URL=postgresql://... bench/limits.sh        (bench/run.sh calls it: phase "limits")
#
# 1. bench/daemons.sh with one real daemon (64 workers, builtin noop, $JOBS jobs of type
#    noop), once per variant, the variants alternated in $REPEAT passes:
#      none         `limits: {}`: the plain claim, with prefetch (the anchor)
#      concurrency  `{types: [noop], concurrency: 1000}`
#      rate         `{types: [noop], rate: 1000000/s, burst: 1000000}`: a rate that never holds
#      keys         `{types: [noop], key: k, concurrency: 1000}`, payload k = g % 1000
#                   (1,000 distinct keys)
#      single       the same limit, every job k = 0 (one partition)
#    Ratios (results/limits.csv, one row per run), each printed beside its anchor:
#      jobs/s       the variant's best jobs/s over none's best (wall clock: on a shared,
#                   loaded machine it varies 2-6x between runs)
#      jobs/cpu-s   the variant's best jobs per CPU second of the daemon plus the
#                   PostgreSQL backends serving it (/proc/PID/stat, read just before the
#                   daemon is stopped) over none's best: far steadier under load
# 2. bench/held_limit.sh: the limited claim's SQL loop over 2,000 jobs of 2,000 keys, with
#    and without 200 held jobs of one more key carrying a 1 MB payload field, or a 1 MB key.
#
# Environment: DATABASE_URL (required), PGJOBD_BIN, JOBS (default 200000: 2-3 s a run; a
# 50,000-job run lasted 0.6-0.8 s, of which the wait for the first job, 0.03-0.04 s, and
# the 50 ms poll that sees the last were up to a seventh), REPEAT (passes,
# default 3), HELD_ROUNDS (held_limit.sh's ROUNDS, default 3), OUT (default
# bench/results/limits.csv), VARIANTS (default all five; keep none, the anchor),
# DSYNC_PROBE (see bench/lib.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${DATABASE_URL:?limits.sh: set DATABASE_URL}"
jobs=${JOBS:-200000}
repeat=${REPEAT:-3}
out=${OUT:-bench/results/limits.csv}
work=$(mktemp -d /tmp/pgjobd-limits.XXXXXX)
trap 'rm -rf "$work"' EXIT

declare -A yaml payload
yaml[none]='limits: {}'
yaml[concurrency]='limits: {l: {types: [noop], concurrency: 1000}}'
yaml[rate]='limits: {l: {types: [noop], rate: 1000000/s, burst: 1000000}}'
yaml[keys]='limits: {l: {types: [noop], key: k, concurrency: 1000}}'
yaml[single]=${yaml[keys]}
payload[keys]="jsonb_build_object('k', g % 1000)"
payload[single]="jsonb_build_object('k', 0)"
variants=${VARIANTS:-none concurrency rate keys single}

mkdir -p "$(dirname "$out")"
echo "pass,variant,jobs,jobs_per_s,load1_before,daemon_cpu_s,backend_cpu_s,jobs_per_cpu_s" >"$out"
for ((r = 1; r <= repeat; r++)); do
  for v in $variants; do
    rm -f "$work/cpu" "$work/dbcpu"
    EXTRA_YAML=${yaml[$v]} PAYLOAD=${payload[$v]:-} JOBS=$jobs REPEAT=1 DAEMONS=1 MODES=each \
      CPU_OUT="$work/cpu" DB_CPU_OUT="$work/dbcpu" SCHEMA=pgjobd_bench_limits OUT="$work/run.csv" bench/daemons.sh 2>"$work/run.log" ||
      { cat "$work/run.log" >&2; exit 1; }
    row=$(tail -1 "$work/run.csv")
    rate=$(cut -d, -f8 <<<"$row")
    load=$(cut -d, -f12 <<<"$row")
    cpu=$(cat "$work/cpu")
    dbcpu=$(cat "$work/dbcpu")
    per_cpu=$(awk -v j="$jobs" -v a="$cpu" -v b="$dbcpu" 'BEGIN { printf "%.0f", j / (a + b) }')
    echo "$r,$v,$jobs,$rate,$load,$cpu,$dbcpu,$per_cpu" | tee -a "$out" >&2
  done
done
awk -F, 'NR > 1 { if ($4 + 0 > best[$2] + 0) best[$2] = $4
                 if ($8 + 0 > cpu[$2] + 0) cpu[$2] = $8 }
  END { printf "limits: unlimited (none) best %d jobs/s, %d jobs/cpu-s\n", best["none"], cpu["none"]
        n = split("concurrency rate keys single", vs, " ")
        for (i = 1; i <= n; i++) {
          if (!(vs[i] in best)) continue
          printf "limits: %-11s best %6d jobs/s against %d unlimited, ratio %.3f; %6d jobs/cpu-s against %d, ratio %.3f\n",
                 vs[i], best[vs[i]], best["none"], best[vs[i]] / best["none"],
                 cpu[vs[i]], cpu["none"], cpu[vs[i]] / cpu["none"]
        } }' "$out"
# HELD_ROUNDS=0 skips it.
if [[ ${HELD_ROUNDS:-3} != 0 ]]; then ROUNDS=${HELD_ROUNDS:-3} bench/held_limit.sh; fi
