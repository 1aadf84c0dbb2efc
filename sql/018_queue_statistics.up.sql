-- pgjobd schema v18, large queues: the queue gauges count each (queue, status) up to
-- 10,000 jobs and take the planner's estimate above that (counting 10,000,000 pending jobs
-- every 30 s took a parallel scan of seconds). These statistics give the planner the
-- frequency of each (queue, status) pair, which ANALYZE samples; without them it multiplies
-- the queue's share by the status's, far off when queues hold different mixes of statuses.
-- Creating them reads nothing: the next ANALYZE (autovacuum's) fills them.
CREATE STATISTICS jobs_queue_status_stats (mcv) ON queue, status FROM jobs;
