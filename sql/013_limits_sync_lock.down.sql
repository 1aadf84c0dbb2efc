-- Reverts 013_limits_sync_lock.up.sql: pgjobd_limits_sync as 007_limits.up.sql made it,
-- which waits for its advisory lock and its rows as long as their holders.
DO $migration$
DECLARE
  s text := current_schema();
BEGIN
  EXECUTE format($fmt$
    CREATE OR REPLACE FUNCTION %1$I.pgjobd_limits_sync(limits jsonb, writer text)
      RETURNS TABLE (limit_name text, change text, previous_writer text)
      LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
      d record;
      old record;
      changed boolean := false;
    BEGIN
      PERFORM pg_advisory_xact_lock(hashtext('pgjobd_limits_sync'), hashtext(%2$L));
      FOR old IN
        DELETE FROM %1$I.pgjobd_limits l WHERE NOT (limits ? l.name)
        RETURNING l.name, l.written_by
      LOOP
        limit_name := old.name; change := 'removed'; previous_writer := old.written_by;
        changed := true;
        RETURN NEXT;
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
               coalesce((e.value ->> 'burst')::int, 1) AS burst
        FROM jsonb_each(limits) e ORDER BY e.key
      LOOP
        SELECT * INTO old FROM %1$I.pgjobd_limits l WHERE l.name = d.name FOR UPDATE;
        IF NOT FOUND THEN
          INSERT INTO %1$I.pgjobd_limits (name, types, queues, key, concurrency,
                                          rate_per_second, burst, written_by)
          VALUES (d.name, d.types, d.queues, d.key, d.concurrency, d.rate_per_second, d.burst,
                  writer);
          limit_name := d.name; change := 'added'; previous_writer := NULL;
          changed := true;
          RETURN NEXT;
        ELSIF (old.types, old.queues, old.key, old.concurrency, old.rate_per_second, old.burst)
              IS DISTINCT FROM
              (d.types, d.queues, d.key, d.concurrency, d.rate_per_second, d.burst) THEN
          IF (old.types, old.queues, old.key) IS DISTINCT FROM (d.types, d.queues, d.key) THEN
            DELETE FROM %1$I.pgjobd_limit_slots sl WHERE sl.limit_name = d.name;
            DELETE FROM %1$I.pgjobd_limit_buckets b WHERE b.limit_name = d.name;
          END IF;
          UPDATE %1$I.pgjobd_limits l
          SET types = d.types, queues = d.queues, key = d.key, concurrency = d.concurrency,
              rate_per_second = d.rate_per_second, burst = d.burst, written_by = writer,
              updated_at = now()
          WHERE l.name = d.name;
          limit_name := d.name; change := 'changed'; previous_writer := old.written_by;
          changed := true;
          RETURN NEXT;
        END IF;
      END LOOP;
      IF changed THEN
        PERFORM pg_notify('pgjobd_limits', %2$L);
      END IF;
    END
    $body$ $fmt$, s, s);
END
$migration$;
