-- pgjobd schema v5: cancelling running jobs, and a history of attempts (README "SQL
-- interface", "Job lifecycle").
--
-- A running job cannot simply be set to cancelled: its daemon would go on running it. So
-- pgjobd_cancel marks it (cancel_requested_at, cancel_reason) and notifies; the daemon
-- that holds it learns of the mark through that NOTIFY, or at its next heartbeat (which
-- returns it) if the notification was lost, stops the handler and writes `cancelled`. The
-- completion and the rescue read the mark too, so whichever writes the job's end writes
-- `cancelled` (unless the handler had already succeeded: done stays done).
--
-- attempt_log keeps one entry per attempt that did not end done: who ran it, when it
-- started and ended, and how it ended; the last 20, like errors. A done job keeps its
-- locked_by (cleared before schema v5), and its started_at and finished_at are those of
-- its last attempt: a JSON entry built on every done job would slow the hot path for what
-- the row already holds. pgjobd_job_attempts puts both together, to answer "which host
-- ran job 42, and how long did each try take". The functions are in sql/functions/.

ALTER TABLE jobs
  ADD COLUMN cancel_requested_at timestamptz,
  ADD COLUMN cancel_reason text,
  ADD COLUMN attempt_log jsonb NOT NULL DEFAULT '[]';

COMMENT ON COLUMN jobs.cancel_requested_at IS
  'pgjobd_cancel asked the daemon running this job to stop it (set by pgjobd only)';
COMMENT ON COLUMN jobs.attempt_log IS
  'pgjobd: one {attempt, by, started_at, ended_at, outcome} per attempt not ending done, the last 20';
