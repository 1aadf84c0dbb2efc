-- Many jobs from a JSON array of objects with pgjobd_enqueue's argument names as keys.
-- First every element is checked (so an error names the element, jobs[0] the first, and
-- the key), then all are inserted in one statement. Ids are drawn from the jobs sequence
-- beforehand so each inserted row is matched to its element: RETURNING cannot say which
-- input row a row came from. An element whose unique_key is taken gets the holder's id:
-- an earlier element of the same array, else a live row visible to the statement after
-- the insert, else (the holder finished meanwhile) it is enqueued on its own through
-- pgjobd_enqueue_ex, which waits and retries as it must.
CREATE OR REPLACE FUNCTION @schema@.pgjobd_enqueue_many(jobs jsonb)
  RETURNS SETOF bigint LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
      job jsonb;
      n bigint;
      unknown text;
      field text;
      ids bigint[];
      inserted bigint[];
      element_count int;
    BEGIN
      PERFORM @schema@.pgjobd_check_array('pgjobd_enqueue_many', 'jobs', jobs, 100000, 67108864);
      element_count := jsonb_array_length(jobs);
      -- Without its payload: the checks need none of it, and a copy per use of `job`
      -- would cost the payload's size each time.
      FOR job, n IN SELECT CASE jsonb_typeof(e.value) WHEN 'object' THEN e.value - 'payload'
                               ELSE e.value END, e.n - 1
                    FROM jsonb_array_elements(jobs) WITH ORDINALITY e(value, n)
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
        -- '{}' for the payload: its only check (not NULL) holds for any JSON value, and
        -- taking it out of the element would copy it.
        PERFORM @schema@.pgjobd_check_job(format('pgjobd_enqueue_many: jobs[%s]', n),
          job ->> 'type', '{}',
          CASE WHEN job ? 'queue' THEN job ->> 'queue' ELSE 'default' END,
          CASE WHEN job ? 'priority' THEN (job ->> 'priority')::int ELSE 0 END,
          CASE WHEN job ? 'run_at' THEN (job ->> 'run_at')::timestamptz ELSE now() END,
          CASE WHEN job ? 'max_attempts' THEN (job ->> 'max_attempts')::int ELSE 5 END,
          job ->> 'unique_key');
      END LOOP;

      -- The insert reads the elements straight from jsonb_array_elements (a tuplestore
      -- that spills to disk past work_mem) with ids drawn beforehand; what is kept for
      -- matching ids to elements holds no payload (bench/README.md, "enqueue_many's
      -- memory": a CTE of the elements with their payloads cost 4 copies of the input).
      SELECT coalesce(array_agg(nextval(@jobs_id_seq@::regclass) ORDER BY i), '{}') INTO ids
      FROM generate_series(1, element_count) i;
      WITH ins AS (
        INSERT INTO @schema@.jobs AS j (id, queue, type, payload, priority, run_at, max_attempts,
                                    unique_key)
        SELECT ids[e.n], CASE WHEN e.value ? 'queue' THEN e.value ->> 'queue' ELSE 'default' END,
               e.value ->> 'type',
               CASE WHEN e.value ? 'payload' THEN e.value -> 'payload' ELSE '{}' END,
               CASE WHEN e.value ? 'priority' THEN (e.value ->> 'priority')::int ELSE 0 END,
               CASE WHEN e.value ? 'run_at' THEN (e.value ->> 'run_at')::timestamptz
                    ELSE now() END,
               CASE WHEN e.value ? 'max_attempts' THEN (e.value ->> 'max_attempts')::int
                    ELSE 5 END,
               e.value ->> 'unique_key'
        FROM jsonb_array_elements(jobs) WITH ORDINALITY e(value, n)
        ORDER BY e.n
        ON CONFLICT (type, unique_key)
          WHERE unique_key IS NOT NULL AND status IN ('pending', 'running', 'failed')
        DO NOTHING
        RETURNING j.id
      )
      SELECT coalesce(array_agg(ins.id), '{}') INTO inserted FROM ins;
      IF cardinality(inserted) < element_count THEN
        -- Elements left out for their unique_key: each takes the id of the earlier element
        -- that holds the key, else of the live row that does.
        WITH input AS MATERIALIZED (
          SELECT e.n, ids[e.n] AS new_id, e.value ->> 'type' AS type,
                 e.value ->> 'unique_key' AS unique_key
          FROM jsonb_array_elements(jobs) WITH ORDINALITY e(value, n)
        ), ins AS (
          SELECT u.id FROM unnest(inserted) u(id)
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
      END IF;

      RETURN QUERY SELECT u.id FROM unnest(ids) WITH ORDINALITY u(id, n) ORDER BY u.n;
    END
    $body$;

-- PostgreSQL grants EXECUTE on a new function to PUBLIC: only roles granted it
-- (sql/grants.sql) may call this one.
REVOKE EXECUTE ON FUNCTION @schema@.pgjobd_enqueue_many(jsonb) FROM PUBLIC;
