-- Reverts 020_own_running.up.sql: the claim of schema v19 counts every running row.
DROP FUNCTION IF EXISTS pgjobd_claim_limited(text[], int[], text[], int, text, bigint, text, bigint, int, int);
