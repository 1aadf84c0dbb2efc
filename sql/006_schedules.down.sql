-- Reverts 006_schedules.up.sql: the schedules (their jobs stay).
DROP TABLE IF EXISTS pgjobd_schedules;
