-- Reverts 012_bucket_refill.up.sql. Nothing is changed back: the function it installed
-- keeps v11's arguments and results, so daemons of schema v11 run on it unchanged. Putting
-- v11's write back would only bring back its lost tokens, not a behaviour anything depends
-- on.
SELECT 1;
