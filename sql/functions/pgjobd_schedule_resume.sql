CREATE OR REPLACE FUNCTION @schema@.pgjobd_schedule_resume(name text)
  RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    #variable_conflict use_column
    BEGIN
      UPDATE @schema@.pgjobd_schedules x
      SET paused = false, updated_at = now(),
          last_tick = CASE WHEN x.paused THEN greatest(x.last_tick, now()) ELSE x.last_tick END
      WHERE x.name = pgjobd_schedule_resume.name;
      IF NOT FOUND THEN
        RAISE EXCEPTION 'pgjobd_schedule_resume: no schedule %',
          coalesce(quote_literal(pgjobd_schedule_resume.name), 'NULL') USING ERRCODE = 'no_data_found';
      END IF;
    END
    $body$;

-- PostgreSQL grants EXECUTE on a new function to PUBLIC: only roles granted it
-- (sql/grants.sql) may call this one.
REVOKE EXECUTE ON FUNCTION @schema@.pgjobd_schedule_resume(text) FROM PUBLIC;
