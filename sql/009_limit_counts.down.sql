-- Reverts 009_limit_counts.up.sql: nothing, the slots it emptied are not put back (a claim
-- of schema v7 or v8 fills them again).
SELECT 1;
