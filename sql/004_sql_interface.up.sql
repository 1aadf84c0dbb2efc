-- pgjobd schema v4: a SQL interface for applications and operators (README "SQL
-- interface"): enqueue one job or many, retry a job, pause and resume a queue.
--
-- The functions are in sql/functions/, applied after the migrations.

-- Paused queues. A row per queue ever paused or resumed; no row means not paused, so a
-- queue can be paused before it has any job. The claim statement reads it (kClaimSql).
CREATE TABLE pgjobd_queues (
  queue       text        PRIMARY KEY,
  paused      boolean     NOT NULL DEFAULT false,
  updated_at  timestamptz,
  CONSTRAINT pgjobd_queues_queue_length CHECK (char_length(queue) BETWEEN 1 AND 200)
);
