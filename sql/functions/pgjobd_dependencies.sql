-- Dependencies between jobs (README "Dependencies"): what happens to the children when a
-- parent ends. A parent ends when it becomes done, dead or cancelled, or is deleted; its
-- edges in pgjobd_dependencies get that status once (only edges still NULL are resolved,
-- so a dead parent retried to done resolves nothing again), and each blocked child:
-- - whose newly ended parent failed (dead, cancelled, deleted) and whose on_parent_failure
--   is 'cancel' ends cancelled, last_error naming the parent and how it ended; that is an
--   end too, so its own children are resolved next;
-- - with no parent left becomes pending, due no earlier than now, its payload gaining
--   `_parents` {"<id>": {"status", "result"}} (every parent's end and result), and the
--   daemons are woken.
-- Only blocked children change: one cancelled or deleted by hand keeps what it is.

-- The parents' ends of each of `children` as its `_parents` object, for all of them in one
-- query (a call per child, planned alone, read every edge of a 10,000-child fan-out again:
-- 5 ms each). A deleted parent's result is NULL. Each parent's result is read by its id (a
-- subquery, not a join): a plan made for an array of unknown size merge-joined the edges
-- with the whole primary key of jobs, for a chain's single parent too (30 ms per link).
CREATE OR REPLACE FUNCTION @schema@.pgjobd_parents_of(children bigint[])
  RETURNS TABLE (child bigint, parents jsonb) LANGUAGE sql STABLE
  SET search_path = pg_catalog, pg_temp AS $body$
    SELECT d.child_id, jsonb_object_agg(d.parent_id::text, jsonb_build_object(
             'status', d.parent_status,
             'result', (SELECT p.result FROM @schema@.jobs p WHERE p.id = d.parent_id)))
    FROM @schema@.pgjobd_dependencies d
    WHERE d.child_id = ANY (children)
    GROUP BY d.child_id
  $body$;

REVOKE EXECUTE ON FUNCTION @schema@.pgjobd_parents_of(bigint[]) FROM PUBLIC;

-- Resolves the children of the parents `ended` (ids) that ended as `statuses` (same
-- order), then of the children that this cancels, and so on: a frontier loop, so that a
-- chain of any length is resolved in one call, each step one statement for the whole
-- frontier, never one per child. The updates of children fire the triggers below again;
-- those nested firings return at once (pgjobd.resolving is set for the call), as the loop
-- does their work. The counter is decremented by an UPDATE, under the child's row lock:
-- two parents of one child ending in two transactions decrement it one after the other
-- (the second re-reads the row the first committed), so it unblocks exactly once; its
-- `_parents` is built by a later statement, which sees the edges the first one wrote.
-- SECURITY DEFINER: it runs for whoever ends a parent (the runtime role, an operator's
-- UPDATE), and wakes the daemons through pgjobd_notify_jobs (the owner's).
CREATE OR REPLACE FUNCTION @schema@.pgjobd_resolve_parents(ended bigint[], statuses text[])
  RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
      frontier bigint[] := ended;
      frontier_status text[] := statuses;
      unblocked bigint[];
      woken boolean := false;
    BEGIN
      IF current_setting('pgjobd.resolving', true) = 'on' THEN
        RETURN;
      END IF;
      PERFORM set_config('pgjobd.resolving', 'on', true);
      WHILE cardinality(frontier) > 0 LOOP
        WITH resolved AS (
          UPDATE @schema@.pgjobd_dependencies d SET parent_status = e.status
          FROM unnest(frontier, frontier_status) e(id, status)
          WHERE d.parent_id = e.id AND d.parent_status IS NULL
          RETURNING d.child_id, d.parent_id, d.parent_status
        ), per_child AS (
          SELECT r.child_id, count(*)::int AS n,
                 (array_agg(format('parent %s ended %s', r.parent_id, r.parent_status)
                            ORDER BY r.parent_id)
                    FILTER (WHERE r.parent_status <> 'done'))[1] AS failure
          FROM resolved r GROUP BY r.child_id
        ), changed AS (
          UPDATE @schema@.jobs c
          SET blocked_by = greatest(c.blocked_by - p.n, 0),
              status = CASE WHEN p.failure IS NOT NULL AND c.on_parent_failure = 'cancel'
                              THEN 'cancelled'
                            WHEN c.blocked_by - p.n <= 0 THEN 'pending'
                            ELSE 'blocked' END,
              finished_at = CASE WHEN p.failure IS NOT NULL AND c.on_parent_failure = 'cancel'
                                   THEN now() ELSE c.finished_at END,
              last_error = CASE WHEN p.failure IS NOT NULL AND c.on_parent_failure = 'cancel'
                                  THEN 'cancelled: ' || p.failure ELSE c.last_error END,
              updated_at = now()
          FROM per_child p
          -- IS TRUE: `status = 'blocked'` matches jobs_blocked_idx's predicate, and a plan
          -- made while the table's statistics saw few blocked jobs walked that index once
          -- per child (a 10,000-child fan-out: 30 s in the parent's completion, against
          -- 0.3 s reading each child by its id).
          WHERE c.id = p.child_id AND (c.status = 'blocked') IS TRUE
          RETURNING c.id, c.status, c.has_children
        )
        SELECT coalesce(array_agg(x.id) FILTER (WHERE x.status = 'cancelled' AND x.has_children),
                        '{}'),
               coalesce(array_agg(x.id) FILTER (WHERE x.status = 'pending'), '{}')
        INTO frontier, unblocked
        FROM changed x;
        frontier_status := array_fill('cancelled'::text, ARRAY[cardinality(frontier)]);
        IF cardinality(unblocked) > 0 THEN
          UPDATE @schema@.jobs c
          SET payload = c.payload || jsonb_build_object('_parents', x.parents),
              run_at = greatest(c.run_at, now())
          FROM @schema@.pgjobd_parents_of(unblocked) x
          -- = ANY: the function's row count is a guess (1,000), and a merge join on it
          -- walked the whole primary key for each link of a chain (7 ms per link at 60,000
          -- rows); the ids bound the scan to the jobs unblocked.
          WHERE c.id = ANY (unblocked) AND c.id = x.child;
          woken := true;
        END IF;
      END LOOP;
      PERFORM set_config('pgjobd.resolving', '', true);
      IF woken THEN
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
CREATE OR REPLACE FUNCTION @schema@.pgjobd_dependencies_end() RETURNS trigger
  LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
      ended text;
    BEGIN
      IF TG_OP = 'DELETE' THEN
        IF OLD.on_parent_failure IS NOT NULL THEN
          DELETE FROM @schema@.pgjobd_dependencies d WHERE d.child_id = OLD.id;
        END IF;
        IF NOT OLD.has_children THEN
          RETURN NULL;
        END IF;
        -- A daemon with retention.done 0 deletes its done jobs as it completes them, and
        -- says so (src/db/statements.cpp, done_write): their children see them done.
        ended := CASE WHEN current_setting('pgjobd.ended_as', true) = 'done' THEN 'done'
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
      ids bigint[];
      statuses text[];
    BEGIN
      IF ended IS NULL OR ended = '' THEN
        RETURN NULL;
      END IF;
      PERFORM set_config('pgjobd.ended', '', true);
      SELECT array_agg(split_part(e, ':', 1)::bigint ORDER BY n),
             array_agg(split_part(e, ':', 2) ORDER BY n)
        INTO ids, statuses
      FROM unnest(string_to_array(rtrim(ended, ','), ',')) WITH ORDINALITY AS x(e, n);
      IF cardinality(ids) > 0 THEN
        PERFORM @schema@.pgjobd_resolve_parents(ids, statuses);
      END IF;
      RETURN NULL;
    END
    $body$;

REVOKE EXECUTE ON FUNCTION @schema@.pgjobd_dependencies_resolve() FROM PUBLIC;

CREATE OR REPLACE TRIGGER jobs_parent_ended AFTER UPDATE OF status ON @schema@.jobs
  FOR EACH ROW
  WHEN (OLD.has_children AND NEW.status IN ('done', 'dead', 'cancelled')
        AND OLD.status IS DISTINCT FROM NEW.status)
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
