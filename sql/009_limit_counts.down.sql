-- Reverts 009_limit_counts.up.sql. Nothing is dropped: the claim function it installed
-- keeps v7's signature and results and needs no slot rows, so daemons of schema v8 run on
-- it unchanged (their completions release slots in the empty pgjobd_limit_slots, which
-- 007's down migration drops). Re-creating v7's function would bring back its cost, not
-- a behaviour anything depends on.
SELECT 1;
