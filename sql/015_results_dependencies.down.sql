-- Reverts 015_results_dependencies.up.sql. Blocked jobs become pending (schema v14 has no
-- dependencies); results, dependencies and dead-letter settings are lost.
-- The triggers and functions of dependencies read these columns; the enqueue functions of
-- this version take arguments v14's do not (its binary re-creates its own on migrate).
DROP TRIGGER IF EXISTS jobs_parent_ended ON jobs;
DROP TRIGGER IF EXISTS jobs_dependency_deleted ON jobs;
DROP TRIGGER IF EXISTS jobs_parents_resolve ON jobs;
DROP TRIGGER IF EXISTS jobs_dead_letter ON jobs;
DROP FUNCTION IF EXISTS pgjobd_dependencies_end();
DROP FUNCTION IF EXISTS pgjobd_dependencies_resolve();
DROP FUNCTION IF EXISTS pgjobd_dead_letter();
DROP FUNCTION IF EXISTS pgjobd_resolve_parents(bigint[], text[]);
DROP FUNCTION IF EXISTS pgjobd_parents_of(bigint[]);
DROP FUNCTION IF EXISTS pgjobd_enqueue_workflow(jsonb);
DROP FUNCTION IF EXISTS pgjobd_enqueue(text, jsonb, text, int, timestamptz, int, text, bigint[],
                                       text);
DROP FUNCTION IF EXISTS pgjobd_enqueue_ex(text, jsonb, text, int, timestamptz, int, text,
                                          bigint[], text);
DROP FUNCTION IF EXISTS pgjobd_enqueue_child(text, jsonb, text, int, timestamptz, int, text,
                                             bigint[], text);
ALTER TABLE pgjobd_limits DROP COLUMN rate_text;
DROP TABLE pgjobd_dead_letters;
DROP INDEX jobs_blocked_idx;
DROP TABLE pgjobd_dependencies;
UPDATE jobs SET status = 'pending' WHERE status = 'blocked';
ALTER TABLE jobs DROP CONSTRAINT jobs_status_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_status_check
  CHECK (status IN ('pending', 'running', 'done', 'failed', 'dead', 'cancelled'));
ALTER TABLE jobs
  DROP CONSTRAINT jobs_blocked_by_check,
  DROP CONSTRAINT jobs_on_parent_failure_check,
  DROP COLUMN dead_letter_of,
  DROP COLUMN on_parent_failure,
  DROP COLUMN has_children,
  DROP COLUMN blocked_by,
  DROP COLUMN result;
