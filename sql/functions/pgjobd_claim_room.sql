-- The limits a claim meets, and the room of its one limit: shared by the limited claim
-- (pgjobd_claim_limited.sql, "One limit") and the daemon's claim under one concurrency limit
-- (pgjobd_claim_room, below).
--
-- pgjobd_limits_met: whether any limit is keyed or has a rate (the limited claim reads
-- payloads and buckets only then), and the one limit, when exactly one limit matches the
-- served queues and types and it matches every one of them, unkeyed or a keyed concurrency
-- limit without a rate (NULL otherwise).
CREATE OR REPLACE FUNCTION @schema@.pgjobd_limits_met(queues text[], types text[])
  RETURNS TABLE (any_keyed boolean, any_rate boolean, one_limit text)
  LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $body$
  SELECT coalesce(bool_or(l.key IS NOT NULL), false),
         coalesce(bool_or(l.rate_per_second IS NOT NULL), false),
         CASE WHEN count(*) FILTER (WHERE m.matches) = 1
                AND coalesce(bool_and((l.key IS NULL OR (l.concurrency IS NOT NULL
                                                         AND l.rate_per_second IS NULL))
                                      AND (l.types IS NULL OR l.types @> pgjobd_limits_met.types)
                                      AND (l.queues IS NULL OR l.queues @> pgjobd_limits_met.queues))
                               FILTER (WHERE m.matches), false)
              THEN min(l.name) FILTER (WHERE m.matches) END
  FROM @schema@.pgjobd_limits l
  CROSS JOIN LATERAL (
    SELECT (l.types IS NULL OR l.types && pgjobd_limits_met.types)
           AND (l.queues IS NULL OR l.queues && pgjobd_limits_met.queues) AS matches) m
$body$;

-- pgjobd_limit_room: the room of a claim's one limit (its row, a concurrency limit), its
-- lock taken first (NULL when another claimer holds it: it is counting or claiming there
-- right now). Unkeyed: the limit's one partition's lock, and the room is the limit less the
-- rows running under other owners and less own_running, what the claimer says it holds
-- (NULL: not told, and its own rows count too). Keyed: the limit's own lock, exclusively,
-- and the limit less every running row (what a daemon holds says nothing of the
-- partitions). Not cut at 0: a lowered limit may have more running. The count is a later
-- statement than the lock: its snapshot sees every claim committed before the lock was
-- granted, so two claimers never count the same room.
CREATE OR REPLACE FUNCTION @schema@.pgjobd_limit_room(
    l @schema@.pgjobd_limits, owner text, own_running int)
  RETURNS int
  LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
  -- As the limited claim's statements (pgjobd_claim_limited.sql, "Plans").
  SET plan_cache_mode = force_generic_plan SET enable_seqscan = off
  SET enable_bitmapscan = off SET jit = off AS $body$
    DECLARE
      running int;
    BEGIN
      IF NOT pg_try_advisory_xact_lock(hashtextextended(
           @schema_name@ || chr(31) || l.name || CASE WHEN l.key IS NULL THEN chr(31)
                                                      ELSE chr(30) END, 0)) THEN
        RETURN NULL;
      END IF;
      SELECT count(*)::int INTO running
      FROM @schema@.jobs j
      WHERE j.status = 'running'
        AND (own_running IS NULL OR l.key IS NOT NULL OR j.locked_by IS DISTINCT FROM owner)
        AND (l.types IS NULL OR j.type = ANY (l.types))
        AND (l.queues IS NULL OR j.queue = ANY (l.queues));
      RETURN l.concurrency - running - CASE WHEN l.key IS NULL THEN coalesce(own_running, 0)
                                            ELSE 0 END;
    END
    $body$;

-- pgjobd_claim_room: the daemon's claim under one concurrency limit. When the one limit the
-- served queues and types meet is unkeyed and has no rate, takes its lock and returns its
-- name and room (above), at least 1; the daemon then claims in the same transaction with
-- the plain claim statement, cut at the room, and commits. That claim is the limited
-- claim's one-limit path (the same lock before the same count, the same choice, the rows
-- locked as read), without the function's start-up and the copy of its result: the
-- limited claim cost about 1 ms more per claim of 1,000 (bench/README.md, "A plain claim
-- under one limit"). No row otherwise: any other limits, another claimer holding the lock,
-- or no room (the limited claim then reports why, holding the lock if this took it).
CREATE OR REPLACE FUNCTION @schema@.pgjobd_claim_room(
    queues text[], types text[], owner text, own_running int)
  RETURNS TABLE (limit_name text, room int)
  LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
      l @schema@.pgjobd_limits;
      o_room int;
    BEGIN
      SELECT x.* INTO l
      FROM @schema@.pgjobd_limits_met(queues, types) m
      JOIN @schema@.pgjobd_limits x ON x.name = m.one_limit
      WHERE x.key IS NULL AND x.rate_per_second IS NULL AND x.concurrency IS NOT NULL;
      IF NOT FOUND THEN
        RETURN;
      END IF;
      o_room := @schema@.pgjobd_limit_room(l, owner, own_running);
      IF o_room > 0 THEN
        RETURN QUERY SELECT l.name, o_room;
      END IF;
    END
    $body$;

-- EXECUTE stays granted to PUBLIC, as PostgreSQL gives it: these run as their caller (not
-- SECURITY DEFINER), so they give no role anything its own rights on the tables do not, and
-- a runtime role granted by an older sql/grants.sql can run the limited claim that calls
-- them (an upgrade that missed re-running grants.sql must not stop limited claims).
