-- A job's outcome, for an application waiting for it (README "Results and workflows"):
-- its status, what its handler returned (result: NULL until it is done, and when the
-- handler returned nothing), why it last failed, and when it ended (NULL until then). No
-- row for an id that does not exist (never enqueued, or deleted by retention). SECURITY
-- DEFINER: a producer that may only enqueue reads its own jobs' results through it
-- without SELECT on jobs; one row by primary key, so it reveals nothing a caller could
-- not learn of a job whose id it knows.
CREATE OR REPLACE FUNCTION @schema@.pgjobd_job_result(id bigint)
  RETURNS TABLE (status text, result jsonb, last_error text, finished_at timestamptz)
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
      SELECT j.status, j.result, j.last_error, j.finished_at
      FROM @schema@.jobs j
      WHERE j.id = pgjobd_job_result.id
    $body$;

-- PostgreSQL grants EXECUTE on a new function to PUBLIC: only roles granted it
-- (sql/grants.sql) may call this one.
REVOKE EXECUTE ON FUNCTION @schema@.pgjobd_job_result(bigint) FROM PUBLIC;
