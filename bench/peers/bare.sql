WITH claimed AS (UPDATE peers_bare.jobs SET status = 'running', started_at = now() WHERE id IN (SELECT id FROM peers_bare.jobs WHERE status = 'pending' AND queue = 'default' AND run_at <= now() ORDER BY run_at, id FOR UPDATE SKIP LOCKED LIMIT :batch) RETURNING id) SELECT coalesce(array_agg(id), '{}') AS ids FROM claimed
\gset
UPDATE peers_bare.jobs SET status = 'done', finished_at = now() WHERE id = ANY (:ids::bigint[]);
