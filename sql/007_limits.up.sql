-- pgjobd schema v7: concurrency and rate limits that hold across every daemon (README
-- "Limits").
--
-- The definitions live here, not in each daemon's memory: daemons write them from their
-- YAML (pgjobd_limits_sync) and every claim reads them, so all daemons apply the same ones.
-- A limit is split into partitions by a payload field (`key`); each partition has
--   * `concurrency` slot rows (pgjobd_limit_slots). A claim takes a free slot row under a
--     row lock and writes the job and attempt into it. A slot is held only while that job
--     is running that very attempt, so whatever ends the attempt frees it: a completion, a
--     rescue after a crash, a retry, even a DELETE of the row by hand. Completions and the
--     rescue also release it (job_id NULL) in the same statement, so a claim finds free
--     slots by an index; a slot whose attempt ended otherwise is found by the claim among
--     the longest held, or released by the leader's cleanup. Nothing has to release a
--     slot for it to be free, so nothing can leak one; a stale owner (its lease expired,
--     the job claimed again) holds nothing, since the new attempt has a new number, and
--     its fenced-off completion releases nothing.
--   * a token bucket row (pgjobd_limit_buckets) for `rate`: tokens refill at rate per
--     second up to `burst`; every start (first attempt or retry) takes one.
-- Both are taken with FOR UPDATE SKIP LOCKED, so claimers never wait for each other and a
-- limit is never exceeded: at most `concurrency` rows exist for a partition, and each
-- holds one job.

CREATE TABLE pgjobd_limits (
  name            text        PRIMARY KEY,
  types           text[],     -- NULL: any type
  queues          text[],     -- NULL: any queue
  key             text,       -- NULL: one partition for all matching jobs
  concurrency     int,        -- NULL: no concurrency limit
  rate_per_second float8,     -- NULL: no rate limit
  burst           int         NOT NULL DEFAULT 1,
  written_by      text,       -- the daemon that wrote this definition last
  updated_at      timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT pgjobd_limits_name CHECK (name ~ '^[A-Za-z0-9_.-]{1,100}$'),
  CONSTRAINT pgjobd_limits_matches CHECK (types IS NOT NULL OR queues IS NOT NULL),
  CONSTRAINT pgjobd_limits_limits CHECK (concurrency IS NOT NULL OR rate_per_second IS NOT NULL),
  CONSTRAINT pgjobd_limits_concurrency CHECK (concurrency BETWEEN 1 AND 100000),
  CONSTRAINT pgjobd_limits_rate CHECK (rate_per_second > 0 AND rate_per_second <= 1000000),
  CONSTRAINT pgjobd_limits_burst CHECK (burst BETWEEN 1 AND 1000000)
);

COMMENT ON TABLE pgjobd_limits IS
  'pgjobd: concurrency and rate limits, written by the daemons from their YAML (limits:)';

CREATE TABLE pgjobd_limit_slots (
  limit_name text        NOT NULL REFERENCES pgjobd_limits (name) ON DELETE CASCADE,
  part       text        NOT NULL,  -- the partition: pgjobd_limit_part(payload, key)
  slot       int         NOT NULL,  -- 1..concurrency
  job_id     bigint,                -- held while this job runs this attempt
  attempt    int,
  taken_at   timestamptz,
  PRIMARY KEY (limit_name, part, slot)
);

-- Every job started and finished under a concurrency limit updates a slot row twice, so a
-- small table collects dead row versions fast: vacuum it after a thousand of them rather
-- than after a fifth of the table (the default), or every claim wades through them.
ALTER TABLE pgjobd_limit_slots SET (autovacuum_vacuum_scale_factor = 0,
                                    autovacuum_vacuum_threshold = 1000,
                                    autovacuum_vacuum_cost_delay = 0);

-- A completion or rescue releases its job's slots by job id; a claim finds released slots
-- by partition.
CREATE INDEX pgjobd_limit_slots_held_idx ON pgjobd_limit_slots (job_id) WHERE job_id IS NOT NULL;
CREATE INDEX pgjobd_limit_slots_free_idx ON pgjobd_limit_slots (limit_name, part, slot)
  WHERE job_id IS NULL;
