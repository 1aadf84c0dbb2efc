#!/bin/sh
# pgjobd-sample-handler: the demo image's exec handler for jobs of type "sample".
#
# pgjobd writes the payload JSON on stdin and sets PGJOBD_JOB_ID, PGJOBD_JOB_TYPE,
# PGJOBD_JOB_QUEUE and PGJOBD_JOB_ATTEMPT. stdout is discarded and stderr only matters on
# failure (its tail becomes the job's last_error), so the messages go to stderr.
#
# Payload keys (all optional), chosen by docker/seed-jobs.sql so the dashboard has
# something to show:
#   "ms": N               work for N milliseconds (default 200)
#   "fail": true          fail every attempt: retried with backoff, dead when out of attempts
#   "flaky": true         fail the first attempt only: one retry, then done
#   "permanent": true     fail with exit 65, listed in permanent_exit_codes: dead at once
# Deliberately no JSON parser (the image has none): the seeder writes these keys, and
# PostgreSQL prints jsonb as `"key": value`, with or without the space tolerated below.
set -u

payload=$(cat)
attempt=${PGJOBD_JOB_ATTEMPT:-1}
job="job ${PGJOBD_JOB_ID:-?} (${PGJOBD_JOB_TYPE:-?} on ${PGJOBD_JOB_QUEUE:-?}, attempt $attempt)"

has_true() {
  case "$payload" in
  *"\"$1\": true"* | *"\"$1\":true"*) return 0 ;;
  *) return 1 ;;
  esac
}

ms=$(printf '%s' "$payload" | sed -n 's/.*"ms": *\([0-9][0-9]*\).*/\1/p')
ms=${ms:-200}
# sleep takes fractional seconds in coreutils; printf pads e.g. 50 ms to 0.050.
sleep "$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))"

if has_true permanent; then
  echo "$job: permanent failure requested by the payload" >&2
  exit 65
fi
if has_true fail; then
  echo "$job: simulated failure requested by the payload" >&2
  exit 1
fi
if has_true flaky && [ "$attempt" -lt 2 ]; then
  echo "$job: simulated transient failure on the first attempt" >&2
  exit 1
fi
echo "$job: done after ${ms}ms" >&2
exit 0
