-- Reverts 013_limits_sync_lock.up.sql: nothing, it changed no table.
SELECT 1;
