-- Reverts 006_schedules.up.sql: the schedule functions and the schedules (their jobs stay).
DROP FUNCTION IF EXISTS pgjobd_schedule_resume(text);
DROP FUNCTION IF EXISTS pgjobd_schedule_pause(text);
DROP FUNCTION IF EXISTS pgjobd_schedule_delete(text);
DROP FUNCTION IF EXISTS pgjobd_schedule_upsert(text, text, text, interval, text, jsonb, text,
                                              int, int, text, text, interval);
DROP TABLE IF EXISTS pgjobd_schedules;
