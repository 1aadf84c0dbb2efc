-- A workflow in one call (README "Workflows"): a JSON array of nodes, each an object with
-- `ref` (a name unique in the array), `type`, and optionally `payload` (an object),
-- `queue`, `priority`, `run_at`, `max_attempts`, `depends_on` (an array of refs) and
-- `on_parent_failure`. All the jobs are inserted or none: an error names the node
-- (nodes[0] the first) and the key, a duplicate or unknown ref, or the refs of a cycle.
-- Nodes without depends_on are pending, the others blocked until their parents end, as
-- with pgjobd_enqueue's depends_on. Returns each node's ref and job id in the array's
-- order.
--
-- Set-based for large fan-outs: the jobs are one INSERT, the edges another. The cycle check
-- is Kahn's algorithm over arrays (linear in nodes and edges); removing one level of the
-- graph per SQL statement would make a chain of n nodes cost n statements over n rows.
CREATE OR REPLACE FUNCTION @schema@.pgjobd_enqueue_workflow(nodes jsonb)
  RETURNS TABLE (ref text, id bigint) LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp AS $body$
    #variable_conflict use_column
    DECLARE
      n bigint;
      field text;
      problem text;
      node_count int;
      refs text[];
      ids bigint[];
      edge_parent int[];
      parent_count int[];
      in_degree int[];
      first_edge int[];
      edge_count int[];
      edge_child int[];
      ready int[];
      head int := 1;
      u int;
      v int;
    BEGIN
      -- README "Bounds of the SQL functions": ten times the largest graph measured
      -- (bench --workflows: 10,002 nodes, 20,000 edges), far below what the server can hold.
      PERFORM @schema@.pgjobd_check_array('pgjobd_enqueue_workflow', 'nodes', nodes, 100000,
                                          67108864);
      -- Each check is one query over every node, naming the first that fails it: a loop
      -- of checks per node took 0.5 s for 10,000 nodes.
      SELECT e.n - 1, jsonb_typeof(e.value) INTO n, problem
      FROM jsonb_array_elements(nodes) WITH ORDINALITY e(value, n)
      WHERE jsonb_typeof(e.value) <> 'object' ORDER BY e.n LIMIT 1;
      IF FOUND THEN
        RAISE EXCEPTION 'pgjobd_enqueue_workflow: nodes[%] must be an object, not %', n, problem
          USING ERRCODE = 'invalid_parameter_value';
      END IF;
      SELECT e.n - 1, string_agg(k, ', ' ORDER BY k) INTO n, problem
      FROM jsonb_array_elements(nodes) WITH ORDINALITY e(value, n), jsonb_object_keys(e.value) k
      WHERE k <> ALL (ARRAY['ref', 'type', 'payload', 'queue', 'priority', 'run_at',
                            'max_attempts', 'depends_on', 'on_parent_failure'])
      GROUP BY e.n ORDER BY e.n LIMIT 1;
      IF FOUND THEN
        RAISE EXCEPTION 'pgjobd_enqueue_workflow: nodes[%] has unknown key(s): %', n, problem
          USING ERRCODE = 'invalid_parameter_value';
      END IF;
      SELECT e.n - 1 INTO n FROM jsonb_array_elements(nodes) WITH ORDINALITY e(value, n)
      WHERE jsonb_typeof(e.value -> 'ref') IS DISTINCT FROM 'string' OR e.value ->> 'ref' = ''
      ORDER BY e.n LIMIT 1;
      IF FOUND THEN
        RAISE EXCEPTION 'pgjobd_enqueue_workflow: nodes[%].ref: must be a non-empty string', n
          USING ERRCODE = 'invalid_parameter_value';
      END IF;
      SELECT e.n - 1, f, jsonb_typeof(e.value -> f) INTO n, field, problem
      FROM jsonb_array_elements(nodes) WITH ORDINALITY e(value, n),
           unnest(ARRAY['type', 'queue', 'run_at', 'on_parent_failure']) f
      WHERE jsonb_typeof(e.value -> f) NOT IN ('string', 'null') ORDER BY e.n LIMIT 1;
      IF FOUND THEN
        RAISE EXCEPTION 'pgjobd_enqueue_workflow: nodes[%].%: must be a string, not %', n,
          field, problem USING ERRCODE = 'invalid_parameter_value';
      END IF;
      SELECT e.n - 1, f, (e.value -> f)::text INTO n, field, problem
      FROM jsonb_array_elements(nodes) WITH ORDINALITY e(value, n),
           unnest(ARRAY['priority', 'max_attempts']) f
      WHERE jsonb_typeof(e.value -> f) NOT IN ('number', 'null')
         OR (jsonb_typeof(e.value -> f) = 'number'
             AND ((e.value ->> f)::numeric % 1 <> 0
                  OR (e.value ->> f)::numeric NOT BETWEEN -2147483648 AND 2147483647))
      ORDER BY e.n LIMIT 1;
      IF FOUND THEN
        RAISE EXCEPTION 'pgjobd_enqueue_workflow: nodes[%].%: must be an integer, not %', n,
          field, problem USING ERRCODE = 'invalid_parameter_value';
      END IF;
      SELECT e.n - 1, jsonb_typeof(e.value -> 'payload') INTO n, problem
      FROM jsonb_array_elements(nodes) WITH ORDINALITY e(value, n)
      WHERE e.value ? 'payload' AND jsonb_typeof(e.value -> 'payload') <> 'object'
      ORDER BY e.n LIMIT 1;
      IF FOUND THEN
        RAISE EXCEPTION 'pgjobd_enqueue_workflow: nodes[%].payload: must be an object (its '
                        'parents'' ends are added to it as _parents), not %', n, problem
          USING ERRCODE = 'invalid_parameter_value';
      END IF;
      SELECT e.n - 1 INTO n FROM jsonb_array_elements(nodes) WITH ORDINALITY e(value, n)
      WHERE e.value ? 'depends_on' AND (jsonb_typeof(e.value -> 'depends_on') <> 'array'
          OR EXISTS (SELECT 1 FROM jsonb_array_elements(e.value -> 'depends_on') d
                     WHERE jsonb_typeof(d) <> 'string'))
      ORDER BY e.n LIMIT 1;
      IF FOUND THEN
        RAISE EXCEPTION 'pgjobd_enqueue_workflow: nodes[%].depends_on: must be an array of '
                        'refs (strings)', n USING ERRCODE = 'invalid_parameter_value';
      END IF;
      -- The edges become arrays and a join: bounded apart from the bytes, as one-letter refs
      -- would make 64 MiB about 13 million edges.
      SELECT coalesce(sum(jsonb_array_length(e.value -> 'depends_on')), 0) INTO n
      FROM jsonb_array_elements(nodes) e WHERE e.value ? 'depends_on';
      IF n > 1000000 THEN
        RAISE EXCEPTION 'pgjobd_enqueue_workflow: nodes have % depends_on entries in all, over '
                        'the bound of 1000000 per call', n USING ERRCODE = 'program_limit_exceeded';
      END IF;
      SELECT e.n - 1, quote_literal(left(e.value ->> 'on_parent_failure', 100)) INTO n, problem
      FROM jsonb_array_elements(nodes) WITH ORDINALITY e(value, n)
      WHERE coalesce(e.value ->> 'on_parent_failure', 'cancel') NOT IN ('cancel', 'run')
      ORDER BY e.n LIMIT 1;
      IF FOUND THEN
        RAISE EXCEPTION 'pgjobd_enqueue_workflow: nodes[%].on_parent_failure: must be '
                        '''cancel'' or ''run'', not %', n, problem
          USING ERRCODE = 'invalid_parameter_value';
      END IF;
      -- pgjobd_check_job once per distinct set of values (a fan-out's nodes share them),
      -- naming the first node that has them.
      PERFORM @schema@.pgjobd_check_job(format('pgjobd_enqueue_workflow: nodes[%s]', v.n),
        v.type, '{}', v.queue, v.priority, v.run_at, v.max_attempts, NULL)
      FROM (
        SELECT min(e.n) - 1 AS n, e.value ->> 'type' AS type,
               coalesce(e.value ->> 'queue', 'default') AS queue,
               coalesce((e.value ->> 'priority')::int, 0) AS priority,
               coalesce((e.value ->> 'run_at')::timestamptz, now()) AS run_at,
               coalesce((e.value ->> 'max_attempts')::int, 5) AS max_attempts
        FROM jsonb_array_elements(nodes) WITH ORDINALITY e(value, n)
        GROUP BY 2, 3, 4, 5, 6
        ORDER BY 1
      ) v;

      -- No temporary tables: a caller could plant one of the name, with a trigger that
      -- would run as this function's owner.
      node_count := jsonb_array_length(nodes);
      SELECT coalesce(array_agg(e.value ->> 'ref' ORDER BY e.n), '{}') INTO refs
      FROM jsonb_array_elements(nodes) WITH ORDINALITY e(value, n);
      SELECT string_agg(d.ref, ', ' ORDER BY d.ref) INTO problem FROM (
        SELECT r.ref FROM unnest(refs) r(ref) GROUP BY r.ref HAVING count(*) > 1) d;
      IF problem IS NOT NULL THEN
        RAISE EXCEPTION 'pgjobd_enqueue_workflow: duplicate ref(s): %', problem
          USING ERRCODE = 'invalid_parameter_value';
      END IF;
      WITH w AS MATERIALIZED (
        SELECT e.n::int AS n, e.value ->> 'ref' AS ref, e.value -> 'depends_on' AS depends_on
        FROM jsonb_array_elements(nodes) WITH ORDINALITY e(value, n)
      ), d AS (
        SELECT DISTINCT w.n AS child, w.ref AS child_ref, x.dep
        FROM w, jsonb_array_elements_text(coalesce(w.depends_on, '[]')) x(dep)
      )
      SELECT string_agg(DISTINCT format('%s (in %s)', d.dep, d.child_ref), ', ')
               FILTER (WHERE p.n IS NULL),
             coalesce(array_agg(d.child ORDER BY p.n, d.child) FILTER (WHERE p.n IS NOT NULL), '{}'),
             coalesce(array_agg(p.n ORDER BY p.n, d.child) FILTER (WHERE p.n IS NOT NULL), '{}')
      INTO problem, edge_child, edge_parent
      FROM d LEFT JOIN w p ON p.ref = d.dep;
      IF problem IS NOT NULL THEN
        RAISE EXCEPTION 'pgjobd_enqueue_workflow: depends_on names unknown ref(s): %', problem
          USING ERRCODE = 'invalid_parameter_value';
      END IF;

      -- Kahn: a node whose parents are all placed is placed; a node never placed is on a
      -- cycle or waits for one. The edges are sorted by parent: a parent's children are
      -- edge_child[first_edge .. first_edge + edge_count - 1].
      parent_count := array_fill(0, ARRAY[node_count]);
      first_edge := array_fill(1, ARRAY[node_count]);
      edge_count := array_fill(0, ARRAY[node_count]);
      FOR k IN 1 .. cardinality(edge_parent) LOOP
        u := edge_parent[k];
        IF edge_count[u] = 0 THEN
          first_edge[u] := k;
        END IF;
        edge_count[u] := edge_count[u] + 1;
        parent_count[edge_child[k]] := parent_count[edge_child[k]] + 1;
      END LOOP;
      in_degree := parent_count;
      SELECT coalesce(array_agg(i ORDER BY i), '{}') INTO ready
      FROM generate_subscripts(in_degree, 1) i WHERE in_degree[i] = 0;
      WHILE head <= cardinality(ready) LOOP
        u := ready[head];
        head := head + 1;
        FOR k IN first_edge[u] .. first_edge[u] + edge_count[u] - 1 LOOP
          v := edge_child[k];
          in_degree[v] := in_degree[v] - 1;
          IF in_degree[v] = 0 THEN
            ready := ready || v;
          END IF;
        END LOOP;
      END LOOP;
      IF cardinality(ready) < node_count THEN
        SELECT string_agg(r.ref, ', ' ORDER BY r.n) INTO problem
        FROM unnest(refs) WITH ORDINALITY r(ref, n) WHERE in_degree[r.n] > 0;
        RAISE EXCEPTION 'pgjobd_enqueue_workflow: depends_on forms a cycle; these refs are on '
                        'it or wait for it: %', problem USING ERRCODE = 'invalid_parameter_value';
      END IF;

      SELECT coalesce(array_agg(nextval(@jobs_id_seq@::regclass) ORDER BY i), '{}') INTO ids
      FROM generate_series(1, node_count) i;
      INSERT INTO @schema@.jobs (id, queue, type, payload, priority, run_at, max_attempts,
                                 status, blocked_by, has_children, on_parent_failure)
      SELECT ids[e.n], coalesce(e.value ->> 'queue', 'default'), e.value ->> 'type',
             coalesce(e.value -> 'payload', '{}'), coalesce((e.value ->> 'priority')::int, 0),
             coalesce((e.value ->> 'run_at')::timestamptz, now()),
             coalesce((e.value ->> 'max_attempts')::int, 5),
             CASE WHEN parent_count[e.n] > 0 THEN 'blocked' ELSE 'pending' END,
             parent_count[e.n], edge_count[e.n] > 0,
             CASE WHEN parent_count[e.n] > 0
                  THEN coalesce(e.value ->> 'on_parent_failure', 'cancel') END
      FROM jsonb_array_elements(nodes) WITH ORDINALITY e(value, n)
      ORDER BY e.n;
      INSERT INTO @schema@.pgjobd_dependencies (child_id, parent_id)
      SELECT ids[x.child], ids[x.parent] FROM unnest(edge_child, edge_parent) x(child, parent);
      RETURN QUERY SELECT r.ref, ids[r.n] FROM unnest(refs) WITH ORDINALITY r(ref, n) ORDER BY r.n;
    END
    $body$;

-- PostgreSQL grants EXECUTE on a new function to PUBLIC: only roles granted it
-- (sql/grants.sql) may call this one.
REVOKE EXECUTE ON FUNCTION @schema@.pgjobd_enqueue_workflow(jsonb) FROM PUBLIC;
