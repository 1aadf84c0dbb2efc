-- Reverts 014_drop_limit_slots.up.sql: pgjobd_limit_slots as schema v13 had it (empty,
-- for daemons of schema v8), and no function digest.
CREATE TABLE pgjobd_limit_slots (
  limit_name text        NOT NULL REFERENCES pgjobd_limits (name) ON DELETE CASCADE,
  part       text        NOT NULL,
  slot       int         NOT NULL,
  job_id     bigint,
  attempt    int,
  taken_at   timestamptz,
  PRIMARY KEY (limit_name, part, slot)
);
ALTER TABLE pgjobd_limit_slots SET (autovacuum_vacuum_scale_factor = 0,
                                    autovacuum_vacuum_threshold = 1000,
                                    autovacuum_vacuum_cost_delay = 0);
CREATE INDEX pgjobd_limit_slots_held_idx ON pgjobd_limit_slots (job_id) WHERE job_id IS NOT NULL;
CREATE INDEX pgjobd_limit_slots_free_idx ON pgjobd_limit_slots (limit_name, part, slot)
  WHERE job_id IS NULL;
CREATE INDEX pgjobd_limit_slots_taken_idx ON pgjobd_limit_slots (limit_name, part, taken_at)
  WHERE job_id IS NOT NULL;
ALTER TABLE pgjobd_migrations DROP COLUMN IF EXISTS functions_digest;
