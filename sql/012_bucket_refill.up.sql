-- pgjobd schema v12: no table change. It changed how pgjobd_claim_limited writes a rate
-- limit's bucket back (sql/functions/pgjobd_claim_limited.sql, applied after the
-- migrations).
SELECT 1;
