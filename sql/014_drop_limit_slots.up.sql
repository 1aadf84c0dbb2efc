-- pgjobd schema v14: pgjobd_limit_slots is dropped, and pgjobd_migrations records which
-- functions were applied.
--
-- The slots held concurrency limits until schema v9 counted running jobs instead; the
-- table stayed, empty, for daemons of schema v8 during a rolling upgrade. No daemon of
-- schema v9 or later reads or writes it. Its indexes and storage settings go with it.
DROP TABLE pgjobd_limit_slots;

-- The digest of the function set (sql/functions/) applied with the newest version, written
-- by the migrator on that version's row; a binary whose function set has another digest
-- applies its own (src/db/migrator.cpp).
ALTER TABLE pgjobd_migrations ADD COLUMN functions_digest text;
