-- Dependencies between jobs (README "Dependencies"): what happens to the children when a
-- parent ends. A parent ends when it becomes done, dead or cancelled, or is deleted; each
-- of its blocked children counts it once (blocked_by), and:
-- - a child whose newly ended parent failed (dead, cancelled, deleted) and whose
--   on_parent_failure is 'cancel' ends cancelled, last_error naming the parent and how it
--   ended; that is an end too, so its own children are resolved next;
-- - a child with no parent left becomes pending, due no earlier than now, its payload
--   gaining `_parents` {"<id>": {"status", "result"}} (every parent's end and result), and
--   the daemons are woken.
-- Only blocked children change: one cancelled or deleted by hand keeps what it is.
--
-- An edge's parent_status is what guards the count. A parent that fails writes it on each
-- of its edges, so that a dead parent retried to done counts nothing again. A parent that
-- ends done does not: done is final (only failed, dead and cancelled jobs can be retried),
-- and its edges are read, not written: writing one row per child made each parent of a
-- fan-in cost as much again as its own completion (README "Results and workflows", the
-- measurements in bench/README.md). So a NULL parent_status means "not ended, or done":
-- the parent's row tells which, and when a done parent is deleted its edges are written
-- then ('done'), as it can no longer be read.

-- The parents' ends of each of `children` as its `_parents` object, for all of them in one
-- query (a call per child, planned alone, read every edge of a 10,000-child fan-out again:
-- 5 ms each). A deleted parent's result is NULL. Each parent's row is read by its id (a
-- subquery, not a join): a plan made for an array of unknown size merge-joined the edges
-- with the whole primary key of jobs, for a chain's single parent too (30 ms per link).
CREATE OR REPLACE FUNCTION @schema@.pgjobd_parents_of(children bigint[])
  RETURNS TABLE (child bigint, parents jsonb) LANGUAGE sql STABLE
  SET search_path = pg_catalog, pg_temp AS $body$
    SELECT d.child_id, jsonb_object_agg(d.parent_id::text, coalesce(
             (SELECT jsonb_build_object('status', coalesce(d.parent_status, p.status),
                                        'result', p.result)
              FROM @schema@.jobs p WHERE p.id = d.parent_id),
             jsonb_build_object('status', coalesce(d.parent_status, 'deleted'), 'result', NULL)))
    FROM @schema@.pgjobd_dependencies d
    WHERE d.child_id = ANY (children)
    GROUP BY d.child_id
  $body$;

REVOKE EXECUTE ON FUNCTION @schema@.pgjobd_parents_of(bigint[]) FROM PUBLIC;

-- Makes the blocked `children` whose parents have all ended pending: `_parents` in the
-- payload, due no earlier than now, in one new version of each row. Returns how many it
-- made pending.
CREATE OR REPLACE FUNCTION @schema@.pgjobd_unblock(children bigint[])
  RETURNS int LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $body$
    WITH made AS (
      UPDATE @schema@.jobs c
      SET status = 'pending', blocked_by = 0,
          payload = c.payload || jsonb_build_object('_parents', x.parents),
          run_at = greatest(c.run_at, now()), updated_at = now()
      FROM @schema@.pgjobd_parents_of(children) x
      -- = ANY: the function's row count is a guess (1,000), and a merge join on it walked
      -- the whole primary key for each link of a chain (7 ms per link at 60,000 rows); the
      -- ids bound the scan to the jobs unblocked. IS TRUE: see pgjobd_resolve_ends.
      WHERE c.id = ANY (children) AND c.id = x.child AND (c.status = 'blocked') IS TRUE
      RETURNING 1
    )
    SELECT count(*)::int FROM made
  $body$;

REVOKE EXECUTE ON FUNCTION @schema@.pgjobd_unblock(bigint[]) FROM PUBLIC;

-- Resolves the children of the parents `ended` (ids) that ended as `statuses` (same order:
-- 'done'; 'dead', 'cancelled' or 'deleted'; 'done_deleted', done and deleted in one
-- statement (retention.done = 0); 'done_gone', a done parent deleted later, which only
-- writes its edges), then of the children that this cancels, and so on: a frontier loop,
-- so that a chain of any length is resolved in one call, each step one statement for the
-- whole frontier, never one per child. The updates of children fire the triggers below
-- again; those nested firings return at once (pgjobd.resolving is set for the call), as
-- the loop does their work. The counter is decremented by an UPDATE, under the child's row
-- lock: two parents of one child ending in two transactions decrement it one after the
-- other (the second re-reads the row the first committed), so it unblocks exactly once;
-- its `_parents` is built by a later statement, which sees what the first one wrote.
-- Parents are found by `parent_id = ANY` (its index), never by joining unnest(): with few
-- edges in the table that plan read them all (a 10,000-row sequential scan per batch).
CREATE OR REPLACE FUNCTION @schema@.pgjobd_resolve_ends(ended bigint[], statuses text[])
  RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
      frontier bigint[] := ended;
      frontier_status text[] := statuses;
      done_ids bigint[];
      failed_ids bigint[];
      failed_status text[];
      children bigint[];
      counts int[];
      failures text[];
      unblocked bigint[];
      woken boolean := false;
    BEGIN
      IF current_setting('pgjobd.resolving', true) = 'on' THEN
        RETURN;
      END IF;
      PERFORM set_config('pgjobd.resolving', 'on', true);
      WHILE cardinality(frontier) > 0 LOOP
        SELECT coalesce(array_agg(e.id) FILTER (WHERE e.status = 'done'), '{}'),
               coalesce(array_agg(e.id) FILTER (WHERE e.status <> 'done'), '{}'),
               coalesce(array_agg(e.status) FILTER (WHERE e.status <> 'done'), '{}')
          INTO done_ids, failed_ids, failed_status
        FROM unnest(frontier, frontier_status) e(id, status);
        WITH written AS (
          UPDATE @schema@.pgjobd_dependencies d
          SET parent_status = CASE WHEN e.status LIKE 'done%' THEN 'done' ELSE e.status END
          FROM unnest(failed_ids, failed_status) e(id, status)
          WHERE d.parent_id = ANY (failed_ids) AND d.parent_id = e.id
            AND d.parent_status IS NULL
          RETURNING d.child_id, d.parent_id, d.parent_status, e.status <> 'done_gone' AS counts
        ), resolved AS (
          SELECT w.child_id, w.parent_id, w.parent_status FROM written w WHERE w.counts
          UNION ALL
          SELECT d.child_id, d.parent_id, 'done' FROM @schema@.pgjobd_dependencies d
          WHERE d.parent_id = ANY (done_ids) AND d.parent_status IS NULL
        ), per_child AS (
          SELECT r.child_id, count(*)::int AS n,
                 (array_agg(format('parent %s ended %s', r.parent_id, r.parent_status)
                            ORDER BY r.parent_id)
                    FILTER (WHERE r.parent_status <> 'done'))[1] AS failure
          FROM resolved r GROUP BY r.child_id
        )
        -- In id order: the update below locks the children in the order of the arrays, and
        -- two transactions ending parents of the same children must not lock them in two
        -- orders (a deadlock, broken only after deadlock_timeout).
        SELECT coalesce(array_agg(p.child_id ORDER BY p.child_id), '{}'),
               coalesce(array_agg(p.n ORDER BY p.child_id), '{}'),
               coalesce(array_agg(p.failure ORDER BY p.child_id), '{}')
          INTO children, counts, failures
        FROM per_child p;
        -- The children are read by their ids from unnest() of arrays: its row count is known
        -- (or guessed small), so each child is one probe of the primary key. Joined with the
        -- query above instead, the counts' guessed row or two made a 10,000-child fan-out
        -- scan every child once per child (23 s).
        WITH changed AS (
          UPDATE @schema@.jobs c
          SET blocked_by = greatest(c.blocked_by - p.n, 0),
              -- One left without parents stays blocked here and becomes pending in
              -- pgjobd_unblock, which writes its `_parents` too: pending at once, each
              -- would have had two claimable versions, one dead, for every claim to step
              -- over until vacuum.
              status = CASE WHEN p.failure IS NOT NULL AND c.on_parent_failure = 'cancel'
                              THEN 'cancelled' ELSE 'blocked' END,
              finished_at = CASE WHEN p.failure IS NOT NULL AND c.on_parent_failure = 'cancel'
                                   THEN now() ELSE c.finished_at END,
              last_error = CASE WHEN p.failure IS NOT NULL AND c.on_parent_failure = 'cancel'
                                  THEN 'cancelled: ' || p.failure ELSE c.last_error END,
              updated_at = now()
          FROM unnest(children, counts, failures) p(child_id, n, failure)
          -- IS TRUE: `status = 'blocked'` matches jobs_blocked_idx's predicate, and a plan
          -- made while the table's statistics saw few blocked jobs walked that index once
          -- per child (a 10,000-child fan-out: 30 s in the parent's completion, against
          -- 0.3 s reading each child by its id).
          WHERE c.id = p.child_id AND (c.status = 'blocked') IS TRUE
          RETURNING c.id, c.status, c.blocked_by, c.has_children
        )
        SELECT coalesce(array_agg(x.id) FILTER (WHERE x.status = 'cancelled' AND x.has_children),
                        '{}'),
               coalesce(array_agg(x.id) FILTER (WHERE x.status = 'blocked' AND x.blocked_by = 0),
                        '{}')
        INTO frontier, unblocked
        FROM changed x;
        frontier_status := array_fill('cancelled'::text, ARRAY[cardinality(frontier)]);
        IF cardinality(unblocked) > 0 THEN
          PERFORM @schema@.pgjobd_unblock(unblocked);
          woken := true;
        END IF;
      END LOOP;
      PERFORM set_config('pgjobd.resolving', '', true);
      IF woken THEN
        PERFORM @schema@.pgjobd_notify_jobs();
      END IF;
    END
    $body$;

REVOKE EXECUTE ON FUNCTION @schema@.pgjobd_resolve_ends(bigint[], text[]) FROM PUBLIC;

-- The maintenance leader's repair (src/db/statements.cpp, kRepairDependencies), for parents
-- that ended while the triggers were off: `ended` that ended as `statuses` (same order).
-- A failed or deleted parent's unwritten edges are resolved as its trigger would have (the
-- edges guard the count). A done parent's edges are not written, so whether it was counted
-- cannot be told from them: its blocked children are counted again from scratch instead,
-- and those whose parents have all ended (done, or written on the edge) become pending.
-- Daemons of schema v15's first binary pass every ended parent here, done ones too; this
-- never counts one twice.
CREATE OR REPLACE FUNCTION @schema@.pgjobd_resolve_parents(ended bigint[], statuses text[])
  RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
      stuck bigint[];
    BEGIN
      PERFORM @schema@.pgjobd_resolve_ends(
        coalesce(array_agg(e.id), '{}'), coalesce(array_agg(e.status), '{}'))
      FROM unnest(ended, statuses) e(id, status) WHERE e.status IS DISTINCT FROM 'done';
      SELECT coalesce(array_agg(DISTINCT d.child_id), '{}') INTO stuck
      FROM unnest(ended, statuses) e(id, status)
      JOIN @schema@.pgjobd_dependencies d ON d.parent_id = e.id AND d.parent_status IS NULL
      JOIN @schema@.jobs c ON c.id = d.child_id AND c.status = 'blocked'
      WHERE e.status = 'done'
        AND NOT EXISTS (
          SELECT 1 FROM @schema@.pgjobd_dependencies o
          LEFT JOIN @schema@.jobs p ON p.id = o.parent_id
          WHERE o.child_id = c.id AND o.parent_status IS NULL
            AND (p.id IS NULL OR p.status <> 'done'));
      IF @schema@.pgjobd_unblock(stuck) > 0 THEN
        PERFORM @schema@.pgjobd_notify_jobs();
      END IF;
    END
    $body$;

