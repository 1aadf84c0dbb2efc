-- Reverts 010_notify_debounce.up.sql: a NOTIFY per INSERT statement again (v1's trigger
-- function), and no clock.
CREATE OR REPLACE FUNCTION pgjobd_notify_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('pgjobd_jobs', TG_TABLE_SCHEMA);
  RETURN NULL;
END
$$;
DROP SEQUENCE IF EXISTS pgjobd_notify_clock;
