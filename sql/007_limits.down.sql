-- Reverts 007_limits.up.sql: the limits, their slots and buckets (jobs are untouched).
DROP TABLE IF EXISTS pgjobd_limit_buckets;
DROP TABLE IF EXISTS pgjobd_limit_slots;
DROP TABLE IF EXISTS pgjobd_limits;
