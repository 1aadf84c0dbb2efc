-- Reverts 007_limits.up.sql: the limits, their slots and buckets (jobs are untouched).
DROP FUNCTION IF EXISTS pgjobd_limits_sync(jsonb, text);
DROP FUNCTION IF EXISTS pgjobd_claim_limited(text[], int[], text[], int, text, bigint, text, bigint);
DROP TABLE IF EXISTS pgjobd_limit_buckets;
DROP TABLE IF EXISTS pgjobd_limit_slots;
DROP TABLE IF EXISTS pgjobd_limits;
DROP FUNCTION IF EXISTS pgjobd_limit_part(jsonb, text);
