-- One job. With a unique_key that a live job holds, nothing is inserted and that job's
-- id comes back with inserted = false. ON CONFLICT waits for a concurrent insert of the
-- same key, so exactly one of several concurrent callers inserts; the others then find
-- its row (each statement of a READ COMMITTED function sees what committed before it).
-- If the holder finished between the two statements, the key is free again: insert
-- again. The loop is bounded so that a caller whose snapshot cannot see the holder (a
-- REPEATABLE READ transaction) gets an error instead of spinning.
--
-- depends_on (README "Dependencies"): the job waits for those jobs (its parents) and is
-- inserted blocked, or pending at once when every parent is done already, or cancelled at
-- once when one failed and on_parent_failure is 'cancel'. The parents are locked (in id
-- order, so two such calls cannot deadlock) before they are read: a parent that ends
-- concurrently either ended before (its status is read here) or ends after this commits
-- (it has has_children then, and its trigger resolves the new edge). An empty array is no
-- parents.
CREATE OR REPLACE FUNCTION @schema@.pgjobd_enqueue_ex(
    type text, payload jsonb DEFAULT '{}', queue text DEFAULT 'default',
    priority int DEFAULT 0, run_at timestamptz DEFAULT pg_catalog.now(),
    max_attempts int DEFAULT 5, unique_key text DEFAULT NULL,
    depends_on bigint[] DEFAULT NULL, on_parent_failure text DEFAULT 'cancel',
    OUT id bigint, OUT inserted boolean)
  LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    #variable_conflict use_column
    BEGIN
      PERFORM @schema@.pgjobd_check_job('pgjobd_enqueue', pgjobd_enqueue_ex.type,
        pgjobd_enqueue_ex.payload, pgjobd_enqueue_ex.queue, pgjobd_enqueue_ex.priority,
        pgjobd_enqueue_ex.run_at, pgjobd_enqueue_ex.max_attempts, pgjobd_enqueue_ex.unique_key);
      IF cardinality(pgjobd_enqueue_ex.depends_on) > 0 THEN
        id := @schema@.pgjobd_enqueue_child(pgjobd_enqueue_ex.type, pgjobd_enqueue_ex.payload,
          pgjobd_enqueue_ex.queue, pgjobd_enqueue_ex.priority, pgjobd_enqueue_ex.run_at,
          pgjobd_enqueue_ex.max_attempts, pgjobd_enqueue_ex.unique_key,
          pgjobd_enqueue_ex.depends_on, pgjobd_enqueue_ex.on_parent_failure);
        inserted := true;
        RETURN;
      END IF;
      FOR attempt IN 1..100 LOOP
        INSERT INTO @schema@.jobs AS j (queue, type, payload, priority, run_at, max_attempts,
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
        SELECT j.id INTO pgjobd_enqueue_ex.id FROM @schema@.jobs j
        WHERE j.type = pgjobd_enqueue_ex.type AND j.unique_key = pgjobd_enqueue_ex.unique_key
          AND j.status IN ('pending', 'running', 'failed');
        IF FOUND THEN
          inserted := false;
          RETURN;
        END IF;
      END LOOP;
      RAISE EXCEPTION 'pgjobd_enqueue: the live job holding unique_key %L of type %L is not '
                      'visible to this transaction', pgjobd_enqueue_ex.unique_key,
                      pgjobd_enqueue_ex.type
        USING ERRCODE = 'serialization_failure';
    END
    $body$;

-- The id only: what most callers want. Calls pgjobd_enqueue_ex, so the rules are one.
CREATE OR REPLACE FUNCTION @schema@.pgjobd_enqueue(
    type text, payload jsonb DEFAULT '{}', queue text DEFAULT 'default',
    priority int DEFAULT 0, run_at timestamptz DEFAULT pg_catalog.now(),
    max_attempts int DEFAULT 5, unique_key text DEFAULT NULL,
    depends_on bigint[] DEFAULT NULL, on_parent_failure text DEFAULT 'cancel')
  RETURNS bigint LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
      SELECT e.id FROM @schema@.pgjobd_enqueue_ex(pgjobd_enqueue.type, pgjobd_enqueue.payload,
        pgjobd_enqueue.queue, pgjobd_enqueue.priority, pgjobd_enqueue.run_at,
        pgjobd_enqueue.max_attempts, pgjobd_enqueue.unique_key, pgjobd_enqueue.depends_on,
        pgjobd_enqueue.on_parent_failure) AS e
    $body$;

-- PostgreSQL grants EXECUTE on a new function to PUBLIC: only roles granted it
-- (sql/grants.sql) may call these.
REVOKE EXECUTE ON FUNCTION @schema@.pgjobd_enqueue_ex(text, jsonb, text, int, timestamptz,
  int, text, bigint[], text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @schema@.pgjobd_enqueue(text, jsonb, text, int, timestamptz,
  int, text, bigint[], text) FROM PUBLIC;
