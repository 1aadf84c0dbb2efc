-- Drops every function and trigger of sql/functions/ from the schema on the search_path:
-- with the migrations' downs after it (newest first), a full teardown. Found in the
-- catalog by name, so it needs no change when a function is added.
DROP TRIGGER IF EXISTS jobs_notify_insert ON jobs;
DROP TRIGGER IF EXISTS jobs_parent_ended ON jobs;
DROP TRIGGER IF EXISTS jobs_dependency_deleted ON jobs;
DROP TRIGGER IF EXISTS jobs_parents_resolve ON jobs;
DROP TRIGGER IF EXISTS jobs_dead_letter ON jobs;
DO $teardown$
DECLARE
  f regprocedure;
BEGIN
  FOR f IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
           WHERE p.pronamespace = (SELECT n.oid FROM pg_catalog.pg_namespace n
                                   WHERE n.nspname = pg_catalog.current_schema())
             AND p.proname LIKE 'pgjobd\_%'
  LOOP
    EXECUTE 'DROP FUNCTION ' || f;
  END LOOP;
END
$teardown$;
