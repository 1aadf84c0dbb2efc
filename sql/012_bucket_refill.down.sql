-- Reverts 012_bucket_refill.up.sql: nothing, it changed no table.
SELECT 1;
