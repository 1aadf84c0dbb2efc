-- The rules of `pgjobd retry` (before schema v4 in AdminSession::retry): only a failed,
-- dead or cancelled job; it becomes pending and due now (blocked, if it still waits for
-- parents); a dead job gets one more attempt and keeps its error history. Returns the status it had. pgjobd_retry_job applies them
-- without waking the daemons, so that pgjobd_retry_many wakes them once per call; only
-- SECURITY DEFINER functions call it, so it needs no grant.
CREATE OR REPLACE FUNCTION @schema@.pgjobd_retry_job(id bigint)
  RETURNS text LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $body$
    #variable_conflict use_column
    DECLARE
      was text;
      holder bigint;
      open_parents int;
    BEGIN
      IF pgjobd_retry_job.id IS NULL THEN
        RAISE EXCEPTION 'pgjobd_retry: id must not be NULL' USING ERRCODE = 'null_value_not_allowed';
      END IF;
      SELECT j.status INTO was FROM @schema@.jobs j WHERE j.id = pgjobd_retry_job.id FOR UPDATE;
      IF NOT FOUND THEN
        RAISE EXCEPTION 'pgjobd_retry: job % does not exist', pgjobd_retry_job.id
          USING ERRCODE = 'no_data_found';
      END IF;
      IF was NOT IN ('failed', 'dead', 'cancelled') THEN
        RAISE EXCEPTION 'pgjobd_retry: job % is %: only failed, dead or cancelled jobs can be retried',
          pgjobd_retry_job.id, was USING ERRCODE = 'object_not_in_prerequisite_state';
      END IF;
      -- A child cancelled by a failed parent waits again for the parents that have not
      -- ended (blocked), or, with none left, runs with every parent's end in `_parents`
      -- (README "Dependencies"). They are counted again: the parents that ended while it
      -- was cancelled did not count down a job that was not blocked. A parent ending now
      -- is waited for (FOR SHARE), then read as it ended; one that ends after the count
      -- finds the job blocked and counts it down.
      SELECT count(*)::int INTO open_parents FROM (
        SELECT 1 FROM @schema@.pgjobd_dependencies d
        JOIN @schema@.jobs p ON p.id = d.parent_id
        WHERE d.child_id = pgjobd_retry_job.id AND d.parent_status IS NULL
          AND p.status NOT IN ('done', 'dead', 'cancelled')
        FOR SHARE OF p) o;
      BEGIN
        UPDATE @schema@.jobs j
        SET status = CASE WHEN open_parents > 0 THEN 'blocked' ELSE 'pending' END,
            blocked_by = open_parents,
            payload = CASE WHEN j.on_parent_failure IS NULL OR open_parents > 0 THEN j.payload
                      ELSE j.payload || jsonb_build_object('_parents', coalesce(
                        (SELECT x.parents FROM @schema@.pgjobd_parents_of(ARRAY[j.id]) x),
                        '{}'::jsonb)) END,
            run_at = now(), finished_at = NULL,
            max_attempts = greatest(j.max_attempts, j.attempts + 1), updated_at = now()
        WHERE j.id = pgjobd_retry_job.id;
      EXCEPTION WHEN unique_violation THEN
        -- A dead or cancelled job's unique_key may have been taken by a newer live job.
        SELECT l.id INTO holder FROM @schema@.jobs o JOIN @schema@.jobs l
          ON l.type = o.type AND l.unique_key = o.unique_key
         AND l.status IN ('pending', 'running', 'failed')
        WHERE o.id = pgjobd_retry_job.id;
        RAISE EXCEPTION 'pgjobd_retry: job % cannot be retried: live job % holds its unique_key',
          pgjobd_retry_job.id, holder USING ERRCODE = 'unique_violation';
      END;
      RETURN was;
    END
    $body$;

REVOKE EXECUTE ON FUNCTION @schema@.pgjobd_retry_job(bigint) FROM PUBLIC;

-- The job is due now: the daemons are woken as by an INSERT (pgjobd_notify_insert.sql), so
-- it is claimed in milliseconds, not at their next poll.
CREATE OR REPLACE FUNCTION @schema@.pgjobd_retry(id bigint)
  RETURNS text LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
      was constant text := @schema@.pgjobd_retry_job(pgjobd_retry.id);
    BEGIN
      PERFORM @schema@.pgjobd_notify_jobs();
      RETURN was;
    END
    $body$;

-- PostgreSQL grants EXECUTE on a new function to PUBLIC: only roles granted it
-- (sql/grants.sql) may call this one.
REVOKE EXECUTE ON FUNCTION @schema@.pgjobd_retry(bigint) FROM PUBLIC;
