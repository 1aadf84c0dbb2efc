-- pgjobd schema v13: no table change. It made pgjobd_limits_sync give up after
-- lock_timeout instead of waiting on another session's lock
-- (sql/functions/pgjobd_limits_sync.sql, applied after the migrations).
SELECT 1;
