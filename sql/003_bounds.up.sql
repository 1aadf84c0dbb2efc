-- pgjobd schema v3: values that no daemon could ever handle are refused where they are
-- written, by constraints whose names say why.
--
-- An application with INSERT or UPDATE rights on jobs writes these rows; before this
-- migration one row with run_at = '-infinity' or attempts = 2147483647 made every claim
-- fail, on every daemon. The bounds (README "What an application can and cannot break"):
--   type, queue     1..200 characters          jobs_type_length, jobs_queue_length
--   run_at          finite                     jobs_run_at_finite
--   attempts        0..1,000,000               jobs_attempts_range
--   max_attempts    1..1,000,000               jobs_max_attempts_range
--   unique_key      at most 1,024 bytes        jobs_unique_key_length
--   errors          a JSON array               jobs_errors_array
-- Adding a checked constraint scans the table once, under the migration's lock.

-- Existing rows must pass the constraints before they can be added. Rows that cannot be
-- served as they are end dead, saying why, rather than being changed into other jobs or
-- deleted. Two values are repaired in place: max_attempts above the bound (a common way
-- to say "retry forever") is lowered to it, and a non-array errors is wrapped in one.
UPDATE jobs SET
  status = CASE WHEN status IN ('pending', 'failed', 'running') AND NOT r.servable
                THEN 'dead' ELSE status END,
  finished_at = CASE WHEN status IN ('pending', 'failed', 'running') AND NOT r.servable
                     THEN now() ELSE finished_at END,
  locked_by = CASE WHEN r.servable THEN locked_by END,
  locked_until = CASE WHEN r.servable THEN locked_until END,
  last_error = CASE WHEN status IN ('pending', 'failed', 'running') AND NOT r.servable
                    THEN 'pgjobd schema v3 refused this job: ' || r.reason
                    ELSE last_error END,
  run_at = CASE WHEN isfinite(run_at) THEN run_at ELSE now() END,
  attempts = least(greatest(attempts, 0), 1000000),
  max_attempts = least(greatest(max_attempts, 1), 1000000),
  type = left(type, 200),
  queue = left(queue, 200),
  unique_key = CASE WHEN octet_length(unique_key) <= 1024 THEN unique_key END,
  errors = CASE WHEN jsonb_typeof(errors) = 'array' THEN errors ELSE jsonb_build_array(errors) END,
  updated_at = now()
FROM (
  SELECT id,
         concat_ws('; ',
           CASE WHEN NOT isfinite(run_at) THEN 'run_at is ' || run_at::text END,
           CASE WHEN attempts NOT BETWEEN 0 AND 1000000
                THEN 'attempts is ' || attempts || ', outside 0..1000000' END,
           CASE WHEN char_length(type) > 200 THEN 'type is longer than 200 characters' END,
           CASE WHEN char_length(queue) > 200 THEN 'queue is longer than 200 characters' END,
           CASE WHEN octet_length(unique_key) > 1024
                THEN 'unique_key is longer than 1024 bytes' END) AS reason,
         isfinite(run_at) AND attempts BETWEEN 0 AND 1000000 AND char_length(type) <= 200
           AND char_length(queue) <= 200 AND coalesce(octet_length(unique_key) <= 1024, true)
           AS servable
  FROM jobs
  WHERE NOT (isfinite(run_at) AND attempts BETWEEN 0 AND 1000000
             AND max_attempts BETWEEN 1 AND 1000000 AND char_length(type) <= 200
             AND char_length(queue) <= 200 AND coalesce(octet_length(unique_key) <= 1024, true)
             AND jsonb_typeof(errors) = 'array')
) r
WHERE jobs.id = r.id;

ALTER TABLE jobs
  DROP CONSTRAINT jobs_queue_check,
  DROP CONSTRAINT jobs_type_check,
  DROP CONSTRAINT jobs_attempts_check,
  DROP CONSTRAINT jobs_max_attempts_check,
  ADD CONSTRAINT jobs_queue_length CHECK (char_length(queue) BETWEEN 1 AND 200),
  ADD CONSTRAINT jobs_type_length CHECK (char_length(type) BETWEEN 1 AND 200),
  ADD CONSTRAINT jobs_run_at_finite CHECK (isfinite(run_at)),
  ADD CONSTRAINT jobs_attempts_range CHECK (attempts BETWEEN 0 AND 1000000),
  ADD CONSTRAINT jobs_max_attempts_range CHECK (max_attempts BETWEEN 1 AND 1000000),
  ADD CONSTRAINT jobs_unique_key_length CHECK (octet_length(unique_key) <= 1024),
  ADD CONSTRAINT jobs_errors_array CHECK (jsonb_typeof(errors) = 'array'),
  -- Bound when the defaults were first created; pgjobd migrate once searched the target
  -- schema before pg_catalog, so a now() planted there could have been chosen.
  ALTER COLUMN run_at SET DEFAULT pg_catalog.now(),
  ALTER COLUMN created_at SET DEFAULT pg_catalog.now(),
  ALTER COLUMN updated_at SET DEFAULT pg_catalog.now();

ALTER TABLE pgjobd_leader ALTER COLUMN elected_at SET DEFAULT pg_catalog.now();
