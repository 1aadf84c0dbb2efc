-- Reverts 011_limited_claim.up.sql: nothing, it changed no table.
SELECT 1;
