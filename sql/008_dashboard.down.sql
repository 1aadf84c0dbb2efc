-- Reverts 008_dashboard.up.sql: the dashboard's tables and index.
DROP INDEX IF EXISTS jobs_queue_status_idx;
DROP TABLE IF EXISTS pgjobd_audit;
DROP TABLE IF EXISTS pgjobd_daemons;
