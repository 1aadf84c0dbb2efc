-- Reverts 016_claimcost.up.sql: the claim of schema v15 walks jobs_claim_idx.
DROP INDEX IF EXISTS jobs_claim_type_idx;
