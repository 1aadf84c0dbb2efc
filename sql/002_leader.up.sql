-- pgjobd schema v2: leader election for work that must happen once (rescue, retention).
-- A row per role with a TTL, renewed by its holder: works without session advisory
-- locks, so also through PgBouncer in transaction mode.
CREATE TABLE pgjobd_leader (
  role        text        PRIMARY KEY,
  leader_id   text        NOT NULL,
  elected_at  timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL
);
