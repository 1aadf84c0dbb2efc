-- pgjobd schema v4: a SQL interface for applications and operators (README "SQL
-- interface"): enqueue one job or many, retry a job, pause and resume a queue.
--
-- The functions that change jobs are SECURITY DEFINER, so a role can be allowed to enqueue
-- (or retry, or pause) without any right on the tables (sql/grants.sql). Such a function
-- runs as the owner, so it must not resolve a name through the caller's search_path: each
-- one has SET search_path = pg_catalog, pg_temp and names every table of this schema
-- qualified. The schema is only known now, so those functions are created by dynamic SQL
-- with current_schema() (the migrator's search_path is the configured schema) spelled in.
-- EXECUTE on them is revoked from PUBLIC: nobody may enqueue through them unless granted.

-- Paused queues. A row per queue ever paused or resumed; no row means not paused, so a
-- queue can be paused before it has any job. The claim statement reads it (kClaimSql).
CREATE TABLE pgjobd_queues (
  queue       text        PRIMARY KEY,
  paused      boolean     NOT NULL DEFAULT false,
  updated_at  timestamptz,
  CONSTRAINT pgjobd_queues_queue_length CHECK (char_length(queue) BETWEEN 1 AND 200)
);

-- The checks of one job's values, shared by pgjobd_enqueue_ex and pgjobd_enqueue_many so
-- both refuse the same values with the same words. The bounds are schema v3's constraints
-- (sql/003_bounds.up.sql) plus smallint's range for priority, whose parameter is an int so
-- that a plain literal is accepted. A constraint would refuse these values too, but by a
-- constraint name; these errors name the argument. `context` starts each message.
CREATE FUNCTION pgjobd_check_job(context text, type text, payload jsonb, queue text,
                                 priority int, run_at timestamptz, max_attempts int,
                                 unique_key text)
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
  IF queue IS NULL THEN
    RAISE EXCEPTION '%: queue must not be NULL', context USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF char_length(queue) NOT BETWEEN 1 AND 200 THEN
    RAISE EXCEPTION '%: queue must be 1..200 characters long, not %', context,
      char_length(queue) USING ERRCODE = 'invalid_parameter_value';
  END IF;
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

-- A queue name as pgjobd_pause_queue and pgjobd_resume_queue accept it.
CREATE FUNCTION pgjobd_check_queue(context text, queue text)
  RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF queue IS NULL THEN
    RAISE EXCEPTION '%: queue must not be NULL', context USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF char_length(queue) NOT BETWEEN 1 AND 200 THEN
    RAISE EXCEPTION '%: queue must be 1..200 characters long, not %', context,
      char_length(queue) USING ERRCODE = 'invalid_parameter_value';
  END IF;
END
$$;

-- In the format() strings below %1$I is this schema, %2$L its name as a literal (the NOTIFY
-- payload, as the INSERT trigger sends it), %3$L the jobs id sequence; a literal % is %%.
DO $migration$
DECLARE
  s text := current_schema();
  seq text := pg_get_serial_sequence(format('%I.jobs', current_schema()), 'id');
BEGIN
  -- One job. With a unique_key that a live job holds, nothing is inserted and that job's
  -- id comes back with inserted = false. ON CONFLICT waits for a concurrent insert of the
  -- same key, so exactly one of several concurrent callers inserts; the others then find
  -- its row (each statement of a READ COMMITTED function sees what committed before it).
  -- If the holder finished between the two statements, the key is free again: insert
  -- again. The loop is bounded so that a caller whose snapshot cannot see the holder (a
  -- REPEATABLE READ transaction) gets an error instead of spinning.
  EXECUTE format($fmt$
    CREATE FUNCTION %1$I.pgjobd_enqueue_ex(
        type text, payload jsonb DEFAULT '{}', queue text DEFAULT 'default',
        priority int DEFAULT 0, run_at timestamptz DEFAULT pg_catalog.now(),
        max_attempts int DEFAULT 5, unique_key text DEFAULT NULL,
        OUT id bigint, OUT inserted boolean)
      LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    #variable_conflict use_column
    BEGIN
      PERFORM %1$I.pgjobd_check_job('pgjobd_enqueue', pgjobd_enqueue_ex.type,
        pgjobd_enqueue_ex.payload, pgjobd_enqueue_ex.queue, pgjobd_enqueue_ex.priority,
        pgjobd_enqueue_ex.run_at, pgjobd_enqueue_ex.max_attempts, pgjobd_enqueue_ex.unique_key);
      FOR attempt IN 1..100 LOOP
        INSERT INTO %1$I.jobs AS j (queue, type, payload, priority, run_at, max_attempts,
                                    unique_key)
        VALUES (pgjobd_enqueue_ex.queue, pgjobd_enqueue_ex.type, pgjobd_enqueue_ex.payload,
                pgjobd_enqueue_ex.priority, pgjobd_enqueue_ex.run_at,
                pgjobd_enqueue_ex.max_attempts, pgjobd_enqueue_ex.unique_key)
        ON CONFLICT (type, unique_key)
          WHERE unique_key IS NOT NULL AND status IN ('pending', 'running', 'failed')
        DO NOTHING
        RETURNING j.id INTO pgjobd_enqueue_ex.id;
        IF FOUND THEN
          inserted := true;
          RETURN;
        END IF;
        SELECT j.id INTO pgjobd_enqueue_ex.id FROM %1$I.jobs j
        WHERE j.type = pgjobd_enqueue_ex.type AND j.unique_key = pgjobd_enqueue_ex.unique_key
          AND j.status IN ('pending', 'running', 'failed');
        IF FOUND THEN
          inserted := false;
          RETURN;
        END IF;
      END LOOP;
      RAISE EXCEPTION 'pgjobd_enqueue: the live job holding unique_key %%L of type %%L is not '
                      'visible to this transaction', pgjobd_enqueue_ex.unique_key,
                      pgjobd_enqueue_ex.type
        USING ERRCODE = 'serialization_failure';
    END
    $body$ $fmt$, s);

  -- The id only: what most callers want. Calls pgjobd_enqueue_ex, so the rules are one.
  EXECUTE format($fmt$
    CREATE FUNCTION %1$I.pgjobd_enqueue(
        type text, payload jsonb DEFAULT '{}', queue text DEFAULT 'default',
        priority int DEFAULT 0, run_at timestamptz DEFAULT pg_catalog.now(),
        max_attempts int DEFAULT 5, unique_key text DEFAULT NULL)
      RETURNS bigint LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
      SELECT e.id FROM %1$I.pgjobd_enqueue_ex(pgjobd_enqueue.type, pgjobd_enqueue.payload,
        pgjobd_enqueue.queue, pgjobd_enqueue.priority, pgjobd_enqueue.run_at,
        pgjobd_enqueue.max_attempts, pgjobd_enqueue.unique_key) AS e
    $body$ $fmt$, s);

  -- Many jobs from a JSON array of objects with pgjobd_enqueue's argument names as keys.
  -- First every element is checked (so an error names the element, jobs[0] the first, and
  -- the key), then all are inserted in one statement. Ids are drawn from the jobs sequence
  -- beforehand so each inserted row is matched to its element: RETURNING cannot say which
  -- input row a row came from. An element whose unique_key is taken gets the holder's id:
  -- an earlier element of the same array, else a live row visible to the statement, else
  -- (a holder committed or finished while the statement ran) it is enqueued on its own
  -- through pgjobd_enqueue_ex, which waits and retries as it must.
  EXECUTE format($fmt$
    CREATE FUNCTION %1$I.pgjobd_enqueue_many(jobs jsonb)
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
        RAISE EXCEPTION 'pgjobd_enqueue_many: jobs must be a JSON array of objects, not %%',
          coalesce(jsonb_typeof(jobs), 'NULL') USING ERRCODE = 'invalid_parameter_value';
      END IF;
      FOR job, n IN SELECT e.value, e.n - 1 FROM jsonb_array_elements(jobs) WITH ORDINALITY e(value, n)
      LOOP
        IF jsonb_typeof(job) <> 'object' THEN
          RAISE EXCEPTION 'pgjobd_enqueue_many: jobs[%%] must be an object, not %%', n,
            jsonb_typeof(job) USING ERRCODE = 'invalid_parameter_value';
        END IF;
        SELECT string_agg(k, ', ' ORDER BY k) INTO unknown FROM jsonb_object_keys(job) k
        WHERE k <> ALL (ARRAY['type', 'payload', 'queue', 'priority', 'run_at',
                              'max_attempts', 'unique_key']);
        IF unknown IS NOT NULL THEN
          RAISE EXCEPTION 'pgjobd_enqueue_many: jobs[%%] has unknown key(s): %%', n, unknown
            USING ERRCODE = 'invalid_parameter_value';
        END IF;
        FOREACH field IN ARRAY ARRAY['type', 'queue', 'run_at', 'unique_key'] LOOP
          IF jsonb_typeof(job -> field) NOT IN ('string', 'null') THEN
            RAISE EXCEPTION 'pgjobd_enqueue_many: jobs[%%].%%: must be a string, not %%', n,
              field, jsonb_typeof(job -> field) USING ERRCODE = 'invalid_parameter_value';
          END IF;
        END LOOP;
        FOREACH field IN ARRAY ARRAY['priority', 'max_attempts'] LOOP
          IF jsonb_typeof(job -> field) NOT IN ('number', 'null')
             OR (jsonb_typeof(job -> field) = 'number'
                 AND ((job ->> field)::numeric %% 1 <> 0
                      OR (job ->> field)::numeric NOT BETWEEN -2147483648 AND 2147483647)) THEN
            RAISE EXCEPTION 'pgjobd_enqueue_many: jobs[%%].%%: must be an integer, not %%', n,
              field, job -> field USING ERRCODE = 'invalid_parameter_value';
          END IF;
        END LOOP;
        PERFORM %1$I.pgjobd_check_job(format('pgjobd_enqueue_many: jobs[%%s]', n),
          job ->> 'type', CASE WHEN job ? 'payload' THEN job -> 'payload' ELSE '{}' END,
          CASE WHEN job ? 'queue' THEN job ->> 'queue' ELSE 'default' END,
          CASE WHEN job ? 'priority' THEN (job ->> 'priority')::int ELSE 0 END,
          CASE WHEN job ? 'run_at' THEN (job ->> 'run_at')::timestamptz ELSE now() END,
          CASE WHEN job ? 'max_attempts' THEN (job ->> 'max_attempts')::int ELSE 5 END,
          job ->> 'unique_key');
      END LOOP;

      WITH input AS MATERIALIZED (
        SELECT e.n, nextval(%3$L::regclass) AS new_id, e.value ->> 'type' AS type,
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
        INSERT INTO %1$I.jobs AS j (id, queue, type, payload, priority, run_at, max_attempts,
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
      LEFT JOIN %1$I.jobs live ON live.type = i.type AND live.unique_key = i.unique_key
        AND live.unique_key IS NOT NULL AND live.status IN ('pending', 'running', 'failed');

      FOR n IN SELECT u.n FROM unnest(ids) WITH ORDINALITY u(id, n) WHERE u.id IS NULL LOOP
        job := jobs -> (n - 1)::int;
        ids[n] := (SELECT e.id FROM %1$I.pgjobd_enqueue_ex(job ->> 'type',
          CASE WHEN job ? 'payload' THEN job -> 'payload' ELSE '{}' END,
          CASE WHEN job ? 'queue' THEN job ->> 'queue' ELSE 'default' END,
          CASE WHEN job ? 'priority' THEN (job ->> 'priority')::int ELSE 0 END,
          CASE WHEN job ? 'run_at' THEN (job ->> 'run_at')::timestamptz ELSE now() END,
          CASE WHEN job ? 'max_attempts' THEN (job ->> 'max_attempts')::int ELSE 5 END,
          job ->> 'unique_key') e);
      END LOOP;

      RETURN QUERY SELECT u.id FROM unnest(ids) WITH ORDINALITY u(id, n) ORDER BY u.n;
    END
    $body$ $fmt$, s, quote_literal(s), seq);

  -- The rules of `pgjobd retry` (before schema v4 in AdminSession::retry): only a failed,
  -- dead or cancelled job; it becomes pending and due now; a dead job gets one more attempt
  -- and keeps its error history. Returns the status it had.
  EXECUTE format($fmt$
    CREATE FUNCTION %1$I.pgjobd_retry(id bigint)
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
        -- A dead or cancelled job's unique_key may have been taken by a newer live job.
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

  -- Pause and resume: idempotent, and possible before the queue has any job. Every claim
  -- reads pgjobd_queues, so every daemon obeys at its next claim whether or not it heard
  -- the NOTIFY; the NOTIFY (the INSERT trigger's channel and payload) makes idle daemons
  -- claim at once, which after a resume starts the queue's due jobs without waiting for a
  -- poll. updated_at is the time of the last change.
  EXECUTE format($fmt$
    CREATE FUNCTION %1$I.pgjobd_pause_queue(queue text)
      RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    BEGIN
      PERFORM %1$I.pgjobd_check_queue('pgjobd_pause_queue', pgjobd_pause_queue.queue);
      INSERT INTO %1$I.pgjobd_queues AS q (queue, paused, updated_at)
      VALUES (pgjobd_pause_queue.queue, true, now())
      ON CONFLICT ON CONSTRAINT pgjobd_queues_pkey DO UPDATE
        SET paused = true, updated_at = now() WHERE NOT q.paused;
      PERFORM pg_notify('pgjobd_jobs', %2$s);
    END
    $body$ $fmt$, s, quote_literal(s));

  EXECUTE format($fmt$
    CREATE FUNCTION %1$I.pgjobd_resume_queue(queue text)
      RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    BEGIN
      PERFORM %1$I.pgjobd_check_queue('pgjobd_resume_queue', pgjobd_resume_queue.queue);
      UPDATE %1$I.pgjobd_queues q SET paused = false, updated_at = now()
      WHERE q.queue = pgjobd_resume_queue.queue AND q.paused;
      PERFORM pg_notify('pgjobd_jobs', %2$s);
    END
    $body$ $fmt$, s, quote_literal(s));
END
$migration$;

-- PostgreSQL grants EXECUTE on a new function to PUBLIC: for these, only roles granted it
-- (sql/grants.sql) may call them.
REVOKE EXECUTE ON FUNCTION
  pgjobd_check_job(text, text, jsonb, text, int, timestamptz, int, text),
  pgjobd_check_queue(text, text),
  pgjobd_enqueue_ex(text, jsonb, text, int, timestamptz, int, text),
  pgjobd_enqueue(text, jsonb, text, int, timestamptz, int, text),
  pgjobd_enqueue_many(jsonb),
  pgjobd_retry(bigint),
  pgjobd_pause_queue(text),
  pgjobd_resume_queue(text)
FROM PUBLIC;
