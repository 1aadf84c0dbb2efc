-- Writes a daemon's `limits:` as the definitions every daemon applies (README "Limits"),
-- and returns what changed: (name, 'added' | 'changed' | 'removed', who wrote the
-- definition before). A limit whose matching or key changed loses its buckets (its
-- partitions mean something else now); one whose numbers changed keeps them: a lower
-- concurrency lets the jobs running above it finish. A rate written otherwise ("60/m" for
-- "1/s") is a change too, so that what `pgjobd stats` shows is what the writer's YAML says.
-- Daemons starting together write one at a time.
-- `limits`: {"NAME": {"types": [..] | null, "queues": [..] | null, "key": text | null,
-- "concurrency": int | null, "rate_per_second": float | null, "rate_text": text | null,
-- "burst": int}}; "rate_text" is the rate as written ("60/m"; absent from an older
-- daemon's, which leaves it NULL).
--
-- It never waits long on another session's lock: a session holding the advisory lock, or
-- a row of pgjobd_limits, would otherwise keep a starting daemon from ever becoming ready,
-- and a reloading one from everything its maintenance does. Each lock it takes waits at
-- most lock_timeout (200 ms: another daemon's sync holds them for milliseconds); a lock
-- not had by then makes it write nothing and return one row (NULL, 'busy', what holds
-- it: the advisory lock and the holders' pids, or a row of the limits tables). The daemon
-- then applies what the database holds and tries again soon. Changes are collected and
-- returned at the end, so a sync given up half-way returns none of them.
CREATE OR REPLACE FUNCTION @schema@.pgjobd_limits_sync(limits jsonb, writer text)
  RETURNS TABLE (limit_name text, change text, previous_writer text)
  LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
  SET lock_timeout = '200ms' AS $body$
    DECLARE
      d record;
      old record;
      c_name text[] := '{}';
      c_change text[] := '{}';
      c_writer text[] := '{}';
      holders text;
    BEGIN
      -- A daemon's limits: section is far below these; they keep a caller with this
      -- function's grant from making the server hold more (README "Bounds of the SQL
      -- functions").
      IF pg_column_size(limits) > 16777216 THEN
        RAISE EXCEPTION 'pgjobd_limits_sync: limits is % bytes, over the bound of 16777216 '
                        '(16 MiB) per call', pg_column_size(limits)
          USING ERRCODE = 'program_limit_exceeded';
      END IF;
      IF jsonb_typeof(limits) = 'object'
         AND (SELECT count(*) FROM jsonb_object_keys(limits)) > 10000 THEN
        RAISE EXCEPTION 'pgjobd_limits_sync: limits has % limits, over the bound of 10000 per call',
          (SELECT count(*) FROM jsonb_object_keys(limits)) USING ERRCODE = 'program_limit_exceeded';
      END IF;
      BEGIN
        PERFORM pg_advisory_xact_lock(hashtext('pgjobd_limits_sync'), hashtext(@schema_name@));
        FOR old IN
          DELETE FROM @schema@.pgjobd_limits l WHERE NOT (limits ? l.name)
          RETURNING l.name, l.written_by
        LOOP
          c_name := c_name || old.name;
          c_change := c_change || 'removed'::text;
          c_writer := c_writer || old.written_by;
        END LOOP;
        FOR d IN
          SELECT e.key AS name,
                 CASE WHEN jsonb_typeof(e.value -> 'types') = 'array'
                      THEN ARRAY(SELECT jsonb_array_elements_text(e.value -> 'types')) END AS types,
                 CASE WHEN jsonb_typeof(e.value -> 'queues') = 'array'
                      THEN ARRAY(SELECT jsonb_array_elements_text(e.value -> 'queues')) END AS queues,
                 e.value ->> 'key' AS key,
                 (e.value ->> 'concurrency')::int AS concurrency,
                 (e.value ->> 'rate_per_second')::float8 AS rate_per_second,
                 e.value ->> 'rate_text' AS rate_text,
                 coalesce((e.value ->> 'burst')::int, 1) AS burst
          FROM jsonb_each(limits) e ORDER BY e.key
        LOOP
          SELECT * INTO old FROM @schema@.pgjobd_limits l WHERE l.name = d.name FOR UPDATE;
          IF NOT FOUND THEN
            INSERT INTO @schema@.pgjobd_limits (name, types, queues, key, concurrency,
                                            rate_per_second, rate_text, burst, written_by)
            VALUES (d.name, d.types, d.queues, d.key, d.concurrency, d.rate_per_second,
                    d.rate_text, d.burst, writer);
            c_name := c_name || d.name;
            c_change := c_change || 'added'::text;
            c_writer := c_writer || NULL::text;
          ELSIF (old.types, old.queues, old.key, old.concurrency, old.rate_per_second,
                 old.rate_text, old.burst)
                IS DISTINCT FROM
                (d.types, d.queues, d.key, d.concurrency, d.rate_per_second, d.rate_text,
                 d.burst) THEN
            IF (old.types, old.queues, old.key) IS DISTINCT FROM (d.types, d.queues, d.key) THEN
              DELETE FROM @schema@.pgjobd_limit_buckets b WHERE b.limit_name = d.name;
            END IF;
            UPDATE @schema@.pgjobd_limits l
            SET types = d.types, queues = d.queues, key = d.key, concurrency = d.concurrency,
                rate_per_second = d.rate_per_second, rate_text = d.rate_text, burst = d.burst,
                written_by = writer,
                updated_at = now()
            WHERE l.name = d.name;
            c_name := c_name || d.name;
            c_change := c_change || 'changed'::text;
            c_writer := c_writer || old.written_by;
          END IF;
        END LOOP;
        IF cardinality(c_name) > 0 THEN
          PERFORM pg_notify('pgjobd_limits', @schema_name@);
        END IF;
      EXCEPTION WHEN lock_not_available THEN
        -- Everything above is undone (the advisory lock too, when this call had it), so a
        -- holder still listed here is another session.
        SELECT string_agg(h.pid::text, ', ' ORDER BY h.pid) INTO holders
        FROM pg_locks h
        WHERE h.locktype = 'advisory' AND h.granted AND h.objsubid = 2
          AND h.classid = hashtext('pgjobd_limits_sync')::oid AND h.objid = hashtext(@schema_name@)::oid
          AND h.database = (SELECT oid FROM pg_database WHERE datname = current_database());
        RETURN QUERY SELECT NULL::text, 'busy'::text,
          CASE WHEN holders IS NOT NULL
               THEN 'the advisory lock pgjobd_limits_sync, held by pid ' || holders
               ELSE 'a row of pgjobd_limits or its buckets, locked by another session' END;
        RETURN;
      END;
      RETURN QUERY SELECT * FROM unnest(c_name, c_change, c_writer);
    END
    $body$;

-- PostgreSQL grants EXECUTE on a new function to PUBLIC: only roles granted it
-- (sql/grants.sql) may call this one.
REVOKE EXECUTE ON FUNCTION @schema@.pgjobd_limits_sync(jsonb, text) FROM PUBLIC;
