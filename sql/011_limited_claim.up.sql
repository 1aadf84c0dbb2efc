-- pgjobd schema v11: no table change. It changed pgjobd_claim_limited (how its statements
-- that reach jobs by id are planned, and the bucket's write), whose current definition is
-- sql/functions/pgjobd_claim_limited.sql, applied after the migrations.
SELECT 1;