REVOKE EXECUTE ON FUNCTION @schema@.pgjobd_resolve_parents(bigint[], text[]) FROM PUBLIC;

-- A parent ended (its row's terminal update, or its delete): the row triggers note it, and
-- the statement's trigger resolves every parent the statement ended in one call, so a
-- completion batch of 200 parents of one fan-in job updates that job once, not 200 times
-- (0.25 ms per parent, each a new version of the same row, against one call per batch). The
-- note is a transaction-local setting, "id:status," per parent, emptied by the statement
-- trigger that reads it (AFTER ROW triggers fire before the statement's AFTER trigger). A
-- child deleted takes its edges with it at once. The WHEN clauses keep every other row's
-- update free of any call, and every other statement's to a setting read.
-- A daemon's completion batch counts its done parents off their children itself and notes
-- those it brought to 0 (pgjobd.unblock) and its dead and cancelled parents, from the rows
-- it ended (src/db/statements.cpp, kCompleteNoted), and says so first (pgjobd.noted, for
-- its transaction): a PL/pgSQL call per parent cost a fan-in's parents 10 µs each.
CREATE OR REPLACE FUNCTION @schema@.pgjobd_dependencies_end() RETURNS trigger
  LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
      ended text;
    BEGIN
      IF TG_OP = 'DELETE' THEN
        IF OLD.on_parent_failure IS NOT NULL THEN
          DELETE FROM @schema@.pgjobd_dependencies d WHERE d.child_id = OLD.id;
        END IF;
        -- A failed parent wrote its edges when it ended.
        IF NOT OLD.has_children OR OLD.status IN ('dead', 'cancelled') THEN
          RETURN NULL;
        END IF;
        -- A done parent was counted when it ended; its edges now say so. A daemon with
        -- retention.done 0 deletes its done jobs as it completes them, and says so
        -- (src/db/statements.cpp, done_write): their children see them done.
        ended := CASE WHEN OLD.status = 'done' THEN 'done_gone'
                      WHEN current_setting('pgjobd.ended_as', true) = 'done' THEN 'done_deleted'
                      ELSE 'deleted' END;
      ELSE
        ended := NEW.status;
      END IF;
      -- A child the resolution itself ends is its loop's work, not a new note.
      IF current_setting('pgjobd.resolving', true) = 'on' THEN
        RETURN NULL;
      END IF;
      PERFORM set_config('pgjobd.ended',
                         coalesce(current_setting('pgjobd.ended', true), '') || OLD.id || ':' ||
                           ended || ',', true);
      RETURN NULL;
    END
    $body$;

REVOKE EXECUTE ON FUNCTION @schema@.pgjobd_dependencies_end() FROM PUBLIC;

CREATE OR REPLACE FUNCTION @schema@.pgjobd_dependencies_resolve() RETURNS trigger
  LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
      ended constant text := current_setting('pgjobd.ended', true);
      unblock constant text := current_setting('pgjobd.unblock', true);
      ids bigint[];
      statuses text[];
    BEGIN
      IF (ended IS NULL OR ended = '') AND (unblock IS NULL OR unblock = '') THEN
        RETURN NULL;
      END IF;
      -- Emptied first: the updates below fire this trigger again, which must find nothing.
      PERFORM set_config('pgjobd.ended', '', true), set_config('pgjobd.unblock', '', true);
      IF ended <> '' THEN
        SELECT array_agg(split_part(e, ':', 1)::bigint ORDER BY n),
               array_agg(split_part(e, ':', 2) ORDER BY n)
          INTO ids, statuses
        FROM unnest(string_to_array(rtrim(ended, ','), ',')) WITH ORDINALITY AS x(e, n);
        IF cardinality(ids) > 0 THEN
          PERFORM @schema@.pgjobd_resolve_ends(ids, statuses);
        END IF;
      END IF;
      -- Children a daemon's batch counted to 0 (src/db/statements.cpp, `counted`): one its
      -- other parents cancelled or unblocked meanwhile is no longer blocked and is skipped.
      -- Their NOTIFY is sent as is, not through pgjobd_notify_jobs: the daemon that wrote the
      -- batch claims them by id and ignores it (src/engine/claim_signal.hpp), so no INSERT
      -- may rely on it, and it leaves the shared clock alone. A NOTIFY per batch that
      -- unblocks children, not per child.
      IF unblock <> '' THEN
        IF @schema@.pgjobd_unblock(unblock::bigint[]) > 0 THEN
          PERFORM pg_notify('pgjobd_jobs', @schema_name@);
        END IF;
      END IF;
      RETURN NULL;
    END
    $body$;

REVOKE EXECUTE ON FUNCTION @schema@.pgjobd_dependencies_resolve() FROM PUBLIC;

CREATE OR REPLACE TRIGGER jobs_parent_ended AFTER UPDATE OF status ON @schema@.jobs
  FOR EACH ROW
  WHEN (OLD.has_children AND NEW.status IN ('done', 'dead', 'cancelled')
        AND OLD.status IS DISTINCT FROM NEW.status
        AND current_setting('pgjobd.noted', true) IS DISTINCT FROM 'on')
  EXECUTE FUNCTION @schema@.pgjobd_dependencies_end();

CREATE OR REPLACE TRIGGER jobs_dependency_deleted AFTER DELETE ON @schema@.jobs
  FOR EACH ROW
  WHEN (OLD.has_children OR OLD.on_parent_failure IS NOT NULL)
  EXECUTE FUNCTION @schema@.pgjobd_dependencies_end();

-- Once per UPDATE or DELETE statement on jobs (a data-modifying CTE's too): a setting read
-- unless a row trigger above noted a parent. (No WHEN: a statement trigger's WHEN is
-- evaluated when the statement ends, before the row triggers that write the note fire.)
CREATE OR REPLACE TRIGGER jobs_parents_resolve AFTER UPDATE OR DELETE ON @schema@.jobs
  FOR EACH STATEMENT
  EXECUTE FUNCTION @schema@.pgjobd_dependencies_resolve();
