-- Cancel: a blocked, pending or failed job is cancelled at once (its blocked children are
-- resolved by the trigger of pgjobd_dependencies.sql); a running one is marked and its
-- daemon told (NOTIFY on pgjobd_cancel, delivered at commit: a rolled-back cancel
-- cancels nothing); a finished one is left as it is. Idempotent: a second cancel of a
-- running job keeps the first request's time and reason and notifies again (harmless,
-- and it covers a lost notification). Returns the status the job is left in: 'cancelled',
-- 'running' (stopping), or the 'done', 'dead' or 'cancelled' it already had.
-- clock_timestamp(), not now(): the row lock may have been waited for, and the mark must
-- not predate the claim that made the job running.
CREATE OR REPLACE FUNCTION @schema@.pgjobd_cancel(id bigint, reason text DEFAULT NULL)
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
        RAISE EXCEPTION 'pgjobd_cancel: reason must be at most 8192 bytes long, not %',
          octet_length(pgjobd_cancel.reason) USING ERRCODE = 'invalid_parameter_value';
      END IF;
      SELECT j.status INTO was FROM @schema@.jobs j WHERE j.id = pgjobd_cancel.id FOR UPDATE;
      IF NOT FOUND THEN
        RAISE EXCEPTION 'pgjobd_cancel: job % does not exist', pgjobd_cancel.id
          USING ERRCODE = 'no_data_found';
      END IF;
      message := coalesce('cancelled: ' || pgjobd_cancel.reason, 'cancelled');
      IF was IN ('blocked', 'pending', 'failed') THEN
        UPDATE @schema@.jobs j
        SET status = 'cancelled', finished_at = now(), updated_at = now(), last_error = message,
            cancel_requested_at = clock_timestamp(), cancel_reason = pgjobd_cancel.reason
        WHERE j.id = pgjobd_cancel.id;
        RETURN 'cancelled';
      ELSIF was = 'running' THEN
        UPDATE @schema@.jobs j
        SET cancel_requested_at = coalesce(j.cancel_requested_at, clock_timestamp()),
            cancel_reason = CASE WHEN j.cancel_requested_at IS NULL THEN pgjobd_cancel.reason
                                 ELSE j.cancel_reason END,
            updated_at = now()
        WHERE j.id = pgjobd_cancel.id;
        PERFORM pg_notify('pgjobd_cancel', @schema_name@);
        RETURN 'running';
      END IF;
      RETURN was;
    END
    $body$;

-- PostgreSQL grants EXECUTE on a new function to PUBLIC: only roles granted it
-- (sql/grants.sql) may call this one.
REVOKE EXECUTE ON FUNCTION @schema@.pgjobd_cancel(bigint, text) FROM PUBLIC;
