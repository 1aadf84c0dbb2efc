-- Reverts 022_jobs_vacuum.up.sql: PostgreSQL's default back, unless the table has another
-- value than the one v22 sets (an administrator's).
DO $$
BEGIN
  IF EXISTS (SELECT FROM pg_class c CROSS JOIN unnest(c.reloptions) AS o(option)
             WHERE c.oid = 'jobs'::regclass
               AND o.option = 'autovacuum_vacuum_scale_factor=0.01') THEN
    ALTER TABLE jobs RESET (autovacuum_vacuum_scale_factor);
  END IF;
END
$$;
