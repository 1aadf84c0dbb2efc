-- Reverts 017_held_partitions.up.sql: the limited claim of schema v16 reads held rows past in
-- every window, and keeps partitions without the job's type and queue.
DROP TABLE IF EXISTS pgjobd_limit_held;
DROP INDEX IF EXISTS pgjobd_limit_parts_part_idx;
TRUNCATE pgjobd_limit_parts;
ALTER TABLE pgjobd_limit_parts DROP COLUMN IF EXISTS type, DROP COLUMN IF EXISTS queue;
