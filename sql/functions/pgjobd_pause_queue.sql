-- Pause and resume: idempotent, and possible before the queue has any job. Every claim
-- reads pgjobd_queues, so every daemon obeys at its next claim whether or not it heard
-- the NOTIFY; the NOTIFY (the INSERT trigger's channel and payload) makes idle daemons
-- claim at once, which after a resume starts the queue's due jobs without waiting for a
-- poll. updated_at is the time of the last change.
CREATE OR REPLACE FUNCTION @schema@.pgjobd_pause_queue(queue text)
  RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    BEGIN
      PERFORM @schema@.pgjobd_check_queue('pgjobd_pause_queue', pgjobd_pause_queue.queue);
      INSERT INTO @schema@.pgjobd_queues AS q (queue, paused, updated_at)
      VALUES (pgjobd_pause_queue.queue, true, now())
      ON CONFLICT ON CONSTRAINT pgjobd_queues_pkey DO UPDATE
        SET paused = true, updated_at = now() WHERE NOT q.paused;
      PERFORM pg_notify('pgjobd_jobs', @schema_name@);
    END
    $body$;

-- PostgreSQL grants EXECUTE on a new function to PUBLIC: only roles granted it
-- (sql/grants.sql) may call this one.
REVOKE EXECUTE ON FUNCTION @schema@.pgjobd_pause_queue(text) FROM PUBLIC;
