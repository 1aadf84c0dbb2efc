-- The checks of one job's values, shared by pgjobd_enqueue_ex and pgjobd_enqueue_many so
-- both refuse the same values with the same words. The bounds are the constraints of
-- jobs (sql/003_bounds.up.sql) plus smallint's range for priority, whose parameter is an int so
-- that a plain literal is accepted. A constraint would refuse these values too, but by a
-- constraint name; these errors name the argument. `context` starts each message.
CREATE OR REPLACE FUNCTION @schema@.pgjobd_check_job(
    context text, type text, payload jsonb, queue text, priority int, run_at timestamptz,
    max_attempts int, unique_key text)
  RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF type IS NULL THEN
    RAISE EXCEPTION '%: type must not be NULL', context USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF char_length(type) NOT BETWEEN 1 AND 200 THEN
    RAISE EXCEPTION '%: type must be 1..200 characters long, not %', context, char_length(type)
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF payload IS NULL THEN
    RAISE EXCEPTION '%: payload must not be NULL (''{}'' is the empty payload)', context
      USING ERRCODE = 'null_value_not_allowed';
  END IF;
  -- README "Bounds of the SQL functions": inserting a value costs the server a few copies
  -- of it; larger payloads can still be INSERTed into jobs directly.
  IF pg_column_size(payload) > 67108864 THEN
    RAISE EXCEPTION '%: payload is % bytes, over the bound of 67108864 (64 MiB) per call',
      context, pg_column_size(payload) USING ERRCODE = 'program_limit_exceeded';
  END IF;
  PERFORM @schema@.pgjobd_check_queue(context, queue);
  IF priority IS NULL THEN
    RAISE EXCEPTION '%: priority must not be NULL', context
      USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF priority NOT BETWEEN -32768 AND 32767 THEN
    RAISE EXCEPTION '%: priority must be between -32768 and 32767, not %', context, priority
      USING ERRCODE = 'numeric_value_out_of_range';
  END IF;
  IF run_at IS NULL THEN
    RAISE EXCEPTION '%: run_at must not be NULL', context USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF NOT isfinite(run_at) THEN
    RAISE EXCEPTION '%: run_at must be a finite time, not %', context, run_at
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF max_attempts IS NULL THEN
    RAISE EXCEPTION '%: max_attempts must not be NULL', context
      USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF max_attempts NOT BETWEEN 1 AND 1000000 THEN
    RAISE EXCEPTION '%: max_attempts must be between 1 and 1000000, not %', context, max_attempts
      USING ERRCODE = 'numeric_value_out_of_range';
  END IF;
  IF octet_length(unique_key) > 1024 THEN
    RAISE EXCEPTION '%: unique_key must be at most 1024 bytes long, not %', context,
      octet_length(unique_key) USING ERRCODE = 'invalid_parameter_value';
  END IF;
END
$$;

-- PostgreSQL grants EXECUTE on a new function to PUBLIC: only roles granted it
-- (sql/grants.sql) may call this one.
REVOKE EXECUTE ON FUNCTION @schema@.pgjobd_check_job(text, text, jsonb, text, int,
  timestamptz, int, text) FROM PUBLIC;
