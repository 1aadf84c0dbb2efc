-- Bulk forms for operators and the dashboard: each id in the array's order, one row per
-- id, in one transaction; an id that does not exist gives a NULL status instead of
-- failing the whole selection. The rules are those of pgjobd_cancel and pgjobd_retry.
CREATE OR REPLACE FUNCTION @schema@.pgjobd_cancel_many(ids bigint[], reason text DEFAULT NULL)
  RETURNS TABLE (id bigint, status text) LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp AS $body$
    #variable_conflict use_column
    DECLARE
      job bigint;
    BEGIN
      IF ids IS NULL THEN
        RAISE EXCEPTION 'pgjobd_cancel_many: ids must not be NULL'
          USING ERRCODE = 'null_value_not_allowed';
      END IF;
      IF cardinality(ids) > 100000 THEN
        RAISE EXCEPTION 'pgjobd_cancel_many: ids has % elements, over the bound of 100000 per call',
          cardinality(ids) USING ERRCODE = 'program_limit_exceeded';
      END IF;
      FOREACH job IN ARRAY ids LOOP
        id := job;
        status := NULL;
        IF job IS NOT NULL AND EXISTS (SELECT 1 FROM @schema@.jobs j WHERE j.id = job) THEN
          status := @schema@.pgjobd_cancel(job, pgjobd_cancel_many.reason);
        END IF;
        RETURN NEXT;
      END LOOP;
    END
    $body$;

-- PostgreSQL grants EXECUTE on a new function to PUBLIC: only roles granted it
-- (sql/grants.sql) may call this one.
REVOKE EXECUTE ON FUNCTION @schema@.pgjobd_cancel_many(bigint[], text) FROM PUBLIC;
