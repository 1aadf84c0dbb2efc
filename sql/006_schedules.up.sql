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

-- The schedule functions are SECURITY DEFINER with a pinned search_path, created by dynamic
-- SQL with this schema spelled in, as in 004_sql_interface.up.sql (which explains why).
-- %1$I is this schema.
DO $migration$
DECLARE
  s text := current_schema();
BEGIN
  -- Creates or changes a schedule of source 'sql'. A name the YAML defines is refused: the
  -- next reconciliation would otherwise fight over it. The cron line is checked for its
  -- shape here and fully by the daemons, which log a line they cannot parse and skip it.
  -- Changing the timing (or creating) never fires the ticks before now.
  EXECUTE format($fmt$
    CREATE FUNCTION %1$I.pgjobd_schedule_upsert(
        name text, type text, cron text DEFAULT NULL, every interval DEFAULT NULL,
        timezone text DEFAULT 'UTC', payload jsonb DEFAULT '{}', queue text DEFAULT 'default',
        priority int DEFAULT 0, max_attempts int DEFAULT 5, overlap text DEFAULT 'allow',
        misfire text DEFAULT 'skip', misfire_grace interval DEFAULT '1 hour')
      RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    #variable_conflict use_column
    DECLARE
      secs numeric;
      held text;
    BEGIN
      IF pgjobd_schedule_upsert.name IS NULL
         OR pgjobd_schedule_upsert.name !~ '^[A-Za-z0-9_.-]{1,100}$' THEN
        RAISE EXCEPTION 'pgjobd_schedule_upsert: name must be 1..100 letters, digits, _, - or ., not %%',
          coalesce(quote_literal(pgjobd_schedule_upsert.name), 'NULL')
          USING ERRCODE = 'invalid_parameter_value';
      END IF;
      PERFORM %1$I.pgjobd_check_job('pgjobd_schedule_upsert', pgjobd_schedule_upsert.type,
        pgjobd_schedule_upsert.payload, pgjobd_schedule_upsert.queue,
        pgjobd_schedule_upsert.priority, now(), pgjobd_schedule_upsert.max_attempts, NULL);
      IF (pgjobd_schedule_upsert.cron IS NULL) = (pgjobd_schedule_upsert.every IS NULL) THEN
        RAISE EXCEPTION 'pgjobd_schedule_upsert: give exactly one of cron and every'
          USING ERRCODE = 'invalid_parameter_value';
      END IF;
      IF pgjobd_schedule_upsert.cron IS NOT NULL
         AND pgjobd_schedule_upsert.cron !~ '^\s*(@[A-Za-z]+|\S+(\s+\S+){4,5})\s*$' THEN
        RAISE EXCEPTION 'pgjobd_schedule_upsert: cron must be 5 fields, 6 with seconds, or @daily and the like, not %%',
          quote_literal(pgjobd_schedule_upsert.cron) USING ERRCODE = 'invalid_parameter_value';
      END IF;
      secs := extract(epoch FROM pgjobd_schedule_upsert.every);
      IF secs IS NOT NULL AND (secs < 1 OR secs <> trunc(secs) OR secs > 2147483647) THEN
        RAISE EXCEPTION 'pgjobd_schedule_upsert: every must be whole seconds, at least 1 second, not %%',
          pgjobd_schedule_upsert.every USING ERRCODE = 'invalid_parameter_value';
      END IF;
      IF pgjobd_schedule_upsert.timezone IS NULL OR NOT EXISTS (
           SELECT 1 FROM pg_timezone_names z WHERE z.name = pgjobd_schedule_upsert.timezone) THEN
        RAISE EXCEPTION 'pgjobd_schedule_upsert: unknown timezone %%',
          coalesce(quote_literal(pgjobd_schedule_upsert.timezone), 'NULL')
          USING ERRCODE = 'invalid_parameter_value';
      END IF;
      IF pgjobd_schedule_upsert.overlap IS NULL
         OR pgjobd_schedule_upsert.overlap NOT IN ('allow', 'skip') THEN
        RAISE EXCEPTION 'pgjobd_schedule_upsert: overlap must be allow or skip'
          USING ERRCODE = 'invalid_parameter_value';
      END IF;
      IF pgjobd_schedule_upsert.misfire IS NULL
         OR pgjobd_schedule_upsert.misfire NOT IN ('skip', 'all', 'none') THEN
        RAISE EXCEPTION 'pgjobd_schedule_upsert: misfire must be skip, all or none'
          USING ERRCODE = 'invalid_parameter_value';
      END IF;
      IF pgjobd_schedule_upsert.misfire_grace IS NULL
         OR pgjobd_schedule_upsert.misfire_grace < interval '0' THEN
        RAISE EXCEPTION 'pgjobd_schedule_upsert: misfire_grace must not be negative'
          USING ERRCODE = 'invalid_parameter_value';
      END IF;
      SELECT x.source INTO held FROM %1$I.pgjobd_schedules x
      WHERE x.name = pgjobd_schedule_upsert.name FOR UPDATE;
      IF held = 'yaml' THEN
        RAISE EXCEPTION 'pgjobd_schedule_upsert: schedule %% is defined in the YAML config; change it there',
          pgjobd_schedule_upsert.name USING ERRCODE = 'object_not_in_prerequisite_state';
      END IF;
      INSERT INTO %1$I.pgjobd_schedules AS x (name, cron, every_seconds, timezone, type, queue,
          priority, max_attempts, payload, overlap, misfire, misfire_grace_seconds, source)
      VALUES (pgjobd_schedule_upsert.name, pgjobd_schedule_upsert.cron, secs::int,
          pgjobd_schedule_upsert.timezone, pgjobd_schedule_upsert.type,
          pgjobd_schedule_upsert.queue, pgjobd_schedule_upsert.priority,
          pgjobd_schedule_upsert.max_attempts, pgjobd_schedule_upsert.payload,
          pgjobd_schedule_upsert.overlap, pgjobd_schedule_upsert.misfire,
          ceil(extract(epoch FROM pgjobd_schedule_upsert.misfire_grace))::int, 'sql')
      ON CONFLICT ON CONSTRAINT pgjobd_schedules_pkey DO UPDATE SET
        cron = EXCLUDED.cron, every_seconds = EXCLUDED.every_seconds,
        timezone = EXCLUDED.timezone, type = EXCLUDED.type, queue = EXCLUDED.queue,
        priority = EXCLUDED.priority, max_attempts = EXCLUDED.max_attempts,
        payload = EXCLUDED.payload, overlap = EXCLUDED.overlap, misfire = EXCLUDED.misfire,
        misfire_grace_seconds = EXCLUDED.misfire_grace_seconds,
        last_tick = CASE WHEN (x.cron, x.every_seconds, x.timezone)
                              IS DISTINCT FROM (EXCLUDED.cron, EXCLUDED.every_seconds,
                                                EXCLUDED.timezone)
                         THEN greatest(x.last_tick, now()) ELSE x.last_tick END,
        updated_at = now();
    END
    $body$ $fmt$, s);

  -- Deletes a schedule of source 'sql'; false when there was none. Its jobs stay.
  EXECUTE format($fmt$
    CREATE FUNCTION %1$I.pgjobd_schedule_delete(name text)
      RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    #variable_conflict use_column
    BEGIN
      IF EXISTS (SELECT 1 FROM %1$I.pgjobd_schedules x
                 WHERE x.name = pgjobd_schedule_delete.name AND x.source = 'yaml') THEN
        RAISE EXCEPTION 'pgjobd_schedule_delete: schedule %% is defined in the YAML config; remove it there',
          pgjobd_schedule_delete.name USING ERRCODE = 'object_not_in_prerequisite_state';
      END IF;
      DELETE FROM %1$I.pgjobd_schedules x WHERE x.name = pgjobd_schedule_delete.name;
      RETURN FOUND;
    END
    $body$ $fmt$, s);

  -- Pause and resume any schedule, YAML ones included (the reconciliation keeps `paused`).
  -- Resuming never fires the ticks missed while paused. Both error on an unknown name.
  EXECUTE format($fmt$
    CREATE FUNCTION %1$I.pgjobd_schedule_pause(name text)
      RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    #variable_conflict use_column
    BEGIN
      UPDATE %1$I.pgjobd_schedules x SET paused = true, updated_at = now()
      WHERE x.name = pgjobd_schedule_pause.name;
      IF NOT FOUND THEN
        RAISE EXCEPTION 'pgjobd_schedule_pause: no schedule %%',
          coalesce(quote_literal(pgjobd_schedule_pause.name), 'NULL') USING ERRCODE = 'no_data_found';
      END IF;
    END
    $body$ $fmt$, s);

  EXECUTE format($fmt$
    CREATE FUNCTION %1$I.pgjobd_schedule_resume(name text)
      RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    #variable_conflict use_column
    BEGIN
      UPDATE %1$I.pgjobd_schedules x
      SET paused = false, updated_at = now(),
          last_tick = CASE WHEN x.paused THEN greatest(x.last_tick, now()) ELSE x.last_tick END
      WHERE x.name = pgjobd_schedule_resume.name;
      IF NOT FOUND THEN
        RAISE EXCEPTION 'pgjobd_schedule_resume: no schedule %%',
          coalesce(quote_literal(pgjobd_schedule_resume.name), 'NULL') USING ERRCODE = 'no_data_found';
      END IF;
    END
    $body$ $fmt$, s);
END
$migration$;

-- PostgreSQL grants EXECUTE on a new function to PUBLIC: for these, only roles granted it
-- (sql/grants.sql) may call them.
REVOKE EXECUTE ON FUNCTION
  pgjobd_schedule_upsert(text, text, text, interval, text, jsonb, text, int, int, text, text,
                         interval),
  pgjobd_schedule_delete(text),
  pgjobd_schedule_pause(text),
  pgjobd_schedule_resume(text)
FROM PUBLIC;
