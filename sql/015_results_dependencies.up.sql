-- pgjobd schema v15: a finished job's result, dependencies between jobs, dead letters, and
-- the rate a limit was written with. Functions and triggers that use them are in
-- sql/functions/. Every new jobs column is NULL or a constant default, so adding them
-- rewrites no row, and a job that uses none of them costs what it did.

ALTER TABLE jobs
  -- What the handler returned (README "Results and workflows"), bounded by
  -- worker.max_result_bytes; NULL when it returned nothing.
  ADD COLUMN result            jsonb,
  -- A blocked job: how many of its parents have not ended yet. 0 for every other job.
  ADD COLUMN blocked_by        int     NOT NULL DEFAULT 0,
  -- Some job depends on this one: its end must resolve them (the triggers fire only then).
  ADD COLUMN has_children      boolean NOT NULL DEFAULT false,
  -- NULL: the job has no parents. 'cancel': a parent that ends dead, cancelled or deleted
  -- cancels it; 'run': it runs anyway and sees which parents failed.
  ADD COLUMN on_parent_failure text,
  -- A dead-letter job: the id of the job whose death enqueued it (it never enqueues one).
  ADD COLUMN dead_letter_of    bigint,
  ADD CONSTRAINT jobs_on_parent_failure_check CHECK (on_parent_failure IN ('cancel', 'run')),
  ADD CONSTRAINT jobs_blocked_by_check CHECK (blocked_by >= 0);

-- 'blocked': waits for its parents; never claimed (the claim index holds pending and
-- failed rows only).
ALTER TABLE jobs DROP CONSTRAINT jobs_status_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_status_check
  CHECK (status IN ('blocked', 'pending', 'running', 'done', 'failed', 'dead', 'cancelled'));

-- One row per (child, parent). parent_status is NULL until the parent ends, then what it
-- ended as: 'done', 'dead', 'cancelled' or 'deleted'. No foreign keys: a key on jobs would
-- fire for every deleted job; the triggers keep this table right for the jobs that have
-- parents or children only.
CREATE TABLE pgjobd_dependencies (
  child_id      bigint NOT NULL,
  parent_id     bigint NOT NULL,
  parent_status text,
  PRIMARY KEY (child_id, parent_id),
  CONSTRAINT pgjobd_dependencies_status
    CHECK (parent_status IN ('done', 'dead', 'cancelled', 'deleted'))
);
CREATE INDEX pgjobd_dependencies_parent_idx ON pgjobd_dependencies (parent_id);

COMMENT ON TABLE pgjobd_dependencies IS
  'pgjobd: which jobs wait for which (pgjobd_enqueue depends_on, pgjobd_enqueue_workflow)';

-- Blocked jobs per queue (the gauge, pgjobd stats) and the maintenance loop's repair.
CREATE INDEX jobs_blocked_idx ON jobs (queue) WHERE status = 'blocked';

-- handlers.TYPE.dead_letter, written by the daemons that serve TYPE: a job of `type` that
-- ends dead enqueues a `target_type` job (in `target_queue`, or the dead job's queue).
CREATE TABLE pgjobd_dead_letters (
  type         text        PRIMARY KEY,
  target_type  text        NOT NULL,
  target_queue text,
  written_by   text        NOT NULL DEFAULT '',
  updated_at   timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT pgjobd_dead_letters_type CHECK (type <> '' AND target_type <> ''),
  CONSTRAINT pgjobd_dead_letters_queue CHECK (target_queue <> '')
);

COMMENT ON TABLE pgjobd_dead_letters IS
  'pgjobd: dead-letter types, written by the daemons from their YAML (handlers.TYPE.dead_letter)';

-- The rate as the YAML wrote it ('60/m'), for pgjobd stats and the dashboard; NULL for a
-- limit written by an older daemon (they show rate_per_second).
ALTER TABLE pgjobd_limits ADD COLUMN rate_text text;

-- pgjobd_enqueue and pgjobd_enqueue_ex gain depends_on and on_parent_failure: CREATE OR
-- REPLACE cannot add arguments, so the old signatures go (sql/functions/ creates the new;
-- sql/grants.sql must be run again).
DROP FUNCTION IF EXISTS pgjobd_enqueue(text, jsonb, text, int, timestamptz, int, text);
DROP FUNCTION IF EXISTS pgjobd_enqueue_ex(text, jsonb, text, int, timestamptz, int, text);
