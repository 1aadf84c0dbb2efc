-- pgjobd schema v8: what the dashboard (README "Dashboard") reads besides jobs: the daemons
-- that are alive, an audit trail of what operators did through it, and one index.

-- A row per running daemon, upserted by its maintenance loop (at the heartbeat interval
-- while its busy count changes, else once per lease) and deleted on a clean exit. A daemon that dies without exiting leaves its row behind:
-- expires_at (the daemon's own 3 × lease.duration after seen_at) says when the row stops
-- being shown, and the maintenance leader deletes expired rows. The daemon writes the
-- expiry itself, so a reader (the dashboard, even `pgjobd ui` with another config) need
-- not know any daemon's lease. Which daemon leads is pgjobd_leader's row 'maintenance'.
CREATE TABLE pgjobd_daemons (
  id           text        PRIMARY KEY,  -- the worker id, as in jobs.locked_by
  host         text        NOT NULL,
  pid          bigint      NOT NULL,
  version      text        NOT NULL,
  concurrency  int         NOT NULL,
  busy         int         NOT NULL,
  started_at   timestamptz NOT NULL DEFAULT pg_catalog.now(),
  seen_at      timestamptz NOT NULL DEFAULT pg_catalog.now(),
  expires_at   timestamptz NOT NULL
);

-- Who did what through the dashboard, written in the action's own transaction (a failed
-- action leaves no row). The audit page reads the latest first by id: the primary key is
-- that index, and ids follow insertion order, which `at` (a clock) need not.
CREATE TABLE pgjobd_audit (
  id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at              timestamptz NOT NULL DEFAULT pg_catalog.now(),
  user_name       text        NOT NULL,
  remote_address  text        NOT NULL DEFAULT '',
  action          text        NOT NULL,  -- retry, cancel, pause_queue, resume_queue, ...
  target          text        NOT NULL DEFAULT '',  -- a job id, queue or schedule name
  job_ids         bigint[]    NOT NULL DEFAULT '{}',
  detail          text        NOT NULL DEFAULT ''
);

COMMENT ON TABLE pgjobd_daemons IS 'pgjobd: live daemons, kept fresh by their heartbeats';
COMMENT ON TABLE pgjobd_audit IS 'pgjobd: dashboard actions, who and when';

-- The dashboard's per-queue counts of failed, dead and cancelled jobs, and its job list
-- filtered by those statuses, newest first: a range of at most 10,001 entries per count, a
-- short backward range scan per page, however many rows the table holds. Done rows are
-- left out on purpose: an index entry per completion made the completion UPDATE 44%
-- slower (20,000 completions in batches of 100, next to 5M done rows: 343 ms without such
-- an index, 494 ms with it), a cost every daemon would pay for a dashboard that is off by
-- default. Only failures pay for this one, and pending and running rows (inserts and
-- claims, the other hot writes) are not in it. The dashboard reads done rows through what
-- exists: retention's jobs_finished_idx (the newest done rows, the throughput chart) and
-- the primary key (the newest jobs).
CREATE INDEX jobs_queue_status_idx ON jobs (queue, status, id)
  WHERE status IN ('failed', 'dead', 'cancelled');
