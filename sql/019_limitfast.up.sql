-- pgjobd schema v19, prefetch under a rate limit (sql/functions/pgjobd_claim_limited.sql,
-- "Prefetch under a rate limit"): a claim that takes more jobs than its daemon starts at
-- once marks them, and a bucket refills only up to its burst less the marked jobs running
-- (held, counted at its last write), so that jobs waiting in a daemon never start above the
-- rate. Adding a column with a constant default rewrites nothing.
ALTER TABLE jobs ADD COLUMN prefetched boolean NOT NULL DEFAULT false;
ALTER TABLE pgjobd_limit_buckets ADD COLUMN held float8 NOT NULL DEFAULT 0;
-- The claim's new argument (startable): CREATE OR REPLACE cannot add it. The new function
-- takes it with a default, so that a call with the old eight arguments still resolves.
DROP FUNCTION IF EXISTS pgjobd_claim_limited(text[], int[], text[], int, text, bigint, text, bigint);
