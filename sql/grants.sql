-- Least privilege: what pgjobd's runtime role needs, and nothing more (no DDL).
-- Migrations run as the owner role (`pgjobd migrate`, or database.migrate_on_start with
-- the owner's URL); the daemons run as a runtime role that can only read and write rows.
--
--   CREATE ROLE pgjobd_runtime LOGIN PASSWORD '...';          -- once, as an admin
--   psql "$OWNER_URL" -v schema=public -v runtime_role=pgjobd_runtime -f sql/grants.sql
--
-- Re-run after upgrading pgjobd (a new migration may add a table). Applications that only
-- enqueue need just INSERT on jobs (and SELECT if they read their jobs back).
\set ON_ERROR_STOP on
\if :{?schema}
\else
  \set schema public
\endif
\if :{?runtime_role}
\else
  \set runtime_role pgjobd_runtime
\endif

GRANT USAGE ON SCHEMA :"schema" TO :"runtime_role";
-- Claim, complete, heartbeat, rescue, retention, enqueue/retry/cancel from the CLI.
GRANT SELECT, INSERT, UPDATE, DELETE ON :"schema".jobs TO :"runtime_role";
-- Leader election for rescue and retention.
GRANT SELECT, INSERT, UPDATE, DELETE ON :"schema".pgjobd_leader TO :"runtime_role";
-- The start-up check that the schema is at this binary's version.
GRANT SELECT ON :"schema".pgjobd_migrations TO :"runtime_role";
