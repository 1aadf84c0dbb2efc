-- A queue name as every function that takes one accepts it: pgjobd_pause_queue,
-- pgjobd_resume_queue, and each job's queue (pgjobd_check_job).
CREATE OR REPLACE FUNCTION @schema@.pgjobd_check_queue(context text, queue text)
  RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF queue IS NULL THEN
    RAISE EXCEPTION '%: queue must not be NULL', context USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF char_length(queue) NOT BETWEEN 1 AND 200 THEN
    RAISE EXCEPTION '%: queue must be 1..200 characters long, not %', context,
      char_length(queue) USING ERRCODE = 'invalid_parameter_value';
  END IF;
END
$$;

-- PostgreSQL grants EXECUTE on a new function to PUBLIC: only roles granted it
-- (sql/grants.sql) may call this one.
REVOKE EXECUTE ON FUNCTION @schema@.pgjobd_check_queue(text, text) FROM PUBLIC;
