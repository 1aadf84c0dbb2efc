CREATE OR REPLACE FUNCTION @schema@.pgjobd_resume_queue(queue text)
  RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
    BEGIN
      PERFORM @schema@.pgjobd_check_queue('pgjobd_resume_queue', pgjobd_resume_queue.queue);
      UPDATE @schema@.pgjobd_queues q SET paused = false, updated_at = now()
      WHERE q.queue = pgjobd_resume_queue.queue AND q.paused;
      PERFORM pg_notify('pgjobd_jobs', @schema_name@);
    END
    $body$;

-- PostgreSQL grants EXECUTE on a new function to PUBLIC: only roles granted it
-- (sql/grants.sql) may call this one.
REVOKE EXECUTE ON FUNCTION @schema@.pgjobd_resume_queue(text) FROM PUBLIC;
