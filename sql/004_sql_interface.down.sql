-- Reverts 004_sql_interface.up.sql: the functions and the paused queues (they resume).
DROP FUNCTION IF EXISTS pgjobd_resume_queue(text);
DROP FUNCTION IF EXISTS pgjobd_pause_queue(text);
DROP FUNCTION IF EXISTS pgjobd_retry(bigint);
DROP FUNCTION IF EXISTS pgjobd_enqueue_many(jsonb);
DROP FUNCTION IF EXISTS pgjobd_enqueue(text, jsonb, text, int, timestamptz, int, text);
DROP FUNCTION IF EXISTS pgjobd_enqueue_ex(text, jsonb, text, int, timestamptz, int, text);
DROP FUNCTION IF EXISTS pgjobd_check_queue(text, text);
DROP FUNCTION IF EXISTS pgjobd_check_job(text, text, jsonb, text, int, timestamptz, int, text);
DROP TABLE IF EXISTS pgjobd_queues;
