-- Least privilege: what pgjobd's runtime role needs, and nothing more (no DDL), and two
-- optional roles for applications and operators that use the SQL interface (README "SQL
-- interface"). Migrations run as the owner role (`pgjobd migrate`, or
-- database.migrate_on_start with the owner's URL); the daemons run as a runtime role that
-- can only read and write rows.
--
--   CREATE ROLE pgjobd_runtime LOGIN PASSWORD '...';          -- once, as an admin
--   psql "$OWNER_URL" -v schema=public -v runtime_role=pgjobd_runtime -f sql/grants.sql
--
-- Optional, each a role that exists already:
--   -v producer_role=app_producer   may only enqueue and read its jobs' outcomes: EXECUTE
--                                   on pgjobd_enqueue, pgjobd_enqueue_ex,
--                                   pgjobd_enqueue_many, pgjobd_enqueue_workflow and
--                                   pgjobd_job_result; no right on any table
--   -v operator_role=app_operator   may enqueue, cancel, retry, pause and resume queues,
--                                   create, change, delete, pause and resume schedules,
--                                   and read jobs (pgjobd_job_attempts and
--                                   pgjobd_job_result too),
--                                   pgjobd_queues, pgjobd_schedules, the limits, and
--                                   the dashboard's pgjobd_daemons and pgjobd_audit
-- The functions are SECURITY DEFINER: they write as the owner, so these roles need no
-- table rights to use them. Run as the owner (it grants on its own objects).
--
-- Re-run after upgrading pgjobd (a new migration may add a table or a function). The
-- migrator re-creates functions with CREATE OR REPLACE, which keeps these grants; a function
-- dropped and re-created (its arguments changed) has them again only after a re-run.
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
-- Claim, complete, heartbeat, rescue, retention, cancel from the CLI.
GRANT SELECT, INSERT, UPDATE, DELETE ON :"schema".jobs TO :"runtime_role";
-- Leader election for rescue and retention.
GRANT SELECT, INSERT, UPDATE, DELETE ON :"schema".pgjobd_leader TO :"runtime_role";
-- The start-up check that the schema is at this binary's version.
GRANT SELECT ON :"schema".pgjobd_migrations TO :"runtime_role";
-- The claim skips paused queues; the statistics report them (pgjobd_queue_paused).
GRANT SELECT ON :"schema".pgjobd_queues TO :"runtime_role";
-- Recurring jobs: read and fire schedules, reconcile the YAML's into the table.
GRANT SELECT, INSERT, UPDATE, DELETE ON :"schema".pgjobd_schedules TO :"runtime_role";
-- Limits: write the YAML's definitions, take tokens in the claim, clean up.
GRANT SELECT, INSERT, UPDATE, DELETE ON :"schema".pgjobd_limits, :"schema".pgjobd_limit_buckets,
  :"schema".pgjobd_limit_parts, :"schema".pgjobd_limit_held TO :"runtime_role";
GRANT EXECUTE ON FUNCTION
  :"schema".pgjobd_claim_limited(text[], int[], text[], int, text, bigint, text, bigint, int, int),
  :"schema".pgjobd_limits_sync(jsonb, text),
  -- The leader's dependency repair (README "Dependencies").
  :"schema".pgjobd_resolve_parents(bigint[], text[])
TO :"runtime_role";
-- Behind a transaction pooler, the functions that keep the hot statements' plans (README
-- "PgBouncer"), named for this binary's statements: they run with the caller's rights, and
-- any role may call them unless the database revokes that from PUBLIC by default.
SELECT format('GRANT EXECUTE ON FUNCTION %I.%I(%s) TO %I', n.nspname, p.proname,
              pg_get_function_identity_arguments(p.oid), :'runtime_role')
FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = :'schema' AND p.proname LIKE 'pgjobd\_pooled\_%'
\gexec
-- The dashboard (README "Dashboard"): each daemon keeps its row in pgjobd_daemons; the
-- dashboard's actions write pgjobd_audit (insert only: the trail is not rewritten).
GRANT SELECT, INSERT, UPDATE, DELETE ON :"schema".pgjobd_daemons TO :"runtime_role";
GRANT SELECT, INSERT ON :"schema".pgjobd_audit TO :"runtime_role";
-- Dependencies between jobs (the triggers run as the writer of jobs) and the dead-letter
-- settings each daemon writes from its YAML.
GRANT SELECT, INSERT, UPDATE, DELETE ON :"schema".pgjobd_dependencies,
  :"schema".pgjobd_dead_letters TO :"runtime_role";

