-- Reverts 015_results_dependencies.up.sql. Blocked jobs become pending (schema v14 has no
-- dependencies); results, dependencies and dead-letter settings are lost.
ALTER TABLE pgjobd_limits DROP COLUMN rate_text;
DROP TABLE pgjobd_dead_letters;
DROP INDEX jobs_blocked_idx;
DROP TABLE pgjobd_dependencies;
UPDATE jobs SET status = 'pending' WHERE status = 'blocked';
ALTER TABLE jobs DROP CONSTRAINT jobs_status_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_status_check
  CHECK (status IN ('pending', 'running', 'done', 'failed', 'dead', 'cancelled'));
ALTER TABLE jobs
  DROP CONSTRAINT jobs_blocked_by_check,
  DROP CONSTRAINT jobs_on_parent_failure_check,
  DROP COLUMN dead_letter_of,
  DROP COLUMN on_parent_failure,
  DROP COLUMN has_children,
  DROP COLUMN blocked_by,
  DROP COLUMN result;
