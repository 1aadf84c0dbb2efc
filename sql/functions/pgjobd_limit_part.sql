-- A job's partition of a limit: the JSON text of its payload's `key` field ('"alice"',
-- '42'), or '' when the limit has no key or the payload lacks the field (one shared
-- partition; no JSON text is empty, so it cannot collide with a value). A long value is
-- cut and completed by its md5: an application's 1 MB field must not become a 1 MB index
-- entry (over the btree row limit, which would fail every claim).
--
-- No SET search_path: that would keep the planner from inlining it into the claim (a
-- function call per candidate row instead of an expression); it names nothing outside
-- pg_catalog, which is searched first whatever the caller's path.
CREATE OR REPLACE FUNCTION @schema@.pgjobd_limit_part(payload jsonb, key text) RETURNS text
  LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN key IS NULL OR payload -> key IS NULL THEN ''
              WHEN octet_length((payload -> key)::text) <= 200 THEN (payload -> key)::text
              ELSE left((payload -> key)::text, 100) || ' md5:' || md5((payload -> key)::text)
         END
$$;