CREATE INDEX pgjobd_limit_slots_taken_idx ON pgjobd_limit_slots (limit_name, part, taken_at)
  WHERE job_id IS NOT NULL;

CREATE TABLE pgjobd_limit_buckets (
  limit_name  text        NOT NULL REFERENCES pgjobd_limits (name) ON DELETE CASCADE,
  part        text        NOT NULL,
  tokens      float8      NOT NULL,
  refilled_at timestamptz NOT NULL,
  PRIMARY KEY (limit_name, part)
);

-- A job's partition of a limit: the JSON text of its payload's `key` field ('"alice"',
-- '42'), or '' when the limit has no key or the payload lacks the field (one shared
-- partition; no JSON text is empty, so it cannot collide with a value). A long value is
-- cut and completed by its md5: an application's 1 MB field must not become a 1 MB index
-- entry (over the btree row limit, which would fail every claim).
--
-- No SET search_path: that would keep the planner from inlining it into the claim (a
-- function call per candidate row instead of an expression); it names nothing outside
-- pg_catalog, which is searched first whatever the caller's path.
CREATE FUNCTION pgjobd_limit_part(payload jsonb, key text) RETURNS text
  LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN key IS NULL OR payload -> key IS NULL THEN ''
              WHEN octet_length((payload -> key)::text) <= 200 THEN (payload -> key)::text
              ELSE left((payload -> key)::text, 100) || ' md5:' || md5((payload -> key)::text)
         END
$$;

-- In the format() strings below %1$I is this schema and %2$L its name as a literal (the
-- NOTIFY payload); a literal % is %%.
DO $migration$
DECLARE
  s text := current_schema();
