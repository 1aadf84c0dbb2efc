-- Reverts 005_cancel_history.up.sql: the cancel and history columns and functions, and
-- pgjobd_retry as schema v4 had it (it no longer clears a cancel request, having none).
DROP FUNCTION IF EXISTS pgjobd_job_attempts(bigint);
DROP FUNCTION IF EXISTS pgjobd_retry_many(bigint[]);
DROP FUNCTION IF EXISTS pgjobd_cancel_many(bigint[], text);
DROP FUNCTION IF EXISTS pgjobd_cancel(bigint, text);

DO $migration$
DECLARE
  s text := current_schema();
BEGIN
  EXECUTE format($fmt$
    CREATE OR REPLACE FUNCTION %1$I.pgjobd_retry(id bigint)
      RETURNS text LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    #variable_conflict use_column
    DECLARE
      was text;
      holder bigint;
    BEGIN
      IF pgjobd_retry.id IS NULL THEN
        RAISE EXCEPTION 'pgjobd_retry: id must not be NULL' USING ERRCODE = 'null_value_not_allowed';
      END IF;
      SELECT j.status INTO was FROM %1$I.jobs j WHERE j.id = pgjobd_retry.id FOR UPDATE;
      IF NOT FOUND THEN
        RAISE EXCEPTION 'pgjobd_retry: job %% does not exist', pgjobd_retry.id
          USING ERRCODE = 'no_data_found';
      END IF;
      IF was NOT IN ('failed', 'dead', 'cancelled') THEN
        RAISE EXCEPTION 'pgjobd_retry: job %% is %%: only failed, dead or cancelled jobs can be retried',
          pgjobd_retry.id, was USING ERRCODE = 'object_not_in_prerequisite_state';
      END IF;
      BEGIN
        UPDATE %1$I.jobs j
        SET status = 'pending', run_at = now(), finished_at = NULL,
            max_attempts = greatest(j.max_attempts, j.attempts + 1), updated_at = now()
        WHERE j.id = pgjobd_retry.id;
      EXCEPTION WHEN unique_violation THEN
        SELECT l.id INTO holder FROM %1$I.jobs o JOIN %1$I.jobs l
          ON l.type = o.type AND l.unique_key = o.unique_key
         AND l.status IN ('pending', 'running', 'failed')
        WHERE o.id = pgjobd_retry.id;
        RAISE EXCEPTION 'pgjobd_retry: job %% cannot be retried: live job %% holds its unique_key',
          pgjobd_retry.id, holder USING ERRCODE = 'unique_violation';
      END;
      RETURN was;
    END
    $body$ $fmt$, s);
END
$migration$;

ALTER TABLE jobs
  DROP COLUMN IF EXISTS attempt_log,
  DROP COLUMN IF EXISTS cancel_reason,
  DROP COLUMN IF EXISTS cancel_requested_at;
