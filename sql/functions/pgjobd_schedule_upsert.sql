-- Creates or changes a schedule of source 'sql'. A name the YAML defines is refused: the
-- next reconciliation would otherwise fight over it. The cron line is checked for its
-- shape here and fully by the daemons, which log a line they cannot parse and skip it.
-- Changing the timing (or creating) never fires the ticks before now.
CREATE OR REPLACE FUNCTION @schema@.pgjobd_schedule_upsert(
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
        RAISE EXCEPTION 'pgjobd_schedule_upsert: name must be 1..100 letters, digits, _, - or ., not %',
          coalesce(quote_literal(left(pgjobd_schedule_upsert.name, 101)), 'NULL')
          USING ERRCODE = 'invalid_parameter_value';
      END IF;
      PERFORM @schema@.pgjobd_check_job('pgjobd_schedule_upsert', pgjobd_schedule_upsert.type,
        pgjobd_schedule_upsert.payload, pgjobd_schedule_upsert.queue,
        pgjobd_schedule_upsert.priority, now(), pgjobd_schedule_upsert.max_attempts, NULL);
      IF (pgjobd_schedule_upsert.cron IS NULL) = (pgjobd_schedule_upsert.every IS NULL) THEN
        RAISE EXCEPTION 'pgjobd_schedule_upsert: give exactly one of cron and every'
          USING ERRCODE = 'invalid_parameter_value';
      END IF;
      IF octet_length(pgjobd_schedule_upsert.cron) > 1000 THEN
        RAISE EXCEPTION 'pgjobd_schedule_upsert: cron is % bytes, over the bound of 1000',
          octet_length(pgjobd_schedule_upsert.cron) USING ERRCODE = 'program_limit_exceeded';
      END IF;
      IF pgjobd_schedule_upsert.cron IS NOT NULL
         AND pgjobd_schedule_upsert.cron !~ '^\s*(@[A-Za-z]+|\S+(\s+\S+){4,5})\s*$' THEN
        RAISE EXCEPTION 'pgjobd_schedule_upsert: cron must be 5 fields, 6 with seconds, or @daily and the like, not %',
          quote_literal(pgjobd_schedule_upsert.cron) USING ERRCODE = 'invalid_parameter_value';
      END IF;
      secs := extract(epoch FROM pgjobd_schedule_upsert.every);
      IF secs IS NOT NULL AND (secs < 1 OR secs <> trunc(secs) OR secs > 2147483647) THEN
        RAISE EXCEPTION 'pgjobd_schedule_upsert: every must be whole seconds, at least 1 second, not %',
          pgjobd_schedule_upsert.every USING ERRCODE = 'invalid_parameter_value';
      END IF;
      IF pgjobd_schedule_upsert.timezone IS NULL OR NOT EXISTS (
           SELECT 1 FROM pg_timezone_names z WHERE z.name = pgjobd_schedule_upsert.timezone) THEN
        RAISE EXCEPTION 'pgjobd_schedule_upsert: unknown timezone %',
          coalesce(quote_literal(left(pgjobd_schedule_upsert.timezone, 100)), 'NULL')
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
      SELECT x.source INTO held FROM @schema@.pgjobd_schedules x
      WHERE x.name = pgjobd_schedule_upsert.name FOR UPDATE;
      IF held = 'yaml' THEN
        RAISE EXCEPTION 'pgjobd_schedule_upsert: schedule % is defined in the YAML config; change it there',
          pgjobd_schedule_upsert.name USING ERRCODE = 'object_not_in_prerequisite_state';
      END IF;
      INSERT INTO @schema@.pgjobd_schedules AS x (name, cron, every_seconds, timezone, type, queue,
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
    $body$;

-- PostgreSQL grants EXECUTE on a new function to PUBLIC: only roles granted it
-- (sql/grants.sql) may call this one.
REVOKE EXECUTE ON FUNCTION
  @schema@.pgjobd_schedule_upsert(text, text, text, interval, text, jsonb, text, int, int,
                                  text, text, interval)
FROM PUBLIC;