BEGIN
  -- The claim when limits exist (the daemon uses the plain claim statement otherwise, so
  -- limits cost nothing until defined). The arguments are the plain claim's: served queues
  -- and their free slots, served types, the total, worker id, lease, synchronous_commit
  -- ('' keeps the session's), and the largest payload sent.
  --
  -- Candidates are read in claim order without locks, a window at a time, each with its
  -- partitions (one per limit it matches). Within a window partitions take turns (the
  -- first due job of each partition, then the second, ...; priority still first), and a
  -- keyed partition takes at most a quarter of the claim until the partitions behind it
  -- had their turn, so a partition with many due jobs does not starve the others. A
  -- partition's capacity is learnt the first time one of its jobs comes up: its free
  -- slots are locked (SKIP LOCKED: a slot another claimer is taking is not free for us),
  -- its bucket refilled and read. A job is chosen when every partition it is in has
  -- capacity, and taken if its row can be locked (the window's chosen rows are locked in
  -- one statement; a row another claimer holds gives its reservation back); otherwise it
  -- stays, and a partition without capacity is left out of the next window (its jobs are
  -- read past, not waited behind: no head-of-line blocking, up to about 2,000 due jobs of
  -- such partitions ahead per queue). At most six windows per claim.
  --
  -- Returns the claimed jobs, then one row per limit that held a due job back (id NULL):
  -- the limit, 'concurrency' or 'rate', and for rate the seconds until its next token,
  -- which the daemon waits for instead of polling.
  --
  -- Snapshots: the free slots are locked in one statement and checked again in the next,
  -- because a slot row whose job another claimer wrote after this statement's snapshot is
  -- locked at its newest version while a subquery still reads the old job row; the
  -- second statement's snapshot is newer than the lock, so it sees that job running.
  EXECUTE format($fmt$
    CREATE FUNCTION %1$I.pgjobd_claim_limited(
        queues text[], free int[], types text[], total int, owner text, lease_ms bigint,
        sync text, max_payload bigint)
      RETURNS TABLE (job_id bigint, job_queue text, job_type text, body text,
                     job_attempts int, job_max_attempts int, job_priority int,
                     waited float8, body_bytes bigint,
                     held_limit text, held_reason text, retry_in float8)
      LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
      left_in_queue int[] := free;
      taken int := 0;
      claimed bigint[] := '{}';
      blocked text[] := '{}';
      -- Partitions seen in this claim: id (limit || chr(31) || part), limit, part,
      -- capacity left, tokens at refill (NULL: no rate), tokens taken.
      p_id text[] := '{}';
      p_limit text[] := '{}';
      p_part text[] := '{}';
      p_cap int[] := '{}';
      p_tokens float8[] := '{}';
      p_used int[] := '{}';
      p_reason text[] := '{}';  -- what holds it back once its capacity is used up
      p_wait float8[] := '{}';  -- rate: seconds until its next token, when it had none
      p_rate float8[] := '{}';
      p_keyed boolean[] := '{}';
      -- Turns: in a first pass a keyed partition takes at most `share` jobs of the claim
      -- and is then left out of the next window, so the partitions behind it are reached;
      -- once every partition had its turn, the capped ones take what is left.
      capping boolean := true;
      capped text[] := '{}';
      share int := greatest(1, ceil(total / 4.0)::int);
      -- Locked free slots not yet given out, and the slots given out.
      f_id text[] := '{}';
      f_slot int[] := '{}';
      a_limit text[] := '{}';
      a_part text[] := '{}';
      a_slot int[] := '{}';
      a_job bigint[] := '{}';
      -- What held jobs back, for the return rows.
      h_limit text[] := '{}';
      h_reason text[] := '{}';
      h_wait float8[] := '{}';
      -- This window's chosen candidates (queue index each) and their reservations (job,
      -- partition index), until their rows are locked.
      chosen bigint[] := '{}';
      chosen_queue int[] := '{}';
      r_job bigint[] := '{}';
      r_part int[] := '{}';
      locked_jobs bigint[];
      n int;
      lim record;
      c record;
      pid text;
      i int;
      k int;
      qi int;
      ok boolean;
      round int := 0;
      seen int;
      skipped int;
      window_size int := greatest(total, 1) + greatest(total, 1) / 2 + 8;
      scan_budget int := window_size + 2000;
      locked int[];
      free_slots int[];
      t float8;
      cap int;
      wait float8;
      reason text;
    BEGIN
      IF coalesce(sync, '') <> '' THEN
        PERFORM set_config('synchronous_commit', sync, true);
      END IF;
      LOOP
        round := round + 1;
        seen := 0;
        skipped := 0;
        FOR c IN
          SELECT x.id, x.queue, x.parts FROM (
            SELECT j.id, j.queue, j.priority, j.run_at, j.parts,
                   row_number() OVER (PARTITION BY j.parts
                                      ORDER BY j.priority DESC, j.run_at, j.id) AS turn
            FROM unnest(queues, left_in_queue) AS q(queue, free)
            CROSS JOIN LATERAL (
              -- At most scan_budget due rows per queue and window, in claim order: the
              -- partitions left out are read past only that far, so a claim's cost stays
              -- bounded whatever backlog a saturated partition has.
              SELECT b.id, b.queue, b.priority, b.run_at, b.parts FROM (
                SELECT j.id, j.queue, j.priority, j.run_at, p.parts FROM %1$I.jobs j
                CROSS JOIN LATERAL (
                  SELECT ARRAY(SELECT l.name || chr(31) || %1$I.pgjobd_limit_part(j.payload, l.key)
                               FROM %1$I.pgjobd_limits l
                               WHERE (l.types IS NULL OR j.type = ANY (l.types))
                                 AND (l.queues IS NULL OR j.queue = ANY (l.queues))) AS parts
                  OFFSET 0) p  -- computed once per row, not once per use
                WHERE j.queue = q.queue AND j.status IN ('pending', 'failed')
                  AND j.run_at <= now() AND j.type = ANY (types)
                  -- Taken in an earlier window: this claim holds its lock, and its row is
                  -- written only at the end.
                  AND NOT (j.id = ANY (claimed))
                ORDER BY j.priority DESC, j.run_at, j.id
                LIMIT scan_budget
              ) b
              WHERE NOT (b.parts && blocked) AND NOT (capping AND b.parts && capped)
              LIMIT window_size
            ) j
            WHERE q.free > 0
              AND NOT EXISTS (SELECT 1 FROM %1$I.pgjobd_queues pq
                              WHERE pq.queue = q.queue AND pq.paused)
          ) x
          ORDER BY x.priority DESC, x.turn, x.run_at, x.id
        LOOP
          seen := seen + 1;
          EXIT WHEN taken >= total;
          qi := array_position(queues, c.queue);
          CONTINUE WHEN left_in_queue[qi] <= 0;
          ok := true;
          FOREACH pid IN ARRAY c.parts LOOP
            i := array_position(p_id, pid);
            IF i IS NULL THEN
              -- First sight of this partition in this claim: learn its capacity.
              SELECT * INTO lim FROM %1$I.pgjobd_limits l WHERE l.name = split_part(pid, chr(31), 1);
              cap := total;
              t := NULL;
              wait := NULL;
              reason := NULL;
              IF lim.concurrency IS NOT NULL THEN
                PERFORM 1 FROM %1$I.pgjobd_limit_slots sl
                WHERE sl.limit_name = lim.name AND sl.part = substr(pid, length(lim.name) + 2)
                  AND sl.slot = lim.concurrency;
                IF NOT FOUND THEN
                  INSERT INTO %1$I.pgjobd_limit_slots (limit_name, part, slot)
                  SELECT lim.name, substr(pid, length(lim.name) + 2), g
                  FROM generate_series(1, lim.concurrency) g
                  ON CONFLICT DO NOTHING;
                END IF;
                -- Free slots: the released ones (job_id NULL, a partial index), then, if
                -- those are too few, stale ones among the longest held (their attempt
                -- ended without a release: a row deleted by hand, say); a bounded look,
                -- so a partition full of long jobs costs each claim little.
                locked := ARRAY(
                  SELECT sl.slot FROM %1$I.pgjobd_limit_slots sl
                  WHERE sl.limit_name = lim.name AND sl.part = substr(pid, length(lim.name) + 2)
                    AND sl.slot <= lim.concurrency AND sl.job_id IS NULL
                  ORDER BY sl.slot
                  LIMIT total - taken
                  FOR UPDATE OF sl SKIP LOCKED);
                IF cardinality(locked) < total - taken THEN
                  locked := locked || ARRAY(
                    SELECT sl.slot FROM %1$I.pgjobd_limit_slots sl
                    WHERE sl.limit_name = lim.name AND sl.part = substr(pid, length(lim.name) + 2)
                      AND (sl.limit_name, sl.part, sl.slot) IN (
                        SELECT o.limit_name, o.part, o.slot FROM %1$I.pgjobd_limit_slots o
                        WHERE o.limit_name = lim.name AND o.part = substr(pid, length(lim.name) + 2)
                          AND o.slot <= lim.concurrency AND o.job_id IS NOT NULL
                        ORDER BY o.taken_at
                        LIMIT 4 * (total - taken) + 16)
                      AND (SELECT h.status = 'running' AND h.attempts = sl.attempt
                           FROM %1$I.jobs h WHERE h.id = sl.job_id) IS NOT TRUE
                    LIMIT total - taken - cardinality(locked)
                    FOR UPDATE OF sl SKIP LOCKED);
                END IF;
                -- Each locked slot by its key; a held one's job by its id (a scalar
                -- subquery: never a scan of every running job).
                free_slots := ARRAY(
                  SELECT sl.slot FROM unnest(locked) AS u(slot)
                  JOIN %1$I.pgjobd_limit_slots sl
                    ON sl.limit_name = lim.name AND sl.part = substr(pid, length(lim.name) + 2)
                   AND sl.slot = u.slot
                  WHERE sl.job_id IS NULL
                     OR (SELECT h.status = 'running' AND h.attempts = sl.attempt
                         FROM %1$I.jobs h WHERE h.id = sl.job_id) IS NOT TRUE
                  ORDER BY sl.slot);
                -- Slots above a lowered concurrency still hold their running jobs: they
                -- count against the new limit until those finish.
                SELECT count(*) INTO n FROM %1$I.pgjobd_limit_slots sl
                WHERE sl.limit_name = lim.name AND sl.part = substr(pid, length(lim.name) + 2)
                  AND sl.slot > lim.concurrency AND sl.job_id IS NOT NULL
                  AND (SELECT h.status = 'running' AND h.attempts = sl.attempt
                       FROM %1$I.jobs h WHERE h.id = sl.job_id) IS TRUE;
                free_slots := free_slots[1 : greatest(cardinality(free_slots) - n, 0)];
                cap := cardinality(free_slots);
                FOR k IN 1 .. cap LOOP
                  f_id := f_id || pid;
                  f_slot := f_slot || free_slots[k];
                END LOOP;
                IF cap = 0 THEN
                  reason := 'concurrency';
                END IF;
              END IF;
              IF lim.rate_per_second IS NOT NULL AND cap > 0 THEN
                PERFORM 1 FROM %1$I.pgjobd_limit_buckets b
                WHERE b.limit_name = lim.name AND b.part = substr(pid, length(lim.name) + 2);
                IF NOT FOUND THEN
                  INSERT INTO %1$I.pgjobd_limit_buckets (limit_name, part, tokens, refilled_at)
                  VALUES (lim.name, substr(pid, length(lim.name) + 2), lim.burst, now())
                  ON CONFLICT DO NOTHING;
                END IF;
                PERFORM 1 FROM %1$I.pgjobd_limit_buckets b
                WHERE b.limit_name = lim.name AND b.part = substr(pid, length(lim.name) + 2)
                FOR UPDATE SKIP LOCKED;
                IF NOT FOUND THEN
                  -- Another claimer is taking tokens right now: try again shortly.
                  cap := 0;
                  wait := least(1 / lim.rate_per_second, 0.1);
                ELSE
                  SELECT least(lim.burst::float8, b.tokens + greatest(
                           extract(epoch FROM clock_timestamp() - b.refilled_at)::float8, 0)
                           * lim.rate_per_second)
                    INTO t
                  FROM %1$I.pgjobd_limit_buckets b
                  WHERE b.limit_name = lim.name AND b.part = substr(pid, length(lim.name) + 2);
                  cap := least(cap, floor(t)::int);
                  IF cap = 0 THEN
                    wait := (1 - t) / lim.rate_per_second;
                  END IF;
                END IF;
                IF cap = 0 THEN
                  reason := 'rate';
                END IF;
              END IF;
              p_id := p_id || pid;
              p_limit := p_limit || lim.name;
              p_part := p_part || substr(pid, length(lim.name) + 2);
              p_cap := p_cap || cap;
              p_tokens := p_tokens || t;
              p_used := p_used || 0;
              p_reason := p_reason || reason;
              p_wait := p_wait || wait;
              p_rate := p_rate || lim.rate_per_second;
              p_keyed := p_keyed || (lim.key IS NOT NULL);
              i := cardinality(p_id);
            END IF;
            IF p_cap[i] <= 0 THEN
              -- Held back: this partition is left out of the next window, and the limit
              -- reported once.
              ok := false;
              IF NOT (pid = ANY (blocked)) THEN
                blocked := blocked || pid;
                IF p_reason[i] IS NOT NULL THEN  -- had no capacity to begin with
                  reason := p_reason[i];
                  wait := p_wait[i];
                ELSIF p_tokens[i] IS NOT NULL AND p_tokens[i] - p_used[i] < 1 THEN
                  reason := 'rate';  -- used up its tokens in this claim
                  wait := (1 - (p_tokens[i] - p_used[i])) / p_rate[i];
                ELSE
                  reason := 'concurrency';  -- used up its free slots in this claim
                  wait := NULL;
                END IF;
                h_limit := h_limit || p_limit[i];
                h_reason := h_reason || reason;
                h_wait := h_wait || wait;
              END IF;
              EXIT;
            END IF;
            IF capping AND p_keyed[i] AND p_used[i] >= share THEN
              ok := false;  -- had its turn in this pass
              IF NOT (pid = ANY (capped)) THEN
                capped := capped || pid;
              END IF;
              EXIT;
            END IF;
          END LOOP;
          IF NOT ok THEN
            skipped := skipped + 1;
            CONTINUE;
          END IF;
          -- Reserved: its row is locked with the window's others below.
          FOREACH pid IN ARRAY c.parts LOOP
            i := array_position(p_id, pid);
            p_cap[i] := p_cap[i] - 1;
            p_used[i] := p_used[i] + 1;
            r_job := r_job || c.id;
            r_part := r_part || i;
          END LOOP;
          chosen := chosen || c.id;
          chosen_queue := chosen_queue || qi;
          left_in_queue[qi] := left_in_queue[qi] - 1;
          taken := taken + 1;
        END LOOP;
        -- The window's chosen rows, locked in one statement (a row another claimer took
        -- meanwhile is skipped, and its reservation given back).
        locked_jobs := ARRAY(
          SELECT j.id FROM %1$I.jobs j
          WHERE j.id = ANY (chosen) AND j.status IN ('pending', 'failed') AND j.run_at <= now()
          FOR UPDATE SKIP LOCKED);
        FOR k IN 1 .. cardinality(r_job) LOOP
          i := r_part[k];
          IF r_job[k] = ANY (locked_jobs) THEN
            n := array_position(f_id, p_id[i]);
            IF n IS NOT NULL THEN
              f_id[n] := NULL;  -- given out
              a_limit := a_limit || p_limit[i];
              a_part := a_part || p_part[i];
              a_slot := a_slot || f_slot[n];
              a_job := a_job || r_job[k];
            END IF;
          ELSE
            p_cap[i] := p_cap[i] + 1;
            p_used[i] := p_used[i] - 1;
          END IF;
        END LOOP;
        FOR k IN 1 .. cardinality(chosen) LOOP
          IF NOT (chosen[k] = ANY (locked_jobs)) THEN
            left_in_queue[chosen_queue[k]] := left_in_queue[chosen_queue[k]] + 1;
            taken := taken - 1;
          END IF;
        END LOOP;
        claimed := claimed || locked_jobs;
        chosen := '{}';
        chosen_queue := '{}';
        r_job := '{}';
        r_part := '{}';
        EXIT WHEN taken >= total OR round >= 6;
        -- Another window if this one was cut short by partitions now left out.
        CONTINUE WHEN seen >= window_size AND skipped > 0;
        -- Every candidate outside those was seen: the capped partitions take the rest.
        EXIT WHEN NOT capping OR cardinality(capped) = 0;
        capping := false;
      END LOOP;

      -- Tokens taken: the bucket keeps what is left at this refill.
      UPDATE %1$I.pgjobd_limit_buckets b
      SET tokens = u.tokens - u.used, refilled_at = clock_timestamp()
      FROM unnest(p_limit, p_part, p_tokens, p_used) AS u(limit_name, part, tokens, used)
      WHERE u.tokens IS NOT NULL AND u.used > 0
        AND b.limit_name = u.limit_name AND b.part = u.part;

      RETURN QUERY
      WITH picked AS (
        SELECT j.id, j.payload::text AS body FROM %1$I.jobs j WHERE j.id = ANY (claimed)
      ), claimed_rows AS (
        UPDATE %1$I.jobs j
        SET status = 'running', attempts = least(j.attempts, 999999) + 1, locked_by = owner,
            locked_until = now() + lease_ms * interval '1 millisecond',
            started_at = now(), updated_at = now(), cancel_requested_at = NULL,
            cancel_reason = NULL
        FROM picked WHERE j.id = picked.id
        RETURNING j.id, j.queue, j.type,
                  CASE WHEN octet_length(picked.body) <= max_payload THEN picked.body END AS body,
                  j.attempts, j.max_attempts, j.priority::int AS priority,
                  extract(epoch FROM now() - greatest(j.run_at, '1970-01-01 00:00:00+00'))::float8
                    AS waited,
                  octet_length(picked.body)::bigint AS bytes
      ), slots_taken AS (
        UPDATE %1$I.pgjobd_limit_slots sl
        SET job_id = a.job, attempt = cr.attempts, taken_at = now()
        FROM unnest(a_limit, a_part, a_slot, a_job) AS a(limit_name, part, slot, job)
        JOIN claimed_rows cr ON cr.id = a.job
        WHERE sl.limit_name = a.limit_name AND sl.part = a.part AND sl.slot = a.slot
        RETURNING 1
      )
      SELECT cr.id, cr.queue, cr.type, cr.body, cr.attempts, cr.max_attempts, cr.priority,
             cr.waited, cr.bytes, NULL::text, NULL::text, NULL::float8
      FROM claimed_rows cr
      UNION ALL
      SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, h.limit_name, h.reason,
             min(h.wait)
      FROM unnest(h_limit, h_reason, h_wait) AS h(limit_name, reason, wait)
      GROUP BY h.limit_name, h.reason;
    END
    $body$ $fmt$, s);

  -- Writes a daemon's `limits:` as the definitions every daemon applies, and returns what
  -- changed: (name, 'added' | 'changed' | 'removed', who wrote the definition before).
  -- A limit whose matching or key changed loses its slots and buckets (its partitions
  -- mean something else now); one whose numbers changed keeps them: a lower concurrency
  -- lets the jobs running above it finish. Daemons starting together write one at a time.
  -- `limits`: {"NAME": {"types": [..] | null, "queues": [..] | null, "key": text | null,
  -- "concurrency": int | null, "rate_per_second": float | null, "burst": int}}.
  EXECUTE format($fmt$
    CREATE FUNCTION %1$I.pgjobd_limits_sync(limits jsonb, writer text)
      RETURNS TABLE (limit_name text, change text, previous_writer text)
      LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $body$
    DECLARE
      d record;
      old record;
      changed boolean := false;
    BEGIN
      PERFORM pg_advisory_xact_lock(hashtext('pgjobd_limits_sync'), hashtext(%2$L));
      FOR old IN
        DELETE FROM %1$I.pgjobd_limits l WHERE NOT (limits ? l.name)
        RETURNING l.name, l.written_by
      LOOP
        limit_name := old.name; change := 'removed'; previous_writer := old.written_by;
        changed := true;
        RETURN NEXT;
      END LOOP;
      FOR d IN
        SELECT e.key AS name,
               CASE WHEN jsonb_typeof(e.value -> 'types') = 'array'
                    THEN ARRAY(SELECT jsonb_array_elements_text(e.value -> 'types')) END AS types,
               CASE WHEN jsonb_typeof(e.value -> 'queues') = 'array'
                    THEN ARRAY(SELECT jsonb_array_elements_text(e.value -> 'queues')) END AS queues,
               e.value ->> 'key' AS key,
               (e.value ->> 'concurrency')::int AS concurrency,
               (e.value ->> 'rate_per_second')::float8 AS rate_per_second,
               coalesce((e.value ->> 'burst')::int, 1) AS burst
        FROM jsonb_each(limits) e ORDER BY e.key
      LOOP
        SELECT * INTO old FROM %1$I.pgjobd_limits l WHERE l.name = d.name FOR UPDATE;
        IF NOT FOUND THEN
          INSERT INTO %1$I.pgjobd_limits (name, types, queues, key, concurrency,
                                          rate_per_second, burst, written_by)
          VALUES (d.name, d.types, d.queues, d.key, d.concurrency, d.rate_per_second, d.burst,
                  writer);
          limit_name := d.name; change := 'added'; previous_writer := NULL;
          changed := true;
          RETURN NEXT;
        ELSIF (old.types, old.queues, old.key, old.concurrency, old.rate_per_second, old.burst)
              IS DISTINCT FROM
              (d.types, d.queues, d.key, d.concurrency, d.rate_per_second, d.burst) THEN
          IF (old.types, old.queues, old.key) IS DISTINCT FROM (d.types, d.queues, d.key) THEN
            DELETE FROM %1$I.pgjobd_limit_slots sl WHERE sl.limit_name = d.name;
            DELETE FROM %1$I.pgjobd_limit_buckets b WHERE b.limit_name = d.name;
          END IF;
          UPDATE %1$I.pgjobd_limits l
          SET types = d.types, queues = d.queues, key = d.key, concurrency = d.concurrency,
              rate_per_second = d.rate_per_second, burst = d.burst, written_by = writer,
              updated_at = now()
          WHERE l.name = d.name;
          limit_name := d.name; change := 'changed'; previous_writer := old.written_by;
          changed := true;
          RETURN NEXT;
        END IF;
      END LOOP;
      IF changed THEN
        PERFORM pg_notify('pgjobd_limits', %2$L);
      END IF;
    END
    $body$ $fmt$, s, s);
END
$migration$;

REVOKE EXECUTE ON FUNCTION pgjobd_claim_limited(text[], int[], text[], int, text, bigint, text, bigint),
  pgjobd_limits_sync(jsonb, text) FROM PUBLIC;
