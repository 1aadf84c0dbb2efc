-- The INSERT trigger: wakes idle daemons at once (README "Job lifecycle").
--
-- FOR EACH STATEMENT: a bulk INSERT of 100,000 rows sends one notification, not 100,000;
-- the payload is constant, so PostgreSQL also folds the notifications of one transaction
-- into one.
--
-- At most one NOTIFY per 2 ms per schema. PostgreSQL serialises the commits of every
-- transaction that has sent a NOTIFY (one database-wide lock, held through the commit's
-- WAL flush, so that notifications arrive in commit order): with a NOTIFY per INSERT,
-- single-row INSERTs commit one at a time however many producers there are
-- (sql/010_notify_debounce.up.sql has the measurements). So a statement that inserts
-- jobs notifies only when none was sent (by any session, into this schema) in the last
-- 2 ms. The time of the last one is kept in
-- the sequence pgjobd_notify_clock, the one shared value PostgreSQL updates outside
-- transactions: setval is neither rolled back nor held until commit, so producers never
-- wait on each other for it. Two producers that read it at the same moment may both
-- notify: harmless. A skipped job relies on the notification sent less than 2 ms earlier:
-- a job that commits later is claimed by the next notification (in a stream, at most 2 ms
-- after the previous) or, at the latest, by the poll every woken daemon makes
-- poll.min_interval after a wake-up.
--
-- pgjobd_notify_jobs sends it, for the trigger and for every function that makes a job due
-- now without an INSERT (pgjobd_retry, pgjobd_retry_many): one wake-up, one clock. It is
-- called only by SECURITY DEFINER functions, so it runs as the schema's owner and needs no
-- grant.
CREATE OR REPLACE FUNCTION @schema@.pgjobd_notify_jobs() RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  clock constant regclass := format('%I.pgjobd_notify_clock', @schema_name@)::regclass;
  now_ms constant bigint := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
BEGIN
  -- Not "last > now - 2": after the system clock is set back, that would hold until the
  -- clock caught up again, and no NOTIFY would go out meanwhile.
  IF coalesce(pg_sequence_last_value(clock), 0) BETWEEN now_ms - 1 AND now_ms + 1 THEN
    RETURN;  -- a NOTIFY went out under 2 ms ago
  END IF;
  PERFORM setval(clock, now_ms);
  PERFORM pg_notify('pgjobd_jobs', @schema_name@);
END
$$;

REVOKE EXECUTE ON FUNCTION @schema@.pgjobd_notify_jobs() FROM PUBLIC;

-- SECURITY DEFINER: producers need INSERT on jobs only, not UPDATE on the sequence; it
-- runs as the schema's owner with a fixed search_path, so a pg_notify planted in a schema
-- the inserting session searches first is never called.
CREATE OR REPLACE FUNCTION @schema@.pgjobd_notify_insert() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM @schema@.pgjobd_notify_jobs();
  RETURN NULL;
END
$$;

-- CREATE OR REPLACE TRIGGER (PostgreSQL 14): re-applied in place, without a moment in
-- which jobs has no trigger. It locks jobs against writes until the migration commits,
-- a few milliseconds when only the functions are applied.
CREATE OR REPLACE TRIGGER jobs_notify_insert AFTER INSERT ON @schema@.jobs
  FOR EACH STATEMENT EXECUTE FUNCTION @schema@.pgjobd_notify_insert();
