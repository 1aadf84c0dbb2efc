-- Many jobs from a JSON array of objects with pgjobd_enqueue's argument names as keys.
-- First every element is checked (so an error names the element, jobs[0] the first, and
-- the key), then all are inserted in one statement. Ids are drawn from the jobs sequence
-- beforehand so each inserted row is matched to its element: RETURNING cannot say which
-- input row a row came from. An element whose unique_key is taken gets the holder's id:
-- an earlier element of the same array, else a live row visible to the statement, else
-- (a holder committed or finished while the statement ran) it is enqueued on its own
-- through pgjobd_enqueue_ex, which waits and retries as it must.
CREATE OR REPLACE FUNCTION @schema@.pgjobd_enqueue_many(jobs jsonb)
  RETURNS SETOF bigint LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
      job jsonb;
      n bigint;
      unknown text;
      field text;
      ids bigint[];
    BEGIN
      IF jobs IS NULL OR jsonb_typeof(jobs) <> 'array' THEN
        RAISE EXCEPTION 'pgjobd_enqueue_many: jobs must be a JSON array of objects, not %',
          coalesce(jsonb_typeof(jobs), 'NULL') USING ERRCODE = 'invalid_parameter_value';
      END IF;
      FOR job, n IN SELECT e.value, e.n - 1 FROM jsonb_array_elements(jobs) WITH ORDINALITY e(value, n)
      LOOP
        IF jsonb_typeof(job) <> 'object' THEN
          RAISE EXCEPTION 'pgjobd_enqueue_many: jobs[%] must be an object, not %', n,
            jsonb_typeof(job) USING ERRCODE = 'invalid_parameter_value';
        END IF;
        SELECT string_agg(k, ', ' ORDER BY k) INTO unknown FROM jsonb_object_keys(job) k
        WHERE k <> ALL (ARRAY['type', 'payload', 'queue', 'priority', 'run_at',
                              'max_attempts', 'unique_key']);
        IF unknown IS NOT NULL THEN
          RAISE EXCEPTION 'pgjobd_enqueue_many: jobs[%] has unknown key(s): %', n, unknown
            USING ERRCODE = 'invalid_parameter_value';
        END IF;
        FOREACH field IN ARRAY ARRAY['type', 'queue', 'run_at', 'unique_key'] LOOP
          IF jsonb_typeof(job -> field) NOT IN ('string', 'null') THEN
            RAISE EXCEPTION 'pgjobd_enqueue_many: jobs[%].%: must be a string, not %', n,
              field, jsonb_typeof(job -> field) USING ERRCODE = 'invalid_parameter_value';
          END IF;
        END LOOP;
        FOREACH field IN ARRAY ARRAY['priority', 'max_attempts'] LOOP
          IF jsonb_typeof(job -> field) NOT IN ('number', 'null')
             OR (jsonb_typeof(job -> field) = 'number'
                 AND ((job ->> field)::numeric % 1 <> 0
                      OR (job ->> field)::numeric NOT BETWEEN -2147483648 AND 2147483647)) THEN
            RAISE EXCEPTION 'pgjobd_enqueue_many: jobs[%].%: must be an integer, not %', n,
              field, job -> field USING ERRCODE = 'invalid_parameter_value';
          END IF;
        END LOOP;
        PERFORM @schema@.pgjobd_check_job(format('pgjobd_enqueue_many: jobs[%s]', n),
          job ->> 'type', CASE WHEN job ? 'payload' THEN job -> 'payload' ELSE '{}' END,
          CASE WHEN job ? 'queue' THEN job ->> 'queue' ELSE 'default' END,
          CASE WHEN job ? 'priority' THEN (job ->> 'priority')::int ELSE 0 END,
          CASE WHEN job ? 'run_at' THEN (job ->> 'run_at')::timestamptz ELSE now() END,
          CASE WHEN job ? 'max_attempts' THEN (job ->> 'max_attempts')::int ELSE 5 END,
          job ->> 'unique_key');
      END LOOP;

      WITH input AS MATERIALIZED (
        SELECT e.n, nextval(@jobs_id_seq@::regclass) AS new_id, e.value ->> 'type' AS type,
               CASE WHEN e.value ? 'payload' THEN e.value -> 'payload' ELSE '{}' END AS payload,
               CASE WHEN e.value ? 'queue' THEN e.value ->> 'queue' ELSE 'default' END AS queue,
               CASE WHEN e.value ? 'priority' THEN (e.value ->> 'priority')::int ELSE 0 END
                 AS priority,
               CASE WHEN e.value ? 'run_at' THEN (e.value ->> 'run_at')::timestamptz
                    ELSE now() END AS run_at,
               CASE WHEN e.value ? 'max_attempts' THEN (e.value ->> 'max_attempts')::int
                    ELSE 5 END AS max_attempts,
               e.value ->> 'unique_key' AS unique_key
        FROM jsonb_array_elements(jobs) WITH ORDINALITY e(value, n)
      ), ins AS (
        INSERT INTO @schema@.jobs AS j (id, queue, type, payload, priority, run_at, max_attempts,
                                    unique_key)
        SELECT i.new_id, i.queue, i.type, i.payload, i.priority, i.run_at, i.max_attempts,
               i.unique_key
        FROM input i ORDER BY i.n
        ON CONFLICT (type, unique_key)
          WHERE unique_key IS NOT NULL AND status IN ('pending', 'running', 'failed')
        DO NOTHING
        RETURNING j.id
      ), keyed AS (
        SELECT i.type, i.unique_key, i.new_id FROM input i JOIN ins ON ins.id = i.new_id
        WHERE i.unique_key IS NOT NULL
      )
      SELECT array_agg(coalesce(ins.id, keyed.new_id, live.id) ORDER BY i.n) INTO ids
      FROM input i
      LEFT JOIN ins ON ins.id = i.new_id
      LEFT JOIN keyed ON keyed.type = i.type AND keyed.unique_key = i.unique_key
      LEFT JOIN @schema@.jobs live ON live.type = i.type AND live.unique_key = i.unique_key
        AND live.unique_key IS NOT NULL AND live.status IN ('pending', 'running', 'failed');

      FOR n IN SELECT u.n FROM unnest(ids) WITH ORDINALITY u(id, n) WHERE u.id IS NULL LOOP
        job := jobs -> (n - 1)::int;
        ids[n] := (SELECT e.id FROM @schema@.pgjobd_enqueue_ex(job ->> 'type',
          CASE WHEN job ? 'payload' THEN job -> 'payload' ELSE '{}' END,
          CASE WHEN job ? 'queue' THEN job ->> 'queue' ELSE 'default' END,
          CASE WHEN job ? 'priority' THEN (job ->> 'priority')::int ELSE 0 END,
          CASE WHEN job ? 'run_at' THEN (job ->> 'run_at')::timestamptz ELSE now() END,
          CASE WHEN job ? 'max_attempts' THEN (job ->> 'max_attempts')::int ELSE 5 END,
          job ->> 'unique_key') e);
      END LOOP;

      RETURN QUERY SELECT u.id FROM unnest(ids) WITH ORDINALITY u(id, n) ORDER BY u.n;
    END
    $body$;

-- PostgreSQL grants EXECUTE on a new function to PUBLIC: only roles granted it
-- (sql/grants.sql) may call this one.
REVOKE EXECUTE ON FUNCTION @schema@.pgjobd_enqueue_many(jsonb) FROM PUBLIC;
