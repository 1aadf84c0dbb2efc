-- pgjobd schema v5: cancelling running jobs, and a history of attempts (README "SQL
-- interface", "Job lifecycle").
--
-- A running job cannot simply be set to cancelled: its daemon would go on running it. So
-- pgjobd_cancel marks it (cancel_requested_at, cancel_reason) and notifies; the daemon
-- that holds it learns of the mark through that NOTIFY, or at its next heartbeat (which
-- returns it) if the notification was lost, stops the handler and writes `cancelled`. The
-- completion and the rescue read the mark too, so whichever writes the job's end writes
-- `cancelled` (unless the handler had already succeeded: done stays done).
--
-- attempt_log keeps one entry per attempt that did not end done: who ran it, when it
-- started and ended, and how it ended; the last 20, like errors. A done job keeps its
-- locked_by (cleared before schema v5), and its started_at and finished_at are those of
-- its last attempt: a JSON entry built on every done job would slow the hot path for what
-- the row already holds. pgjobd_job_attempts puts both together, to answer "which host
-- ran job 42, and how long did each try take".

ALTER TABLE jobs
  ADD COLUMN cancel_requested_at timestamptz,
  ADD COLUMN cancel_reason text,
  ADD COLUMN attempt_log jsonb NOT NULL DEFAULT '[]';

COMMENT ON COLUMN jobs.cancel_requested_at IS
  'pgjobd_cancel asked the daemon running this job to stop it (set by pgjobd only)';
COMMENT ON COLUMN jobs.attempt_log IS
  'pgjobd: one {attempt, by, started_at, ended_at, outcome} per attempt not ending done, the last 20';

-- In the format() strings below %1$I is this schema and %2$L its name as a literal (the
-- NOTIFY payload, as the INSERT trigger sends it); a literal % is %%.
DO $migration$
DECLARE
  s text := current_schema();
BEGIN
  -- Cancel: a pending or failed job is cancelled at once; a running one is marked and its
  -- daemon told (NOTIFY on pgjobd_cancel, delivered at commit: a rolled-back cancel
  -- cancels nothing); a finished one is left as it is. Idempotent: a second cancel of a
  -- running job keeps the first request's time and reason and notifies again (harmless,
  -- and it covers a lost notification). Returns the status the job is left in: 'cancelled',
  -- 'running' (stopping), or the 'done', 'dead' or 'cancelled' it already had.
  -- clock_timestamp(), not now(): the row lock may have been waited for, and the mark must
  -- not predate the claim that made the job running.
  EXECUTE format($fmt$
    CREATE FUNCTION %1$I.pgjobd_cancel(id bigint, reason text DEFAULT NULL)
      RETURNS text LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    #variable_conflict use_column
    DECLARE
      was text;
      message text;
    BEGIN
      IF pgjobd_cancel.id IS NULL THEN
        RAISE EXCEPTION 'pgjobd_cancel: id must not be NULL' USING ERRCODE = 'null_value_not_allowed';
      END IF;
      IF octet_length(pgjobd_cancel.reason) > 8192 THEN
        RAISE EXCEPTION 'pgjobd_cancel: reason must be at most 8192 bytes long, not %%',
          octet_length(pgjobd_cancel.reason) USING ERRCODE = 'invalid_parameter_value';
      END IF;
      SELECT j.status INTO was FROM %1$I.jobs j WHERE j.id = pgjobd_cancel.id FOR UPDATE;
      IF NOT FOUND THEN
        RAISE EXCEPTION 'pgjobd_cancel: job %% does not exist', pgjobd_cancel.id
          USING ERRCODE = 'no_data_found';
      END IF;
      message := coalesce('cancelled: ' || pgjobd_cancel.reason, 'cancelled');
      IF was IN ('pending', 'failed') THEN
        UPDATE %1$I.jobs j
        SET status = 'cancelled', finished_at = now(), updated_at = now(), last_error = message,
            cancel_requested_at = clock_timestamp(), cancel_reason = pgjobd_cancel.reason
        WHERE j.id = pgjobd_cancel.id;
        RETURN 'cancelled';
      ELSIF was = 'running' THEN
        UPDATE %1$I.jobs j
        SET cancel_requested_at = coalesce(j.cancel_requested_at, clock_timestamp()),
            cancel_reason = CASE WHEN j.cancel_requested_at IS NULL THEN pgjobd_cancel.reason
                                 ELSE j.cancel_reason END,
            updated_at = now()
        WHERE j.id = pgjobd_cancel.id;
        PERFORM pg_notify('pgjobd_cancel', %2$L);
        RETURN 'running';
      END IF;
      RETURN was;
    END
    $body$ $fmt$, s, s);

  -- Bulk forms for operators and the dashboard: each id in the array's order, one row per
  -- id, in one transaction; an id that does not exist gives a NULL status instead of
  -- failing the whole selection. The rules are those of pgjobd_cancel and pgjobd_retry.
  EXECUTE format($fmt$
    CREATE FUNCTION %1$I.pgjobd_cancel_many(ids bigint[], reason text DEFAULT NULL)
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
      FOREACH job IN ARRAY ids LOOP
        id := job;
        status := NULL;
        IF job IS NOT NULL AND EXISTS (SELECT 1 FROM %1$I.jobs j WHERE j.id = job) THEN
          status := %1$I.pgjobd_cancel(job, pgjobd_cancel_many.reason);
        END IF;
        RETURN NEXT;
      END LOOP;
    END
    $body$ $fmt$, s);

  -- previous_status is the status before (NULL: no such job); retried says whether it is
  -- pending again. A job pgjobd_retry refuses (pending, running, done, or its unique_key
  -- taken) is left as it is.
  EXECUTE format($fmt$
    CREATE FUNCTION %1$I.pgjobd_retry_many(ids bigint[])
      RETURNS TABLE (id bigint, previous_status text, retried boolean) LANGUAGE plpgsql
      SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    #variable_conflict use_column
    DECLARE
      job bigint;
    BEGIN
      IF ids IS NULL THEN
        RAISE EXCEPTION 'pgjobd_retry_many: ids must not be NULL'
          USING ERRCODE = 'null_value_not_allowed';
      END IF;
      FOREACH job IN ARRAY ids LOOP
        id := job;
        retried := false;
        SELECT j.status INTO previous_status FROM %1$I.jobs j WHERE j.id = job;
        IF previous_status IN ('failed', 'dead', 'cancelled') THEN
          BEGIN
            PERFORM %1$I.pgjobd_retry(job);
            retried := true;
          EXCEPTION WHEN unique_violation THEN
            retried := false;
          END;
        END IF;
        RETURN NEXT;
      END LOOP;
    END
    $body$ $fmt$, s);

  -- Every kept attempt of a job, oldest first, with its error (from errors, matched by
  -- attempt number) when it failed, and for a done job its last, successful attempt from
  -- the row itself. A reader, not SECURITY DEFINER: the caller needs SELECT on jobs (the
  -- operator role has it). A non-array attempt_log reads as empty.
  EXECUTE format($fmt$
    CREATE FUNCTION %1$I.pgjobd_job_attempts(id bigint)
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
        FROM %1$I.jobs j,
             jsonb_array_elements(CASE jsonb_typeof(j.attempt_log) WHEN 'array'
                                       THEN j.attempt_log ELSE '[]' END) WITH ORDINALITY a(value, n)
        WHERE j.id = pgjobd_job_attempts.id
        UNION ALL
        SELECT 1, 0, j.attempts, j.locked_by, j.started_at, j.finished_at, 'done', NULL
        FROM %1$I.jobs j
        WHERE j.id = pgjobd_job_attempts.id AND j.status = 'done'
      ) x
      ORDER BY x.part, x.n
    $body$ $fmt$, s);
END
$migration$;

REVOKE EXECUTE ON FUNCTION pgjobd_cancel(bigint, text), pgjobd_cancel_many(bigint[], text),
  pgjobd_retry_many(bigint[]), pgjobd_job_attempts(bigint) FROM PUBLIC;
