-- pgjobd schema v22, vacuum: autovacuum on jobs once 1% of its rows changed, not
-- PostgreSQL's 20%. A claim reads the claim indexes' entries of every job claimed since
-- those indexes were last vacuumed (killed, but kept: no insert lands on their pages), about
-- one page per 166 jobs. Next to 5,000,000 done rows the default waited for about 520,000
-- jobs (1,040,000 dead row versions); after 1,000,000 jobs a claim read 6,026 pages (3.4 ms),
-- and a trickle of 200 jobs/s cost PostgreSQL 4.8 ms of CPU a job against 0.65 after a
-- VACUUM (bench/README.md, "Vacuum and the claim indexes"). A value the table already has
-- (an administrator's) is kept; ALTER TABLE jobs RESET (autovacuum_vacuum_scale_factor)
-- gives PostgreSQL's default back. The ALTER takes a SHARE UPDATE EXCLUSIVE lock: it waits
-- for a VACUUM of jobs run by hand (autovacuum yields), never for inserts or claims.
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_class c CROSS JOIN unnest(c.reloptions) AS o(option)
                 WHERE c.oid = 'jobs'::regclass
                   AND o.option LIKE 'autovacuum\_vacuum\_scale\_factor=%') THEN
    ALTER TABLE jobs SET (autovacuum_vacuum_scale_factor = 0.01);
  END IF;
END
$$;
