-- Reverts 011_limited_claim.up.sql. Nothing is changed back: the function it installed
-- keeps v9's arguments and results, so daemons of schema v10 run on it unchanged. Putting
-- v9's statements back would only bring back its stalls and lost tokens, not a behaviour
-- anything depends on.
SELECT 1;
