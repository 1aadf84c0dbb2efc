-- Reverts 002_leader.up.sql.
DROP TABLE IF EXISTS pgjobd_leader;
