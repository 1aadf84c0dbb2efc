-- pgjobd schema v20: the claim under one limit counts the claimer's own jobs by what it
-- holds (sql/functions/pgjobd_claim_limited.sql, "One limit"), so that its jobs whose
-- handlers returned, their completions not yet written, no longer hold its claims back.
-- The claim's new argument (own_running): CREATE OR REPLACE cannot add it. The new function
-- takes it with a default, so that a call with the old nine arguments still resolves.
DROP FUNCTION IF EXISTS pgjobd_claim_limited(text[], int[], text[], int, text, bigint, text, bigint, int);