-- Only roles granted below may call the SQL interface (sql/functions/ revokes it too; this
-- repeats it for a schema whose grants were changed by hand).
REVOKE EXECUTE ON FUNCTION
  :"schema".pgjobd_check_job(text, text, jsonb, text, int, timestamptz, int, text),
  :"schema".pgjobd_check_queue(text, text),
  :"schema".pgjobd_check_array(text, text, jsonb, int, int),
  :"schema".pgjobd_enqueue_ex(text, jsonb, text, int, timestamptz, int, text, bigint[], text),
  :"schema".pgjobd_enqueue(text, jsonb, text, int, timestamptz, int, text, bigint[], text),
  :"schema".pgjobd_enqueue_many(jsonb),
  :"schema".pgjobd_enqueue_workflow(jsonb),
  :"schema".pgjobd_retry(bigint),
  :"schema".pgjobd_cancel(bigint, text),
  :"schema".pgjobd_cancel_many(bigint[], text),
  :"schema".pgjobd_retry_many(bigint[]),
  :"schema".pgjobd_job_attempts(bigint),
  :"schema".pgjobd_job_result(bigint),
  :"schema".pgjobd_pause_queue(text),
  :"schema".pgjobd_resume_queue(text),
  :"schema".pgjobd_schedule_upsert(text, text, text, interval, text, jsonb, text, int, int,
                                   text, text, interval),
  :"schema".pgjobd_schedule_delete(text),
  :"schema".pgjobd_schedule_pause(text),
  :"schema".pgjobd_schedule_resume(text)
FROM PUBLIC;
-- The CLI's enqueue, cancel, retry, pause and resume call the functions with the daemon's
-- URL, and so does the dashboard (which also pauses and resumes schedules).
GRANT EXECUTE ON FUNCTION
  :"schema".pgjobd_enqueue_ex(text, jsonb, text, int, timestamptz, int, text, bigint[], text),
  :"schema".pgjobd_enqueue(text, jsonb, text, int, timestamptz, int, text, bigint[], text),
  :"schema".pgjobd_enqueue_many(jsonb),
  :"schema".pgjobd_retry(bigint),
  :"schema".pgjobd_cancel(bigint, text),
  :"schema".pgjobd_cancel_many(bigint[], text),
  :"schema".pgjobd_retry_many(bigint[]),
  :"schema".pgjobd_job_attempts(bigint),
  :"schema".pgjobd_job_result(bigint),
  :"schema".pgjobd_pause_queue(text),
  :"schema".pgjobd_resume_queue(text),
  :"schema".pgjobd_schedule_pause(text),
  :"schema".pgjobd_schedule_resume(text)
TO :"runtime_role";

\if :{?producer_role}
  GRANT USAGE ON SCHEMA :"schema" TO :"producer_role";
  GRANT EXECUTE ON FUNCTION
    :"schema".pgjobd_enqueue_ex(text, jsonb, text, int, timestamptz, int, text, bigint[], text),
    :"schema".pgjobd_enqueue(text, jsonb, text, int, timestamptz, int, text, bigint[], text),
    :"schema".pgjobd_enqueue_many(jsonb),
    :"schema".pgjobd_enqueue_workflow(jsonb),
    :"schema".pgjobd_job_result(bigint)
  TO :"producer_role";
\endif

\if :{?operator_role}
  GRANT USAGE ON SCHEMA :"schema" TO :"operator_role";
  GRANT EXECUTE ON FUNCTION
    :"schema".pgjobd_enqueue_ex(text, jsonb, text, int, timestamptz, int, text, bigint[], text),
    :"schema".pgjobd_enqueue(text, jsonb, text, int, timestamptz, int, text, bigint[], text),
    :"schema".pgjobd_enqueue_many(jsonb),
    :"schema".pgjobd_enqueue_workflow(jsonb),
    :"schema".pgjobd_retry(bigint),
    :"schema".pgjobd_cancel(bigint, text),
    :"schema".pgjobd_cancel_many(bigint[], text),
    :"schema".pgjobd_retry_many(bigint[]),
    :"schema".pgjobd_job_attempts(bigint),
    :"schema".pgjobd_job_result(bigint),
    :"schema".pgjobd_pause_queue(text),
    :"schema".pgjobd_resume_queue(text),
    :"schema".pgjobd_schedule_upsert(text, text, text, interval, text, jsonb, text, int, int,
                                     text, text, interval),
    :"schema".pgjobd_schedule_delete(text),
    :"schema".pgjobd_schedule_pause(text),
    :"schema".pgjobd_schedule_resume(text)
  TO :"operator_role";
  GRANT SELECT ON :"schema".jobs, :"schema".pgjobd_queues, :"schema".pgjobd_schedules,
    :"schema".pgjobd_limits, :"schema".pgjobd_daemons,
    :"schema".pgjobd_audit, :"schema".pgjobd_dependencies TO :"operator_role";
\endif
