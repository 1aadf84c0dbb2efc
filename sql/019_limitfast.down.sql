-- Reverts 019_limitfast.up.sql: the claim of schema v18 takes no startable and marks nothing.
DROP FUNCTION IF EXISTS pgjobd_claim_limited(text[], int[], text[], int, text, bigint, text, bigint, int);
ALTER TABLE pgjobd_limit_buckets DROP COLUMN IF EXISTS held;
ALTER TABLE jobs DROP COLUMN IF EXISTS prefetched;
