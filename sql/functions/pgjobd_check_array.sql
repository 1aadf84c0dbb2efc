-- The checks of a JSON array argument, shared by pgjobd_enqueue_many and
-- pgjobd_enqueue_workflow: an array of at most max_elements elements and max_bytes bytes
-- (README "Bounds of the SQL functions"). `context` names the function, `argument` the
-- argument; both start each message.
CREATE OR REPLACE FUNCTION @schema@.pgjobd_check_array(
    context text, argument text, value jsonb, max_elements int, max_bytes int)
  RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF value IS NULL OR jsonb_typeof(value) <> 'array' THEN
    RAISE EXCEPTION '%: % must be a JSON array of objects, not %', context, argument,
      coalesce(jsonb_typeof(value), 'NULL') USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF jsonb_array_length(value) > max_elements THEN
    RAISE EXCEPTION '%: % has % elements, over the bound of % per call', context, argument,
      jsonb_array_length(value), max_elements USING ERRCODE = 'program_limit_exceeded';
  END IF;
  IF pg_column_size(value) > max_bytes THEN
    RAISE EXCEPTION '%: % is % bytes, over the bound of % (% MiB) per call', context, argument,
      pg_column_size(value), max_bytes, max_bytes / 1048576
      USING ERRCODE = 'program_limit_exceeded';
  END IF;
END
$$;

-- PostgreSQL grants EXECUTE on a new function to PUBLIC: only roles granted it
-- (sql/grants.sql) may call this one.
REVOKE EXECUTE ON FUNCTION @schema@.pgjobd_check_array(text, text, jsonb, int, int) FROM PUBLIC;
