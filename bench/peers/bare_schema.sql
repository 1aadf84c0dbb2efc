-- The bare SQL loop's table: a primary key and one partial index on pending rows, nothing else.
DROP SCHEMA IF EXISTS peers_bare CASCADE;
CREATE SCHEMA peers_bare;
CREATE TABLE peers_bare.jobs (
  id bigserial PRIMARY KEY,
  queue text NOT NULL DEFAULT 'default',
  status text NOT NULL DEFAULT 'pending',
  run_at timestamptz NOT NULL DEFAULT now(),
  payload jsonb,
  started_at timestamptz,
  finished_at timestamptz
);
CREATE INDEX jobs_pending ON peers_bare.jobs (queue, run_at, id) WHERE status = 'pending';
