-- pgjobd schema v9: concurrency limits counted from the running jobs themselves (README
-- "Limits", sql/functions/pgjobd_claim_limited.sql says how), no longer from slot rows.
--
-- v7 kept `concurrency` slot rows per partition: a claim wrote its job into a free slot
-- and its completion released it, two more row writes per job (each touching four
-- indexes); a limited type at a high limit ran at a quarter of the unlimited rate.
--
-- pgjobd_limit_slots stayed, empty, for daemons of schema v8 still running during a
-- rolling upgrade: their completions and rescues released slots in it. Schema v14 drops it.
TRUNCATE pgjobd_limit_slots;
