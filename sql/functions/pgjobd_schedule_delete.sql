-- Deletes a schedule of source 'sql'; false when there was none. Its jobs stay.
CREATE OR REPLACE FUNCTION @schema@.pgjobd_schedule_delete(name text)
  RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    #variable_conflict use_column
    BEGIN
      IF EXISTS (SELECT 1 FROM @schema@.pgjobd_schedules x
                 WHERE x.name = pgjobd_schedule_delete.name AND x.source = 'yaml') THEN
        RAISE EXCEPTION 'pgjobd_schedule_delete: schedule % is defined in the YAML config; remove it there',
          pgjobd_schedule_delete.name USING ERRCODE = 'object_not_in_prerequisite_state';
      END IF;
      DELETE FROM @schema@.pgjobd_schedules x WHERE x.name = pgjobd_schedule_delete.name;
      RETURN FOUND;
    END
    $body$;

-- PostgreSQL grants EXECUTE on a new function to PUBLIC: only roles granted it
-- (sql/grants.sql) may call this one.
REVOKE EXECUTE ON FUNCTION @schema@.pgjobd_schedule_delete(text) FROM PUBLIC;
