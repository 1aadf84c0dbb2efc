-- Every kept attempt of a job, oldest first, with its error (from errors, matched by
-- attempt number) when it failed, and for a done job its last, successful attempt from
-- the row itself. A reader, not SECURITY DEFINER: the caller needs SELECT on jobs (the
-- operator role has it). A non-array attempt_log reads as empty.
CREATE OR REPLACE FUNCTION @schema@.pgjobd_job_attempts(id bigint)
  RETURNS TABLE (attempt int, worker text, started_at timestamptz, ended_at timestamptz,
                 seconds float8, outcome text, error text)
  LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $body$
      SELECT x.attempt, x.worker, x.started_at, x.ended_at,
             extract(epoch FROM x.ended_at - x.started_at)::float8, x.outcome, x.error
      FROM (
        SELECT 0 AS part, a.n, (a.value ->> 'attempt')::int AS attempt, a.value ->> 'by' AS worker,
               (a.value ->> 'started_at')::timestamptz AS started_at,
               (a.value ->> 'ended_at')::timestamptz AS ended_at, a.value ->> 'outcome' AS outcome,
               CASE WHEN a.value ->> 'outcome' <> 'released' THEN
                 (SELECT e.value ->> 'error'
                  FROM jsonb_array_elements(CASE jsonb_typeof(j.errors) WHEN 'array'
                                                 THEN j.errors ELSE '[]' END) e
                  WHERE e.value -> 'attempt' = a.value -> 'attempt'
                  ORDER BY (e.value ->> 'at') DESC LIMIT 1) END AS error
        FROM @schema@.jobs j,
             jsonb_array_elements(CASE jsonb_typeof(j.attempt_log) WHEN 'array'
                                       THEN j.attempt_log ELSE '[]' END) WITH ORDINALITY a(value, n)
        WHERE j.id = pgjobd_job_attempts.id
        UNION ALL
        SELECT 1, 0, j.attempts, j.locked_by, j.started_at, j.finished_at, 'done', NULL
        FROM @schema@.jobs j
        WHERE j.id = pgjobd_job_attempts.id AND j.status = 'done'
      ) x
      ORDER BY x.part, x.n
    $body$;

-- PostgreSQL grants EXECUTE on a new function to PUBLIC: only roles granted it
-- (sql/grants.sql) may call this one.
REVOKE EXECUTE ON FUNCTION @schema@.pgjobd_job_attempts(bigint) FROM PUBLIC;
