-- Reverts 016_claim_by_type.up.sql: the claim of schema v15 walks jobs_claim_idx, and its
-- limited claim reads every candidate's partition from its payload.
DROP TABLE IF EXISTS pgjobd_limit_parts;
DROP INDEX IF EXISTS jobs_claim_type_idx;
