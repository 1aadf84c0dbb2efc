-- Reverts 018_queue_statistics.up.sql: the queue gauges of schema v16 count every live job.
DROP STATISTICS IF EXISTS jobs_queue_status_stats;
