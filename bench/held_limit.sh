#!/usr/bin/env bash
# Claims next to a keyed limit partition that cannot run (issue 42): the limited claim
# (pgjobd_claim_limited, what every daemon runs while limits exist) takes $JOBS jobs of
# $JOBS users, 64 per claim, each claim committed and its jobs marked done at once (the
# SQL alone, like `pgjobd bench`'s ceiling), with and without $HELD jobs of one more user
# that wait behind that user's running job (limit per_user: concurrency 1, key `user`).
# Variants: the held jobs carry a 1 MB payload field, or a 1 MB key value. Half the fast
# jobs are of a type under no limit. The timing starts after one untimed claim, which
# met the held jobs first (reading each one's payload for its partition, once: the
# steady state is measured, as after the held jobs have waited a while). Prints jobs/s of
# each run and per CPU second of the claiming backend (superuser only: it reads
# /proc/self/schedstat; robust to the other load on a shared machine), and the best
# ratios with/without; ROUNDS alternated rounds.
#
#   DATABASE_URL=postgresql://... bench/held_limit.sh
#
# Environment: DATABASE_URL (required; the schema $SCHEMA in it is dropped and
# recreated), PGJOBD_BIN (default build/release/pgjobd), SCHEMA (default
# pgjobd_bench_held), JOBS (default 2000), HELD (default 200), ROUNDS (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${DATABASE_URL:?set DATABASE_URL}"
bin=${PGJOBD_BIN:-build/release/pgjobd}
schema=${SCHEMA:-pgjobd_bench_held}
jobs=${JOBS:-2000}
held=${HELD:-200}
rounds=${ROUNDS:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf 'database:\n  url: %s\n  schema: %s\n' "$DATABASE_URL" "$schema" >"$work/config.yaml"
psql "$DATABASE_URL" -qX -v ON_ERROR_STOP=1 -c "SET client_min_messages = warning" -c "DROP SCHEMA IF EXISTS $schema CASCADE"
"$bin" migrate -c "$work/config.yaml" >/dev/null 2>&1

q() { psql "$DATABASE_URL" -qXAt -v ON_ERROR_STOP=1 -c "SET search_path = $schema" -c "$1"; }
claim="pgjobd_claim_limited('{default}', '{64}', '{t,free}', 64, 'w', 30000, '', 4194304)"
cpu="coalesce((SELECT split_part(pg_read_file('/proc/self/schedstat'), ' ', 1)::bigint
            WHERE (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)), 0)"
# 1 MB of hex text: stored out of line, barely compressed.
mb="(SELECT string_agg(md5(i::text), '') FROM generate_series(1, 32768) i)"

# One run: the table refilled, then claims until none is left; prints jobs/s.
run() {
  local variant=$1
  q "TRUNCATE jobs; DELETE FROM pgjobd_limits; TRUNCATE pgjobd_limit_parts, pgjobd_limit_held;
     INSERT INTO pgjobd_limits (name, types, key, concurrency)
       VALUES ('per_user', '{t}', 'user', 1)" >/dev/null
  if [[ $variant != none ]]; then
    local user="'big'" pad="$mb"
    if [[ $variant == key ]]; then user=$mb; pad="'x'"; fi
    # The partition's running job, claimed as a daemon claims it; then the held ones.
    q "INSERT INTO jobs (type, payload, run_at)
         SELECT 't', jsonb_build_object('user', $user, 'pad', $pad), now() - interval '1 hour'" \
      >/dev/null
    q "SELECT count(*) FROM $claim" >/dev/null
    q "INSERT INTO jobs (type, payload, run_at)
         SELECT 't', jsonb_build_object('user', u.v, 'pad', p.v), now() - interval '1 hour'
         FROM (SELECT $user AS v) u, (SELECT $pad AS v) p, generate_series(1, $held)" >/dev/null
  fi
  q "INSERT INTO jobs (type, payload)
       SELECT CASE WHEN g % 2 = 0 THEN 't' ELSE 'free' END, jsonb_build_object('user', 'u' || g)
       FROM generate_series(1, $jobs) g" >/dev/null
  q "VACUUM ANALYZE jobs" >/dev/null
  # The held jobs have waited for a while: an untimed claim (of one job, marked done) has
  # met them first, as the claims before the measured ones would have.
  q "SELECT count(*) FROM ${claim/'{64}', '{t,free}', 64/'{1}', '{t,free}', 1}" >/dev/null
  q "UPDATE jobs SET status = 'done', finished_at = now()
     WHERE status = 'running' AND NOT payload ? 'pad'" >/dev/null
  # The backend's own CPU time too (/proc/self/schedstat, in ns; needs superuser, else 0):
  # unlike the wall clock it does not count the time other tenants of the machine took.
  q "DO \$\$
     DECLARE ids bigint[]; n int; total int := 0; began timestamptz := clock_timestamp();
             cpu0 bigint := $cpu; cpu bigint;
     BEGIN
       -- The NOTICE below is the result: PGOPTIONS may raise the level (bench/run.sh does).
       PERFORM set_config('client_min_messages', 'notice', false);
       LOOP
         ids := ARRAY(SELECT job_id FROM $claim WHERE job_id IS NOT NULL);
         UPDATE jobs SET status = 'done', finished_at = now() WHERE id = ANY (ids);
         n := cardinality(ids);
         COMMIT;
         EXIT WHEN n = 0;
         total := total + n;
       END LOOP;
       cpu := $cpu - cpu0;
       RAISE NOTICE 'rate % %', round(total / extract(epoch FROM clock_timestamp() - began)),
         CASE WHEN cpu > 0 THEN round(total / (cpu / 1e9)) ELSE 0 END;
     END \$\$" 2>&1 | sed -n 's/.*NOTICE:  rate //p'
}

declare -A best best_cpu
for ((r = 1; r <= rounds; r++)); do
  for variant in none payload none key; do
    read -r rate per_cpu < <(run "$variant")
    echo "round $r, $variant: $rate jobs/s, $per_cpu jobs per CPU second of the claiming backend"
    if [[ -z ${best[$variant]:-} || $rate -gt ${best[$variant]} ]]; then best[$variant]=$rate; fi
    if [[ -z ${best_cpu[$variant]:-} || $per_cpu -gt ${best_cpu[$variant]} ]]; then
      best_cpu[$variant]=$per_cpu
    fi
  done
done
for variant in payload key; do
  awk -v w="${best[$variant]}" -v n="${best[none]}" -v v="$variant" \
    -v wc="${best_cpu[$variant]}" -v nc="${best_cpu[none]}" 'BEGIN {
      printf "held 1 MB %s: best %d jobs/s against %d without, ratio %.3f;", v, w, n, w / n
      if (nc > 0) printf " per backend CPU second %d against %d, ratio %.3f", wc, nc, wc / nc
      printf "\n" }'
done
psql "$DATABASE_URL" -qX -c "SET client_min_messages = warning" -c "DROP SCHEMA IF EXISTS $schema CASCADE"
