-- pgjobd schema: recurring jobs (README "Recurring jobs"). One row per schedule, from the
-- YAML config (source 'yaml', reconciled by the daemons at start and on SIGHUP) or from
-- the SQL functions below (source 'sql', which the reconciliation never touches).
--
-- Exactly once per tick: a daemon fires a tick in one transaction that moves last_tick
-- from the value it read to the tick (a compare-and-set: WHERE last_tick = the value read)
-- and inserts the tick's job. last_tick only ever grows, so a tick, once passed, can never
-- be fired again, by a second daemon, a stale leader or a daemon restarted after SIGKILL;
-- and a tick is never lost, because last_tick moves only together with the job's insert
-- (or with the decision, per misfire and overlap policy, not to insert one).
-- The schedule functions are in sql/functions/pgjobd_schedule_*.sql.

CREATE TABLE pgjobd_schedules (
  name           text        PRIMARY KEY,
  -- Exactly one of cron (a cron line, checked by the daemon's parser) and every_seconds.
  cron           text,
  every_seconds  int,
  timezone       text        NOT NULL DEFAULT 'UTC',
  -- The job each tick inserts.
  type           text        NOT NULL,
  queue          text        NOT NULL DEFAULT 'default',
  priority       smallint    NOT NULL DEFAULT 0,
  max_attempts   int         NOT NULL DEFAULT 5,
  payload        jsonb       NOT NULL DEFAULT '{}',
  overlap        text        NOT NULL DEFAULT 'allow',
  misfire        text        NOT NULL DEFAULT 'skip',
  misfire_grace_seconds int  NOT NULL DEFAULT 3600,
  source         text        NOT NULL DEFAULT 'sql',
  enabled        boolean     NOT NULL DEFAULT true,   -- the YAML's enabled
  paused         boolean     NOT NULL DEFAULT false,  -- pgjobd_schedule_pause/resume
  -- Every tick up to here has been handled. A new schedule starts at its creation, so it
  -- never backfills; enabling, resuming or changing the timing moves it to now() too.
  last_tick      timestamptz NOT NULL DEFAULT now(),
  last_job_id    bigint,       -- the job of the last tick that inserted one (overlap: skip)
  next_tick      timestamptz,  -- written by the daemon that fired last, for operators
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT pgjobd_schedules_name_check CHECK (name ~ '^[A-Za-z0-9_.-]{1,100}$'),
  CONSTRAINT pgjobd_schedules_timing_check CHECK ((cron IS NULL) <> (every_seconds IS NULL)),
  CONSTRAINT pgjobd_schedules_every_check CHECK (every_seconds >= 1),
  CONSTRAINT pgjobd_schedules_type_check CHECK (char_length(type) BETWEEN 1 AND 200),
  CONSTRAINT pgjobd_schedules_queue_check CHECK (char_length(queue) BETWEEN 1 AND 200),
  CONSTRAINT pgjobd_schedules_max_attempts_check CHECK (max_attempts BETWEEN 1 AND 1000000),
  CONSTRAINT pgjobd_schedules_overlap_check CHECK (overlap IN ('allow', 'skip')),
  CONSTRAINT pgjobd_schedules_misfire_check CHECK (misfire IN ('skip', 'all', 'none')),
  CONSTRAINT pgjobd_schedules_grace_check CHECK (misfire_grace_seconds >= 0),
  CONSTRAINT pgjobd_schedules_source_check CHECK (source IN ('yaml', 'sql'))
);

COMMENT ON TABLE pgjobd_schedules IS
  'pgjobd recurring jobs: use pgjobd_schedule_upsert/_delete/_pause/_resume, or the YAML';
