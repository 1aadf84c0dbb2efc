-- previous_status is the status before (NULL: no such job); retried says whether it is
-- pending again. A job pgjobd_retry refuses (pending, running, done, or its unique_key
-- taken) is left as it is. The daemons are woken once per call, when a job was retried.
CREATE OR REPLACE FUNCTION @schema@.pgjobd_retry_many(ids bigint[])
  RETURNS TABLE (id bigint, previous_status text, retried boolean) LANGUAGE plpgsql
  SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    #variable_conflict use_column
    DECLARE
      job bigint;
      any_retried boolean := false;
    BEGIN
      IF ids IS NULL THEN
        RAISE EXCEPTION 'pgjobd_retry_many: ids must not be NULL'
          USING ERRCODE = 'null_value_not_allowed';
      END IF;
      IF cardinality(ids) > 100000 THEN
        RAISE EXCEPTION 'pgjobd_retry_many: ids has % elements, over the bound of 100000 per call',
          cardinality(ids) USING ERRCODE = 'program_limit_exceeded';
      END IF;
      FOREACH job IN ARRAY ids LOOP
        id := job;
        retried := false;
        SELECT j.status INTO previous_status FROM @schema@.jobs j WHERE j.id = job;
        IF previous_status IN ('failed', 'dead', 'cancelled') THEN
          BEGIN
            PERFORM @schema@.pgjobd_retry_job(job);
            retried := true;
            any_retried := true;
          EXCEPTION WHEN unique_violation THEN
            retried := false;
          END;
        END IF;
        RETURN NEXT;
      END LOOP;
      IF any_retried THEN
        PERFORM @schema@.pgjobd_notify_jobs();
      END IF;
    END
    $body$;

-- PostgreSQL grants EXECUTE on a new function to PUBLIC: only roles granted it
-- (sql/grants.sql) may call this one.
REVOKE EXECUTE ON FUNCTION @schema@.pgjobd_retry_many(bigint[]) FROM PUBLIC;
