-- pgjobd_enqueue_ex with depends_on (see there): the checks of the dependency arguments,
-- the parents locked and marked, the child and its edges inserted. Only SECURITY DEFINER
-- functions call it, so it needs no grant.
CREATE OR REPLACE FUNCTION @schema@.pgjobd_enqueue_child(
    type text, payload jsonb, queue text, priority int, run_at timestamptz,
    max_attempts int, unique_key text, depends_on bigint[], on_parent_failure text)
  RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
      parents bigint[];
      missing text;
      open_parents int;
      failure text;
      child bigint := nextval(@jobs_id_seq@::regclass);
    BEGIN
      IF on_parent_failure IS NULL OR on_parent_failure NOT IN ('cancel', 'run') THEN
        RAISE EXCEPTION 'pgjobd_enqueue: on_parent_failure must be ''cancel'' or ''run'', not %',
          coalesce(quote_literal(left(on_parent_failure, 100)), 'NULL')
          USING ERRCODE = 'invalid_parameter_value';
      END IF;
      IF cardinality(depends_on) > 100000 THEN
        RAISE EXCEPTION 'pgjobd_enqueue: depends_on has % elements, over the bound of 100000 '
                        'per call', cardinality(depends_on) USING ERRCODE = 'program_limit_exceeded';
      END IF;
      IF jsonb_typeof(payload) <> 'object' THEN
        RAISE EXCEPTION 'pgjobd_enqueue: a job with depends_on needs an object payload (its '
                        'parents'' ends are added to it as _parents), not %', jsonb_typeof(payload)
          USING ERRCODE = 'invalid_parameter_value';
      END IF;
      IF unique_key IS NOT NULL THEN
        RAISE EXCEPTION 'pgjobd_enqueue: unique_key cannot be combined with depends_on'
          USING ERRCODE = 'invalid_parameter_value';
      END IF;
      IF array_position(depends_on, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'pgjobd_enqueue: depends_on must not hold NULL'
          USING ERRCODE = 'null_value_not_allowed';
      END IF;
      SELECT array_agg(l.id ORDER BY l.id) INTO parents FROM (
        SELECT j.id FROM @schema@.jobs j WHERE j.id = ANY (depends_on) ORDER BY j.id
        FOR NO KEY UPDATE) l;
      SELECT string_agg(DISTINCT d::text, ', ') INTO missing FROM unnest(depends_on) d
      WHERE d <> ALL (coalesce(parents, '{}'));
      IF missing IS NOT NULL THEN
        RAISE EXCEPTION 'pgjobd_enqueue: depends_on names job(s) that do not exist: %', missing
          USING ERRCODE = 'foreign_key_violation';
      END IF;
      UPDATE @schema@.jobs j SET has_children = true
      WHERE j.id = ANY (parents) AND NOT j.has_children;
      INSERT INTO @schema@.pgjobd_dependencies (child_id, parent_id, parent_status)
      SELECT child, j.id, CASE WHEN j.status IN ('done', 'dead', 'cancelled') THEN j.status END
      FROM @schema@.jobs j WHERE j.id = ANY (parents);
      SELECT count(*) FILTER (WHERE d.parent_status IS NULL),
             (array_agg(format('parent %s ended %s', d.parent_id, d.parent_status)
                        ORDER BY d.parent_id) FILTER (WHERE d.parent_status <> 'done'))[1]
      INTO open_parents, failure
      FROM @schema@.pgjobd_dependencies d WHERE d.child_id = child;
      IF failure IS NOT NULL AND on_parent_failure = 'cancel' THEN
        INSERT INTO @schema@.jobs (id, queue, type, payload, priority, run_at, max_attempts,
                                   status, finished_at, last_error, on_parent_failure)
        VALUES (child, queue, type, payload, priority, run_at, max_attempts, 'cancelled',
                now(), 'cancelled: ' || failure, on_parent_failure);
      ELSIF open_parents > 0 THEN
        INSERT INTO @schema@.jobs (id, queue, type, payload, priority, run_at, max_attempts,
                                   status, blocked_by, on_parent_failure)
        VALUES (child, queue, type, payload, priority, run_at, max_attempts, 'blocked',
                open_parents, on_parent_failure);
      ELSE
        INSERT INTO @schema@.jobs (id, queue, type, payload, priority, run_at, max_attempts,
                                   on_parent_failure)
        VALUES (child, queue, type,
                payload || jsonb_build_object('_parents',
                  (SELECT x.parents FROM @schema@.pgjobd_parents_of(ARRAY[child]) x)),
                priority, run_at, max_attempts, on_parent_failure);
      END IF;
      RETURN child;
    END
    $body$;

REVOKE EXECUTE ON FUNCTION @schema@.pgjobd_enqueue_child(text, jsonb, text, int, timestamptz,
  int, text, bigint[], text) FROM PUBLIC;
