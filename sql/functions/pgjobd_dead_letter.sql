-- Dead letters (README "Dead letters"): a job that becomes dead enqueues, in the same
-- transaction, the job its type's dead_letter names (pgjobd_dead_letters, written by the
-- daemons from handlers.TYPE.dead_letter), in target_queue or the dead job's queue, with
-- payload {"dead_job": {id, type, queue, payload, attempts, last_error}} and
-- dead_letter_of = the dead job's id.
--
-- A row trigger whose WHEN holds only for a row becoming dead: PostgreSQL evaluates WHEN
-- as the row is updated and queues nothing when it is false, so the done path, and every
-- other update, costs one comparison. Every path to dead is an UPDATE that sets status
-- (a handler's failure, attempts used up, the lease rescue, an oversized payload, schema
-- v3's bounds), so all of them enqueue. A dead-letter job that dies itself
-- (dead_letter_of set) enqueues nothing: a type whose dead_letter names itself cannot
-- loop. A row INSERTed already dead enqueues nothing: nothing in pgjobd inserts one.
--
-- SECURITY DEFINER: whichever role marks the job dead (the daemons' runtime role, an
-- operator's function, an sql handler's statement) the insert is the owner's.
CREATE OR REPLACE FUNCTION @schema@.pgjobd_dead_letter() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  INSERT INTO @schema@.jobs (queue, type, payload, dead_letter_of)
  SELECT coalesce(d.target_queue, NEW.queue), d.target_type,
         jsonb_build_object('dead_job', jsonb_build_object(
           'id', NEW.id, 'type', NEW.type, 'queue', NEW.queue, 'payload', NEW.payload,
           'attempts', NEW.attempts, 'last_error', NEW.last_error)),
         NEW.id
  FROM @schema@.pgjobd_dead_letters d
  WHERE d.type = NEW.type;
  RETURN NULL;
END
$$;

REVOKE EXECUTE ON FUNCTION @schema@.pgjobd_dead_letter() FROM PUBLIC;

CREATE OR REPLACE TRIGGER jobs_dead_letter AFTER UPDATE OF status ON @schema@.jobs
  FOR EACH ROW
  WHEN (NEW.status = 'dead' AND OLD.status IS DISTINCT FROM 'dead'
        AND NEW.dead_letter_of IS NULL)
  EXECUTE FUNCTION @schema@.pgjobd_dead_letter();
