-- pgjobd schema v17, held partitions skipped unread: the limited claim remembers the keyed
-- partitions it found without room whose jobs have large payloads (pgjobd_limit_held), and
-- the next claims learn those partitions' room first and skip their kept rows by id,
-- without reading them (sql/functions/pgjobd_claim_limited.sql). Before, each claim read
-- every held row in each of its windows: 200 held jobs with 1 MB payloads or keys cost the
-- other jobs' claims 15-75%.
--
-- The kept partitions gain the job's type and queue, so that the rows a held limit holds
-- are found from the partition alone (a limit matches types and queues), and an index on
-- the partition. The table is a cache (unlogged, refilled by the claims): emptied here.
TRUNCATE pgjobd_limit_parts;
ALTER TABLE pgjobd_limit_parts ADD COLUMN type text NOT NULL, ADD COLUMN queue text NOT NULL;
CREATE INDEX pgjobd_limit_parts_part_idx ON pgjobd_limit_parts (key, part);

-- Keyed partitions a claim found without room while large-payload jobs of theirs were due.
-- Unlogged: a crash empties it, and the next claims find them again. An entry whose kept
-- jobs ended is swept by the claims now and then.
CREATE UNLOGGED TABLE pgjobd_limit_held (
  limit_name text NOT NULL,
  part       text NOT NULL,
  PRIMARY KEY (limit_name, part)
);

-- Written by the limited claim as its caller, the runtime role: granted to whoever
-- sql/grants.sql let write the limits' buckets (as schema v16 did for pgjobd_limit_parts).
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
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON pgjobd_limit_held TO %s', grantee);
  END LOOP;
END
$$;
