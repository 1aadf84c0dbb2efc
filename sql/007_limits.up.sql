-- pgjobd schema v7: concurrency and rate limits that hold across every daemon (README
-- "Limits").
--
-- The definitions live here, not in each daemon's memory: daemons write them from their
-- YAML (pgjobd_limits_sync) and every claim reads them, so all daemons apply the same ones.
-- A limit is split into partitions by a payload field (`key`); each partition has
--   * `concurrency` slot rows (pgjobd_limit_slots). A claim takes a free slot row under a
--     row lock and writes the job and attempt into it. A slot is held only while that job
--     is running that very attempt, so whatever ends the attempt frees it: a completion, a
--     rescue after a crash, a retry, even a DELETE of the row by hand. Completions and the
--     rescue also release it (job_id NULL) in the same statement, so a claim finds free
--     slots by an index; a slot whose attempt ended otherwise is found by the claim among
--     the longest held, or released by the leader's cleanup. Nothing has to release a
--     slot for it to be free, so nothing can leak one; a stale owner (its lease expired,
--     the job claimed again) holds nothing, since the new attempt has a new number, and
--     its fenced-off completion releases nothing.
--   * a token bucket row (pgjobd_limit_buckets) for `rate`: tokens refill at rate per
--     second up to `burst`; every start (first attempt or retry) takes one.
-- Both are taken with FOR UPDATE SKIP LOCKED, so claimers never wait for each other and a
-- limit is never exceeded: at most `concurrency` rows exist for a partition, and each
-- holds one job. (Schema v9 counts running jobs instead of slots, v14 drops the slots; the
-- functions are in sql/functions/.)

CREATE TABLE pgjobd_limits (
  name            text        PRIMARY KEY,
  types           text[],     -- NULL: any type
  queues          text[],     -- NULL: any queue
  key             text,       -- NULL: one partition for all matching jobs
  concurrency     int,        -- NULL: no concurrency limit
  rate_per_second float8,     -- NULL: no rate limit
  burst           int         NOT NULL DEFAULT 1,
  written_by      text,       -- the daemon that wrote this definition last
  updated_at      timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT pgjobd_limits_name CHECK (name ~ '^[A-Za-z0-9_.-]{1,100}$'),
  CONSTRAINT pgjobd_limits_matches CHECK (types IS NOT NULL OR queues IS NOT NULL),
  CONSTRAINT pgjobd_limits_limits CHECK (concurrency IS NOT NULL OR rate_per_second IS NOT NULL),
  CONSTRAINT pgjobd_limits_concurrency CHECK (concurrency BETWEEN 1 AND 100000),
  CONSTRAINT pgjobd_limits_rate CHECK (rate_per_second > 0 AND rate_per_second <= 1000000),
  CONSTRAINT pgjobd_limits_burst CHECK (burst BETWEEN 1 AND 1000000)
);

COMMENT ON TABLE pgjobd_limits IS
  'pgjobd: concurrency and rate limits, written by the daemons from their YAML (limits:)';

CREATE TABLE pgjobd_limit_slots (
  limit_name text        NOT NULL REFERENCES pgjobd_limits (name) ON DELETE CASCADE,
  part       text        NOT NULL,  -- the partition: pgjobd_limit_part(payload, key)
  slot       int         NOT NULL,  -- 1..concurrency
  job_id     bigint,                -- held while this job runs this attempt
  attempt    int,
  taken_at   timestamptz,
  PRIMARY KEY (limit_name, part, slot)
);

-- Every job started and finished under a concurrency limit updates a slot row twice, so a
-- small table collects dead row versions fast: vacuum it after a thousand of them rather
-- than after a fifth of the table (the default), or every claim wades through them.
ALTER TABLE pgjobd_limit_slots SET (autovacuum_vacuum_scale_factor = 0,
                                    autovacuum_vacuum_threshold = 1000,
                                    autovacuum_vacuum_cost_delay = 0);

-- A completion or rescue releases its job's slots by job id; a claim finds released slots
-- by partition.
CREATE INDEX pgjobd_limit_slots_held_idx ON pgjobd_limit_slots (job_id) WHERE job_id IS NOT NULL;
CREATE INDEX pgjobd_limit_slots_free_idx ON pgjobd_limit_slots (limit_name, part, slot)
  WHERE job_id IS NULL;
CREATE INDEX pgjobd_limit_slots_taken_idx ON pgjobd_limit_slots (limit_name, part, taken_at)
  WHERE job_id IS NOT NULL;

CREATE TABLE pgjobd_limit_buckets (
  limit_name  text        NOT NULL REFERENCES pgjobd_limits (name) ON DELETE CASCADE,
  part        text        NOT NULL,
  tokens      float8      NOT NULL,
  refilled_at timestamptz NOT NULL,
  PRIMARY KEY (limit_name, part)
);
