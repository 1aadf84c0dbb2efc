-- Reverts 005_cancel_history.up.sql: the cancel and history columns.
ALTER TABLE jobs
  DROP COLUMN IF EXISTS attempt_log,
  DROP COLUMN IF EXISTS cancel_reason,
  DROP COLUMN IF EXISTS cancel_requested_at;
