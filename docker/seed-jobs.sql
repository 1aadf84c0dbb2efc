-- One round of demo jobs for docker-compose.yml's "seeder" service, which runs this file
-- every few seconds. Plain INSERTs, the way any application enqueues. The mix gives every
-- dashboard panel something to show (docker/sample-handler.sh explains the payload keys):
-- mostly quick successes, some flaky jobs (one retry), some that always fail (retries,
-- then dead after max_attempts), a few permanent failures (dead at once), slow jobs on
-- the small "reports" queue, built-in no-ops, and now and then a burst that backs the
-- "reports" queue up for a minute or two (queue depth, oldest due age, busy workers).

-- 20 sample jobs on "default", 20..400 ms each.
INSERT INTO jobs (queue, type, payload, max_attempts)
SELECT 'default', 'sample',
       jsonb_build_object('ms', 20 + (random() * 380)::int)
         || CASE WHEN r < 0.02 THEN '{"permanent": true}'
                 WHEN r < 0.07 THEN '{"fail": true}'
                 WHEN r < 0.17 THEN '{"flaky": true}'
                 ELSE '{}' END::jsonb,
       3
FROM (SELECT random() AS r FROM generate_series(1, 20)) AS dice;

-- 2 slow jobs on "reports" (concurrency 2), 1..3 s each, one of them due in 30 s.
INSERT INTO jobs (queue, type, payload, run_at)
VALUES ('reports', 'sample', jsonb_build_object('ms', 1000 + (random() * 2000)::int), now()),
       ('reports', 'sample', jsonb_build_object('ms', 1000 + (random() * 2000)::int),
        now() + interval '30 seconds');

-- 10 no-ops: the fast end of the duration histogram.
INSERT INTO jobs (type) SELECT 'ping' FROM generate_series(1, 10);

-- In about one round in 20, a burst of 40 slow reports: a backlog that drains in ~80 s.
-- (The FROM subquery is evaluated once, so the whole burst is in or out.)
INSERT INTO jobs (queue, type, payload)
SELECT 'reports', 'sample', jsonb_build_object('ms', 2000 + (random() * 2000)::int)
FROM generate_series(1, 40), (SELECT random() < 0.05 AS burst) AS dice
WHERE dice.burst;
