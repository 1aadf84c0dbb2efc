-- Pause and resume any schedule, YAML ones included (the reconciliation keeps `paused`).
-- Resuming never fires the ticks missed while paused. Both error on an unknown name.
CREATE OR REPLACE FUNCTION @schema@.pgjobd_schedule_pause(name text)
  RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    #variable_conflict use_column
    BEGIN
      UPDATE @schema@.pgjobd_schedules x SET paused = true, updated_at = now()
      WHERE x.name = pgjobd_schedule_pause.name;
      IF NOT FOUND THEN
        RAISE EXCEPTION 'pgjobd_schedule_pause: no schedule %',
          coalesce(quote_literal(pgjobd_schedule_pause.name), 'NULL') USING ERRCODE = 'no_data_found';
      END IF;
    END
    $body$;

-- PostgreSQL grants EXECUTE on a new function to PUBLIC: only roles granted it
-- (sql/grants.sql) may call this one.
REVOKE EXECUTE ON FUNCTION @schema@.pgjobd_schedule_pause(text) FROM PUBLIC;
