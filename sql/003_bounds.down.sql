-- Reverts 003_bounds.up.sql (the repaired rows stay as they are): for development only.
ALTER TABLE jobs
  DROP CONSTRAINT IF EXISTS jobs_queue_length,
  DROP CONSTRAINT IF EXISTS jobs_type_length,
  DROP CONSTRAINT IF EXISTS jobs_run_at_finite,
  DROP CONSTRAINT IF EXISTS jobs_attempts_range,
  DROP CONSTRAINT IF EXISTS jobs_max_attempts_range,
  DROP CONSTRAINT IF EXISTS jobs_unique_key_length,
  DROP CONSTRAINT IF EXISTS jobs_errors_array,
  ADD CONSTRAINT jobs_queue_check CHECK (queue <> ''),
  ADD CONSTRAINT jobs_type_check CHECK (type <> ''),
  ADD CONSTRAINT jobs_max_attempts_check CHECK (max_attempts >= 1),
  ADD CONSTRAINT jobs_attempts_check CHECK (attempts >= 0);
