-- Reverts 010_notify_debounce.up.sql: the INSERT trigger's clock. The trigger function
-- reads it: drop the functions first (sql/functions.down.sql), or apply an older binary's.
DROP SEQUENCE IF EXISTS pgjobd_notify_clock;
