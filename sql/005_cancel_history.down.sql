-- Reverts 005_cancel_history.up.sql: the cancel and history columns and functions.
DROP FUNCTION IF EXISTS pgjobd_job_attempts(bigint);
DROP FUNCTION IF EXISTS pgjobd_retry_many(bigint[]);
DROP FUNCTION IF EXISTS pgjobd_cancel_many(bigint[], text);
DROP FUNCTION IF EXISTS pgjobd_cancel(bigint, text);

ALTER TABLE jobs
  DROP COLUMN IF EXISTS attempt_log,
  DROP COLUMN IF EXISTS cancel_reason,
  DROP COLUMN IF EXISTS cancel_requested_at;
