-- pgjobd schema v21, a keyed concurrency limit's own lock (sql/functions/pgjobd_claim_limited.sql,
-- "A keyed limit's lock"): no table changes. The version moves so that a v20 daemon, whose
-- claim counts a keyed partition under the partition's lock alone, cannot start next to this
-- one and apply its definition again (its digest differs): while both definitions ran, a claim
-- holding the limit's lock and one holding a partition's could count the same partition.
SELECT 1;
