-- pgjobd schema v10: the INSERT trigger's NOTIFY at most once per 2 ms per schema.
--
-- Why: PostgreSQL serialises the commits of every transaction that has sent a NOTIFY (one
-- database-wide lock, held through the commit's WAL flush, so that notifications arrive
-- in commit order). With a NOTIFY per INSERT, single-row INSERTs could therefore commit
-- only one at a time, one WAL flush each, however many producers there were: 8 producers
-- inserted 4,957 jobs/s with the trigger against 9,874 without it (pgbench, 2 cores,
-- synchronous_commit on), and about 1,800/s while a daemon worked them off.
--
-- So a statement that inserts jobs sends the NOTIFY only when none was sent (by any
-- session, into this schema) in the last 2 ms. The time of the last one is kept in a
-- sequence, the one shared value PostgreSQL updates outside transactions: setval is
-- neither rolled back nor held until commit, so producers never wait on each other for it.
-- Two producers that read it at the same moment may both notify: harmless.
--
-- What a skipped NOTIFY costs: the skipped job relies on the notification sent less than
-- 2 ms earlier. Daemons woken by it claim what has committed by then; a job that commits
-- later is claimed by the next notification (in a stream, one comes at most 2 ms after
-- the previous) or, at the latest, by the poll every woken daemon makes poll.min_interval
-- after a wake-up (README "Job lifecycle"). A lone INSERT, more than 2 ms after the last,
-- notifies as before.
--
-- The trigger function (sql/functions/pgjobd_notify_insert.sql) reads and sets the clock;
-- it is SECURITY DEFINER, so producers need INSERT on jobs only, not UPDATE on the sequence.

CREATE SEQUENCE pgjobd_notify_clock AS bigint MINVALUE 0 START 0;
COMMENT ON SEQUENCE pgjobd_notify_clock IS
  'pgjobd: when the INSERT trigger last sent a NOTIFY, in ms since the epoch (setval)';
