-- pgjobd schema v16, claiming by type: the claim reads each served (queue, type) on its
-- own, so due rows of types no daemon has a handler for are never walked past (200,000 of
-- them ahead of the served jobs made every claim 6-30x slower through jobs_claim_idx,
-- which filters types after the index walk). jobs_claim_idx stays for what reads a queue
-- in claim order across types: the limited claim's window, the due-time probes, the
-- queue statistics. CREATE INDEX locks writes to jobs while it builds (about a second per
-- million pending rows).
CREATE INDEX jobs_claim_type_idx ON jobs (queue, type, priority DESC, run_at, id)
  WHERE status IN ('pending', 'failed');

-- The limited claim's partition of a job with a large payload, under a keyed limit's key
-- (sql/functions/pgjobd_claim_limited.sql): read once, not at every claim that reads the
-- job past. A keyed partition is a field of the payload, and reading a field detoasts the
-- whole payload: 200 held jobs with 1 MB payloads in a partition that could not run yet
-- made every claim 0.4-1.6 s, and with a 1 MB key value 5 s. Unlogged: a crash empties
-- it, and the next claims read the payloads again. Rows of jobs no longer pending, failed
-- or running are deleted by the claim now and then.
CREATE UNLOGGED TABLE pgjobd_limit_parts (
  job_id bigint NOT NULL,
  key    text   NOT NULL,  -- the limit's key field
  part   text   NOT NULL,  -- pgjobd_limit_part(payload, key)
  PRIMARY KEY (job_id, key)
);

-- The limited claim reads and writes this table as its caller, the runtime role. Whoever
-- sql/grants.sql let write the limits' buckets may write it too, here: a daemon that
-- migrates on start would otherwise have every limited claim refused until grants.sql is
-- run again.
DO $$
DECLARE
  grantee regrole;
BEGIN
  FOR grantee IN
    SELECT DISTINCT a.grantee::regrole
    FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) a
    WHERE c.oid = 'pgjobd_limit_buckets'::regclass AND a.privilege_type = 'INSERT'
      AND a.grantee <> c.relowner AND a.grantee <> 0
  LOOP
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON pgjobd_limit_parts TO %s', grantee);
  END LOOP;
END
$$;
