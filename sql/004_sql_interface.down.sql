-- Reverts 004_sql_interface.up.sql: the paused queues (they resume).
DROP TABLE IF EXISTS pgjobd_queues;
