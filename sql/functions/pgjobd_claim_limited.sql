-- The claim when limits exist (the daemon uses the plain claim statement otherwise, so
-- limits cost nothing until defined). The arguments are the plain claim's: served queues
-- and their free slots, served types, the total, worker id, lease, synchronous_commit
-- ('' keeps the session's), and the largest payload sent; then how many of the claimed
-- jobs the daemon starts at once (its free workers; NULL: all), the others waiting in it
-- for a worker (worker.prefetch: below, Prefetch under a rate limit); and how many jobs the
-- daemon holds whose handlers have not returned (NULL: not told; below, One limit).
--
-- A window of due candidates is read in claim order without locks, each with its
-- partitions (one per limit it matches). Within a window partitions take turns (the
-- first due job of each partition set, then the second, ...; priority still first), and
-- a keyed partition takes at most a quarter of the claim until the partitions behind it
-- had their turn, so one with many due jobs does not starve the others. A partition's
-- room is learnt the first time it comes up in the claim: its lock taken and its running
-- jobs counted (concurrency), its bucket refilled and read under a row lock (rate). A
-- candidate is chosen when it ranks within the room of each of its partitions and within
-- its queue's free slots; the chosen rows are locked in one statement (a row another
-- claimer holds is skipped and its room given back). A partition without room is left
-- out of the next window: its jobs are read past, not waited behind (no head-of-line
-- blocking, up to about 2,000 due jobs of such partitions ahead per queue). At most six
-- windows per claim.
--
-- Unkeyed limits only (no keyed limit matches a served queue and type): a job's partitions
-- follow from its queue and type, so the window is the first due jobs of each served queue
-- and type instead (read by type, as the plain claim reads them), and it is the only one:
-- what a pair's partitions turn down has nothing behind it another window could take. A
-- further window only reads past chosen jobs another claimer had locked. With one queue and
-- one set of partitions, the choice is the first candidates within the least room.
--
-- Held partitions across claims: a keyed partition found without room while jobs of it
-- with large payloads (kept in pgjobd_limit_parts) were due is remembered in
-- pgjobd_limit_held. Each claim learns the remembered partitions' room with its first
-- window's, and leaves their kept rows out of every window by id (a hashed set, found by
-- the index on the partition), so that neither their payloads nor their kept partitions
-- are read again: reading those rows past cost each claim a probe per held row and window.
-- This only chooses which rows are read; what is claimed is decided by the room learnt as
-- for any partition, so the limits stay exact. A remembered partition found with room is
-- forgotten, and its rows, skipped in the first window, are read in a second one before
-- anything is chosen (they may come first in claim order).
--
-- Returns the claimed jobs, then one row per limit that held a due job back (id NULL):
-- the limit, 'concurrency' or 'rate', and the seconds until it is worth asking again
-- (rate: the next token; a partition another claimer holds: 10 ms), which the daemon
-- waits for instead of polling; NULL when only a finished job can make room.
--
-- Concurrency is counted from the running jobs themselves: the rows with status
-- 'running', read through the lease index, whose size is the fleet's busy workers. A job
-- counts while its row runs, so whatever ends the run frees its place (completion,
-- rescue, cancel, a DELETE by hand): nothing is written per job beyond the claim, nothing
-- needs releasing and nothing can leak. Two claimers never count the same free room: a
-- claim takes the partition's transaction-scoped advisory lock (keyed by schema, limit
-- and partition) before counting, and keeps it until it commits; the count is a later
-- statement than the lock, so its snapshot sees every claim committed before the lock was
-- granted. A partition another claimer holds is left out of this claim, like a locked row
-- under SKIP LOCKED, and reported with a 10 ms retry.
--
-- A keyed limit's lock. Each lock takes an entry in the server's shared lock table, so a
-- claim locks at most 128 partitions: over 1,000 keys a claim of 1,000 would take 128. A
-- keyed concurrency limit also has a lock of its own (keyed by schema and limit, chr(30)
-- after the name, which no partition's key has there). A claim that takes it exclusively
-- counts any of the limit's partitions without their locks; a claim that locks partitions
-- one by one first takes it shared. Two claimers counting one partition thus hold either
-- its lock or the limit's exclusively, one after the other, never both at once; the
-- count is a later statement than either lock. A claim that meets more fresh partitions
-- than it may still lock one by one asks for the lock of each keyed limit among them
-- exclusively first (when another claimer holds it in either mode, it locks them one by
-- one as before); a limit held exclusively by another claimer leaves its partitions out
-- of this claim, as a partition held is.
--
-- One keyed limit: exactly one limit matches the served queues and types, and it is a
-- keyed concurrency limit over all of them. The claim takes the limit's lock exclusively
-- (when another claimer holds it, nothing is claimed and the limit is reported with a 10 ms
-- retry, as one limit's partition is), counts the limit's running jobs (R), reads the
-- plain claim's choice (below: One limit), then each chosen job's partition. The choice
-- stands when no partition has more than a share of it (a quarter of the claim, as in a
-- window) and each partition's running jobs and its part of the choice stay within the
-- limit: known without counting the partitions' running jobs while R and the whole choice
-- stay within it (a partition's running jobs are at most R), else counted for the
-- choice's partitions. Otherwise the general path claims, holding the limit's lock (so
-- with no partition locks and no cap on them); so it does at once while held partitions
-- of the limit are remembered (above: Held partitions across claims), whose kept rows it
-- leaves out unread. Taking all of a choice in claim order rather than in turns differs
-- from a window only in order: every partition of it gets its whole part.
--
-- A rate limit is a token bucket row per partition: the claim takes its tokens when it
-- reads the bucket (under a row lock), and writes back what was left after the take,
-- refilled from the read up to the write and only then capped at the burst, so the
-- tokens that refill while it holds the bucket are not lost.
--
-- Prefetch under a rate limit. A job the daemon holds starts later than its claim took its
-- token, so the starts in [a, b] are at most held(a) + the claims in [a, b], and the
-- claims at most V(a) + rate * (b - a), V being the bucket's level (what a claim at that
-- moment would read). The limit (at most burst + rate * (b - a) starts in any [a, b])
-- holds if held(t) + V(t) <= burst at every moment t. So a claim taking more jobs than
-- `startable` marks each of them (jobs.prefetched), and the bucket keeps `held`, never
-- below the limit's running marked jobs: every held job is one, and a job is marked only
-- by a claim, which writes the bucket with held plus what it marked (so between two
-- writes held >= held(t)). The level refills up to burst - held instead of burst:
-- between two claims V(t) + held(t) <= burst; a claim moves tokens from V to held (it
-- takes at most its tokens, and adds what it marks). Once held would pass half the burst
-- the claim counts the marked jobs running anew, so that it comes down as they end (a
-- bucket with held > 0 is written by every claim that reads it; at least half the burst
-- stays to refill). Without prefetch nothing is marked and held stays 0: the bucket is
-- the plain token bucket. tests/limits_pgtest.cpp
-- (Limits.HeldJobsUnderARateLimitKeepTheBucketFromRefilling) fails if the refill ignores
-- them.
--
-- Plans: the statements run with generic plans (custom plans over these arrays were made
-- anew at every call, which cost more than running them), made with sequential and bitmap
-- scans off, as the daemon's claim session makes its own (src/db/statement_set.hpp), so
-- that a plan made while the table was small is the one for a large table: the UPDATE of
-- the claimed rows reads them by ctid (planned at each call by EXECUTE, it was 15% of a
-- claim's backend time). jit is off: a switched-off scan nothing can replace
-- (pgjobd_limits is read whole) would otherwise look costly enough to compile. The general
-- path's lock of its chosen rows is still run by EXECUTE, planned at each call for the
-- table as it is: a generic plan made while the table was small walked the claim index
-- through every due row once it had grown (a claim of 1,000 from a 200,000-row backlog
-- took 2.0 s against 0.1 s, before the scans were switched off here). It passes the ids as
-- ARRAY(SELECT unnest(...)), whose size the planner cannot see, so that it reads by
-- primary key even before the table's first ANALYZE.
CREATE OR REPLACE FUNCTION @schema@.pgjobd_claim_limited(
    queues text[], free int[], types text[], total int, owner text, lease_ms bigint,
    sync text, max_payload bigint, startable int DEFAULT NULL, own_running int DEFAULT NULL)
  RETURNS TABLE (job_id bigint, job_queue text, job_type text, body text,
                 job_attempts int, job_max_attempts int, job_priority int,
                 waited float8, body_bytes bigint,
                 held_limit text, held_reason text, retry_in float8)
  LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
  -- Generic plans, made for a large table (above: Plans).
  SET plan_cache_mode = force_generic_plan SET enable_seqscan = off
  SET enable_bitmapscan = off SET jit = off AS $body$
    DECLARE
      left_in_queue int[] := free;
      taken int := 0;
      claimed bigint[] := '{}';
      claimed_tids tid[] := '{}';  -- where each claimed row was locked (the UPDATE's TID scan)
      -- Partitions left out of later windows: without room (blocked), or past their share
      -- while capping (capped; they take what is left once every partition had its turn).
      blocked text[] := '{}';
      capping boolean := true;
      capped text[] := '{}';
      share int := greatest(1, ceil(total / 4.0)::int);
      -- The partitions met in this claim (id: limit || chr(31) || part): starts still
      -- allowed (room), taken, the bucket's tokens at refill (NULL: no rate) and its rate,
      -- keyed, and why it had no room to begin with (with the wait to report).
      p_id text[] := '{}';
      p_room int[] := '{}';
      p_used int[] := '{}';
      p_tokens float8[] := '{}';
      p_read_at float8[] := '{}';  -- when each bucket was read (epoch seconds)
      read_at timestamptz;
      p_rate float8[] := '{}';
      p_keyed boolean[] := '{}';
      p_reason text[] := '{}';
      p_wait float8[] := '{}';
      rated boolean := false;  -- a rate partition was met: its bucket is written at the end
      any_keyed boolean;  -- a keyed limit exists: partitions read the payload
      any_rate boolean;   -- a rate limit exists: buckets are read
      -- No keyed limit matches a served queue and type: a job's partitions follow from its
      -- type and queue (below: Unkeyed limits only), and one window says all.
      unkeyed boolean;
      one_set boolean;  -- (unkeyed) one queue, and every candidate has the same partitions
      passed bigint[] := '{}';  -- (unkeyed) chosen, but locked by another claimer
      -- Partition locks held: each takes an entry in the server's shared lock table
      -- (max_locks_per_transaction × connections in all), so a claim takes at most 128;
      -- partitions beyond wait for the next claim, as if another claimer held them.
      locks int := 0;
      -- The window: candidates in claim order with their queue's index, and the
      -- (candidate, partition) pairs.
      w_id bigint[];
      w_qi int[];
      w_big bigint[];  -- candidates whose large payload's partition is not kept yet
      e_id bigint[];
      e_pid text[];
      fresh text[];
      locked_parts text[];
      bucket_parts text[];
      chosen bigint[];
      locked_jobs bigint[];
      locked_tids tid[];
      plenty boolean;
      -- What held jobs back, for the return rows.
      h_limit text[] := '{}';
      h_reason text[] := '{}';
      h_wait float8[] := '{}';
      -- Held partitions remembered by earlier claims (pgjobd_limit_held): their kept rows
      -- (skip, with each one's partition) are left out of the first window unread, and
      -- the partitions learnt with that window's; those found with room (freed) are
      -- forgotten, and their rows read in one more window.
      remembered text[] := '{}';
      skip bigint[] := '{}';
      skip_pid text[] := '{}';
      new_blocked text[] := '{}';  -- partitions whose kept rows are to join skip
      held_new text[] := '{}';     -- partitions first found held, remembered at the end
      freed text[] := '{}';
      round int := 0;
      window_size int := greatest(total, 1) + 16;
      scan_budget int := window_size + 2000;
      -- One limit (below): the limit, its room, and why it holds jobs back.
      o_one boolean;
      o_name text;
      o_limit @schema@.pgjobd_limits;
      o_types text[];
      o_queues text[];
      o_conc int;
      o_rate float8;
      o_burst int;
      o_room int;
      o_tokens float8;
      o_read float8;  -- when the bucket was read (epoch seconds)
      o_held float8;  -- the bucket's held (above: Prefetch under a rate limit), and anew
      o_held_now float8;
      o_reason text;
      o_wait float8;
      o_running int;
      -- (one keyed limit, below) its key, and the choice turned down: the general path
      -- claims instead, holding the limit's lock.
      o_key text;
      o_general boolean := false;
      -- Keyed limits whose lock this claim holds exclusively: any of their partitions is
      -- counted without its own lock (above: A keyed limit's lock).
      limit_locked text[] := '{}';
      -- More jobs claimed than start at once (above: Prefetch under a rate limit).
      marking boolean := false;
    BEGIN
      IF coalesce(sync, '') <> '' THEN
        PERFORM set_config('synchronous_commit', sync, true);
      END IF;
      SELECT m.any_keyed, m.any_rate, m.one_limit IS NOT NULL, m.one_limit
        INTO any_keyed, any_rate, o_one, o_name
      FROM @schema@.pgjobd_limits_met(queues, types) m;

      -- One limit: exactly one limit matches the served queues and types, unkeyed (a keyed
      -- concurrency limit: above, One keyed limit), and it matches every one of them. Then
      -- every due job of the claim is in its one partition: the claim is the plain claim's
      -- (the first due jobs of each served queue and type, locked as read, within each
      -- queue's free slots) cut at the partition's room, learnt as in the general path
      -- below (the same lock, taken before the count; the same bucket, read and written the
      -- same way), so the limit holds as exactly. What it spares: the windows, the
      -- partitions' arrays, the choice and its separate lock statement, about a dozen
      -- statements' start-up per claim (bench/README.md, "Limited jobs against unlimited
      -- ones"). A serving of several types in one queue locks up to the cut in each type
      -- and keeps the first in claim order (the others are let go at commit).
      -- Its concurrency (unkeyed) counts the claimer's own jobs by what it says it holds
      -- (own_running: claimed, their handlers not returned), and the rows running under
      -- other owners. A job whose handler returned no longer runs: its row stays running
      -- until its completion commits, some milliseconds later, and counted there it made
      -- the daemon's own finished jobs hold its claims back (a limit of 1,000 bound at
      -- 0.6 of the unlimited rate: bench/README.md). Every other claimer still counts
      -- that row, and a daemon's own count can only be high (a job counts until it
      -- leaves its worker, and the claim is the daemon's only one), so no more handlers
      -- than the limit run at once. Rows of the claimer nobody runs (a claim whose answer
      -- was lost) are not counted by it: they run nothing. A keyed limit's count takes
      -- every running row: what a daemon holds says nothing of its partitions.
      IF o_one THEN
        SELECT * INTO o_limit FROM @schema@.pgjobd_limits l WHERE l.name = o_name;
        o_types := o_limit.types;
        o_queues := o_limit.queues;
        o_conc := o_limit.concurrency;
        o_rate := o_limit.rate_per_second;
        o_burst := o_limit.burst;
        o_key := o_limit.key;
        o_room := total;
        IF o_conc IS NOT NULL THEN
          -- Unkeyed: its one partition's lock. Keyed: the limit's, exclusively (below: A
          -- keyed limit's lock). Then the count (pgjobd_claim_room.sql).
          o_room := @schema@.pgjobd_limit_room(o_limit, owner, own_running);
          IF o_room IS NULL THEN
            o_room := 0;
            o_reason := 'concurrency';
            o_wait := 0.01;
          ELSIF o_key IS NULL THEN
            o_room := greatest(o_room, 0);
            IF o_room = 0 THEN
              o_reason := 'concurrency';
            END IF;
          ELSE
            -- The limit's running jobs (R, below: One keyed limit); partitions have the room.
            o_running := o_conc - o_room;
            o_room := total;
            limit_locked := ARRAY[o_name];
          END IF;
        END IF;
        IF o_rate IS NOT NULL AND o_room > 0 THEN
          SELECT b.tokens, extract(epoch FROM b.refilled_at)::float8, b.held
            INTO o_tokens, o_read, o_held
          FROM @schema@.pgjobd_limit_buckets b
          WHERE b.limit_name = o_name AND b.part = ''
          FOR UPDATE SKIP LOCKED;
          IF NOT FOUND THEN  -- missing (created full), or another claimer holds it
            INSERT INTO @schema@.pgjobd_limit_buckets (limit_name, part, tokens, refilled_at)
            VALUES (o_name, '', o_burst, now())
            ON CONFLICT DO NOTHING;
            SELECT b.tokens, extract(epoch FROM b.refilled_at)::float8, b.held
              INTO o_tokens, o_read, o_held
            FROM @schema@.pgjobd_limit_buckets b
            WHERE b.limit_name = o_name AND b.part = ''
            FOR UPDATE SKIP LOCKED;
          END IF;
          IF o_tokens IS NULL THEN
            o_room := 0;
            o_reason := 'rate';
            o_wait := least(1 / o_rate, 0.1);
          ELSE
            -- The tokens as of one moment (kept: the write refills from it).
            read_at := clock_timestamp();
            o_tokens := greatest(least(o_burst - o_held, o_tokens + greatest(
                          extract(epoch FROM read_at)::float8 - o_read, 0) * o_rate), 0);
            o_read := extract(epoch FROM read_at)::float8;
            o_room := least(o_room, floor(o_tokens)::int);
            IF o_room = 0 THEN
              o_reason := 'rate';
              o_wait := (1 - o_tokens) / o_rate;
            END IF;
          END IF;
        END IF;
        -- One keyed limit with remembered held partitions: the general path, which leaves
        -- their kept rows out unread (the choice here would read and lock them first).
        IF o_key IS NOT NULL AND o_room > 0 THEN
          o_general := EXISTS (SELECT 1 FROM @schema@.pgjobd_limit_held h
                               WHERE h.limit_name = o_name);
        END IF;
        -- One queue and one type (a daemon serving one handler): the index gives the rows in
        -- claim order, and the LIMIT keeps them within the queue's free slots, the claim and
        -- the room; ranking them per queue and sorting them again cost as much as reading and
        -- locking them (1.4 against 2.3-2.8 ms for a claim of 1,000; bench/README.md).
        -- Otherwise each queue's first due jobs of each type, ranked per queue and cut in
        -- claim order. Neither sorts the arrays: the UPDATE reads its rows by ctid, in ctid
        -- order, whatever their order here.
        IF o_room > 0 AND NOT o_general THEN
          IF cardinality(queues) = 1 AND types <@ types[1:1] THEN
            SELECT coalesce(array_agg(c.id), '{}'), coalesce(array_agg(c.tid), '{}')
              INTO claimed, claimed_tids
            FROM (
              SELECT j.id, j.ctid AS tid
              FROM @schema@.jobs j
              WHERE j.queue = queues[1] AND j.type = types[1]
                AND j.status IN ('pending', 'failed') AND j.run_at <= now()
                AND NOT EXISTS (SELECT 1 FROM @schema@.pgjobd_queues pq
                                WHERE pq.queue = queues[1] AND pq.paused)
              ORDER BY j.priority DESC, j.run_at, j.id
              LIMIT greatest(least(free[1], total, o_room), 0)
              FOR UPDATE OF j SKIP LOCKED) c;
          ELSE
            WITH arms AS (
              SELECT q.queue, q.free, t.type
              FROM unnest(queues, free) AS q(queue, free)
              CROSS JOIN (SELECT DISTINCT u.type FROM unnest(types) AS u(type)) t
              WHERE q.free > 0
                AND NOT EXISTS (SELECT 1 FROM @schema@.pgjobd_queues pq
                                WHERE pq.queue = q.queue AND pq.paused)
            ), c AS (
              SELECT c.id, c.tid, c.priority, c.run_at, a.free,
                     row_number() OVER (PARTITION BY a.queue
                                        ORDER BY c.priority DESC, c.run_at, c.id) AS k
              FROM arms a CROSS JOIN LATERAL (
                SELECT j.id, j.ctid AS tid, j.priority, j.run_at
                FROM @schema@.jobs j
                WHERE j.queue = a.queue AND j.type = a.type
                  AND j.status IN ('pending', 'failed') AND j.run_at <= now()
                ORDER BY j.priority DESC, j.run_at, j.id
                LIMIT least(a.free, total, o_room)
                FOR UPDATE OF j SKIP LOCKED) c
            ), k AS (
              SELECT c.id, c.tid, c.priority, c.run_at FROM c WHERE c.k <= c.free
              ORDER BY c.priority DESC, c.run_at, c.id
              LIMIT least(total, o_room)
            )
            SELECT coalesce(array_agg(k.id), '{}'), coalesce(array_agg(k.tid), '{}')
              INTO claimed, claimed_tids
            FROM k;
          END IF;
          taken := cardinality(claimed);
          -- One keyed limit: the choice stands when no partition has more than its share of
          -- it, and each has room for its part (its running jobs counted only when the
          -- limit's running jobs and the choice together pass the limit: below, One keyed
          -- limit). Otherwise the general path claims, from its first window.
          IF o_key IS NOT NULL AND taken > 0 THEN
            -- The choice's rows are read again by the ctid they were locked at (as the UPDATE
            -- below reads them), and each job's partition computed in one place for them and
            -- the running jobs. (One aggregate over both rather than a join of two: planned
            -- for one row each, the join was a nested loop, 500,000 comparisons for a choice
            -- of 1,000.)
            o_general := EXISTS (
              SELECT 1 FROM (
                SELECT CASE WHEN pg_column_size(u.payload) <= 8192
                              THEN @schema@.pgjobd_limit_part(u.payload, o_key)
                            ELSE coalesce((SELECT p.part FROM @schema@.pgjobd_limit_parts p
                                           WHERE p.job_id = u.id AND p.key = o_key),
                                          @schema@.pgjobd_limit_part(u.payload, o_key)) END AS part,
                       sum(u.n) AS n, sum(u.running) AS running
                FROM (
                  SELECT j.id, j.payload, 1 AS n, 0 AS running
                  FROM @schema@.jobs j WHERE j.ctid = ANY (claimed_tids)
                  UNION ALL
                  SELECT j.id, j.payload, 0, 1
                  FROM @schema@.jobs j
                  WHERE o_running + taken > o_conc AND j.status = 'running'
                    AND (o_types IS NULL OR j.type = ANY (o_types))
                    AND (o_queues IS NULL OR j.queue = ANY (o_queues))
                ) u
                GROUP BY 1
              ) g
              WHERE g.n > share OR (g.n > 0 AND g.n + g.running > o_conc));
            IF o_general THEN
              claimed := '{}';
              claimed_tids := '{}';
              taken := 0;
            END IF;
          END IF;
          -- The partition's room ran out before the claim's: say why, as below.
          IF taken >= o_room AND o_room < total THEN
            IF o_tokens IS NOT NULL AND o_tokens - taken < 1 THEN
              o_reason := 'rate';
              o_wait := (1 - (o_tokens - taken)) / o_rate;
            ELSE
              o_reason := 'concurrency';
            END IF;
          END IF;
        END IF;
        IF o_tokens IS NOT NULL AND (taken > 0 OR o_held > 0) THEN
          -- As the general path writes a bucket (below: Tokens taken), with held (above:
          -- Prefetch under a rate limit) counted anew past half the burst.
          marking := taken > coalesce(startable, taken);
          o_held_now := o_held + CASE WHEN marking THEN taken ELSE 0 END;
          IF o_held_now > o_burst / 2.0 THEN
            SELECT count(*) + CASE WHEN marking THEN taken ELSE 0 END INTO o_held_now
            FROM @schema@.jobs j
            WHERE j.status = 'running' AND j.prefetched
              AND (o_types IS NULL OR j.type = ANY (o_types))
              AND (o_queues IS NULL OR j.queue = ANY (o_queues));
          END IF;
          read_at := clock_timestamp();
          UPDATE @schema@.pgjobd_limit_buckets b
          SET tokens = greatest(least(o_burst - o_held_now, o_tokens - taken + greatest(
                         extract(epoch FROM read_at)::float8 - o_read, 0) * o_rate), 0),
              held = o_held_now,
              refilled_at = read_at
          WHERE b.limit_name = o_name AND b.part = '';
        END IF;
      END IF;
      -- The general path: several limits, or one keyed limit whose choice was turned down.
      IF NOT o_one OR o_general THEN
        -- Jobs held under a keyed rate limit would not be counted in its partitions' held
        -- (above: Prefetch under a rate limit): with one defined, no more jobs than start at
        -- once (the daemon does not prefetch then; this covers one that has not yet read it).
        IF any_keyed AND any_rate THEN
          total := least(total, coalesce(startable, total));
        END IF;
        -- A remembered partition counts only while a due job of this claim's queues and types
        -- is kept in it (one row read to know), so that an entry whose jobs ended costs
        -- nothing and reports nothing.
        unkeyed := NOT EXISTS (
          SELECT 1 FROM @schema@.pgjobd_limits l
          WHERE l.key IS NOT NULL AND (l.types IS NULL OR l.types && pgjobd_claim_limited.types)
            AND (l.queues IS NULL OR l.queues && pgjobd_claim_limited.queues));
        IF any_keyed AND NOT unkeyed THEN
          remembered := ARRAY(
            SELECT h.limit_name || chr(31) || h.part
            FROM @schema@.pgjobd_limit_held h
            JOIN @schema@.pgjobd_limits l ON l.name = h.limit_name AND l.key IS NOT NULL
            -- A subquery per entry, stopping at its first due job (by the partition's index,
            -- then the job's primary key), rather than a join over every kept row.
            WHERE (SELECT true FROM @schema@.pgjobd_limit_parts c
                   JOIN @schema@.jobs j ON j.id = c.job_id
                   WHERE c.key = l.key AND c.part = h.part
                     AND j.status IN ('pending', 'failed') AND j.run_at <= now()
                     AND j.queue = ANY (pgjobd_claim_limited.queues)
                     AND j.type = ANY (pgjobd_claim_limited.types)
                     AND (l.types IS NULL OR j.type = ANY (l.types))
                     AND (l.queues IS NULL OR j.queue = ANY (l.queues))
                   LIMIT 1)
            ORDER BY 1
            LIMIT 32);
        END IF;
        new_blocked := remembered;
        LOOP
          round := round + 1;
          -- The kept rows (large payloads, found by the index on the partition) of partitions
          -- without room are skipped in the next windows without being read. Rows of small
          -- payloads are read past as before: their partition costs little to read.
          IF cardinality(new_blocked) > 0 THEN
            WITH k AS (
              SELECT u.pid, c.job_id
              FROM unnest(new_blocked) AS u(pid)
              JOIN @schema@.pgjobd_limits l
                ON l.name = split_part(u.pid, chr(31), 1) AND l.key IS NOT NULL
              JOIN @schema@.pgjobd_limit_parts c
                ON c.key = l.key AND c.part = substr(u.pid, length(l.name) + 2)
               AND c.queue = ANY (pgjobd_claim_limited.queues)
               AND c.type = ANY (pgjobd_claim_limited.types)
               AND (l.types IS NULL OR c.type = ANY (l.types))
               AND (l.queues IS NULL OR c.queue = ANY (l.queues))
              LIMIT 10000  -- beyond, rows are read past as before
            )
            SELECT skip || ARRAY(SELECT k.job_id FROM k), skip_pid || ARRAY(SELECT k.pid FROM k),
                   held_new || ARRAY(SELECT DISTINCT k.pid FROM k
                                     WHERE NOT (k.pid = ANY (remembered)))
              INTO skip, skip_pid, held_new;
          END IF;
          IF unkeyed THEN
            -- Unkeyed limits only: the candidates are the first due jobs of each served queue
            -- and type (what the queue's free slots and the claim could take), read through
            -- the index by type like the plain claim's, each pair's partitions computed once.
            -- Every job of a pair has the same partitions, so jobs a pair's partitions turn
            -- down have no due job behind them that another window could take: this one is
            -- the only one. Partitions take turns as in a window below.
            WITH a AS MATERIALIZED (  -- each pair's partitions computed once, not per job
              SELECT q.queue, q.qi, t.type, least(q.free, total - taken) AS want,
                     ARRAY(SELECT l.name || chr(31) FROM @schema@.pgjobd_limits l
                           WHERE l.key IS NULL
                             AND (l.types IS NULL OR t.type = ANY (l.types))
                             AND (l.queues IS NULL OR q.queue = ANY (l.queues))
                           ORDER BY l.name) AS parts
              FROM unnest(queues, left_in_queue) WITH ORDINALITY AS q(queue, free, qi)
              CROSS JOIN (SELECT DISTINCT u.type FROM unnest(types) AS u(type)) t
              WHERE q.free > 0
                AND NOT EXISTS (SELECT 1 FROM @schema@.pgjobd_queues pq
                                WHERE pq.queue = q.queue AND pq.paused)
            ), w AS MATERIALIZED (
              SELECT x.id, x.qi, x.parts,
                     row_number() OVER (ORDER BY x.priority DESC, x.turn, x.run_at, x.id) AS ord
              FROM (
                SELECT j.id, a.qi, a.parts, j.priority, j.run_at,
                       row_number() OVER (PARTITION BY a.parts
                                          ORDER BY j.priority DESC, j.run_at, j.id) AS turn
                FROM a CROSS JOIN LATERAL (
                  SELECT j.id, j.priority, j.run_at FROM @schema@.jobs j
                  WHERE j.queue = a.queue AND j.type = a.type
                    AND j.status IN ('pending', 'failed') AND j.run_at <= now()
                    AND j.id NOT IN (SELECT unnest(claimed))
                    AND j.id NOT IN (SELECT unnest(passed))
                  ORDER BY j.priority DESC, j.run_at, j.id
                  LIMIT a.want) j
              ) x
            )
            SELECT ARRAY(SELECT w.id FROM w ORDER BY w.ord),
                   ARRAY(SELECT w.qi FROM w ORDER BY w.ord),
                   ARRAY(SELECT w.id FROM w CROSS JOIN unnest(w.parts) AS u(pid) ORDER BY w.ord, u.pid),
                   ARRAY(SELECT u.pid FROM w CROSS JOIN unnest(w.parts) AS u(pid) ORDER BY w.ord, u.pid),
                   '{}',
                   cardinality(queues) = 1 AND (SELECT count(DISTINCT w.parts) FROM w) <= 1
              INTO w_id, w_qi, e_id, e_pid, w_big, one_set;
          ELSE
            WITH w AS MATERIALIZED (
              SELECT x.id, x.qi, x.parts, x.big,
                     row_number() OVER (ORDER BY x.priority DESC, x.turn, x.run_at, x.id) AS ord
              FROM (
                SELECT j.id, j.qi, j.priority, j.run_at, j.parts, j.big,
                       row_number() OVER (PARTITION BY j.parts
                                          ORDER BY j.priority DESC, j.run_at, j.id) AS turn
                FROM unnest(queues, left_in_queue) WITH ORDINALITY AS q(queue, free, qi)
                CROSS JOIN LATERAL (
                  -- At most scan_budget due rows per queue and window, in claim order: the
                  -- partitions left out are read past only that far, so a claim's cost stays
                  -- bounded whatever backlog a saturated partition has.
                  SELECT b.id, q.qi, b.priority, b.run_at, b.parts, b.big FROM (
                    SELECT j.id, j.priority, j.run_at, pu.parts || pk.parts AS parts,
                           any_keyed AND pg_column_size(j.payload) > 8192
                             AND NOT EXISTS (SELECT 1 FROM @schema@.pgjobd_limit_parts c
                                             WHERE c.job_id = j.id) AS big
                    FROM @schema@.jobs j
                    -- The unkeyed limits' partitions depend on the type and queue only, so
                    -- they are computed once per pair (memoized), not once per row; only the
                    -- keyed ones read the payload, and only when a keyed limit exists. A large
                    -- payload (pg_column_size reads its size without detoasting it) is read
                    -- once: its partition is kept in pgjobd_limit_parts (below: Large payloads).
                    CROSS JOIN LATERAL (
                      SELECT ARRAY(SELECT l.name || chr(31) FROM @schema@.pgjobd_limits l
                                   WHERE l.key IS NULL
                                     AND (l.types IS NULL OR j.type = ANY (l.types))
                                     AND (l.queues IS NULL OR j.queue = ANY (l.queues))
                                   ORDER BY l.name) AS parts
                      OFFSET 0) pu  -- computed once per row, not once per use
                    CROSS JOIN LATERAL (
                      SELECT ARRAY(SELECT l.name || chr(31) || CASE
                                     WHEN pg_column_size(j.payload) <= 8192
                                       THEN @schema@.pgjobd_limit_part(j.payload, l.key)
                                     ELSE coalesce(
                                       (SELECT c.part FROM @schema@.pgjobd_limit_parts c
                                        WHERE c.job_id = j.id AND c.key = l.key),
                                       @schema@.pgjobd_limit_part(j.payload, l.key)) END
                                   FROM @schema@.pgjobd_limits l
                                   WHERE any_keyed AND l.key IS NOT NULL
                                     AND (l.types IS NULL OR j.type = ANY (l.types))
                                     AND (l.queues IS NULL OR j.queue = ANY (l.queues))
                                   ORDER BY l.name) AS parts
                      OFFSET 0) pk
                    WHERE j.queue = q.queue AND j.status IN ('pending', 'failed')
                      AND j.run_at <= now() AND j.type = ANY (types)
                      -- Taken in an earlier window: this claim holds its lock, and its row is
                      -- written only at the end (a hashed set: a claim of 1,000 read past them
                      -- with a million comparisons in its second window).
                      AND j.id NOT IN (SELECT unnest(claimed))
                      -- Kept rows of partitions found without room: not read (a hashed set).
                      AND j.id NOT IN (SELECT unnest(skip))
                    ORDER BY j.priority DESC, j.run_at, j.id
                    LIMIT scan_budget
                  ) b
                  WHERE NOT (b.parts && blocked) AND NOT (capping AND b.parts && capped)
                  LIMIT window_size
                ) j
                WHERE q.free > 0
                  AND NOT EXISTS (SELECT 1 FROM @schema@.pgjobd_queues pq
                                  WHERE pq.queue = q.queue AND pq.paused)
              ) x
            )
            SELECT ARRAY(SELECT w.id FROM w ORDER BY w.ord),
                   ARRAY(SELECT w.qi FROM w ORDER BY w.ord),
                   ARRAY(SELECT w.id FROM w CROSS JOIN unnest(w.parts) AS u(pid) ORDER BY w.ord, u.pid),
                   ARRAY(SELECT u.pid FROM w CROSS JOIN unnest(w.parts) AS u(pid) ORDER BY w.ord, u.pid),
                   ARRAY(SELECT w.id FROM w WHERE w.big)
              INTO w_id, w_qi, e_id, e_pid, w_big;
          END IF;
          -- Large payloads: when the window met one whose partition is not kept, the
          -- partitions of every such job this claim may read past (the first scan_budget
          -- due jobs per queue) are kept, so that neither this claim's later windows nor
          -- later claims read those payloads again (each is read about twice in its life).
          -- A job's payload is not expected to change while it waits: one changed under a
          -- keyed limit after a claim read it keeps its first partition.
          IF cardinality(w_big) > 0 THEN
            EXECUTE $q$
              INSERT INTO @schema@.pgjobd_limit_parts (job_id, key, part, type, queue)
              SELECT j.id, l.key, @schema@.pgjobd_limit_part(j.payload, l.key), j.type, j.queue
              FROM unnest($1::text[]) AS q(queue)
              CROSS JOIN LATERAL (
                SELECT j.id, j.type, j.queue, j.payload FROM @schema@.jobs j
                WHERE j.queue = q.queue AND j.status IN ('pending', 'failed')
                  AND j.run_at <= now() AND j.type = ANY ($2::text[])
                ORDER BY j.priority DESC, j.run_at, j.id
                LIMIT $3) j
              JOIN @schema@.pgjobd_limits l
                ON l.key IS NOT NULL AND (l.types IS NULL OR j.type = ANY (l.types))
               AND (l.queues IS NULL OR j.queue = ANY (l.queues))
              WHERE pg_column_size(j.payload) > 8192
                AND NOT EXISTS (SELECT 1 FROM @schema@.pgjobd_limit_parts c
                                WHERE c.job_id = j.id AND c.key = l.key)
              ON CONFLICT DO NOTHING$q$
            USING queues, types, scan_budget;
          END IF;
          IF cardinality(w_id) = 0 AND NOT (round = 1 AND cardinality(remembered) > 0) THEN
            -- Nothing left outside the capped partitions: they take the rest.
            EXIT WHEN NOT capping OR cardinality(capped) = 0 OR round >= 6;
            capping := false;
            CONTINUE;
          END IF;

          -- Partitions first met in this window: learn their room. The remembered ones are
          -- learnt with the first window's, each as the partition of a candidate that is no
          -- job (id 0), so that those without room are left out and reported like any other.
          IF round = 1 AND cardinality(remembered) > 0 THEN
            e_id := e_id || array_fill(0::bigint, ARRAY[cardinality(remembered)]);
            e_pid := e_pid || remembered;
          END IF;
          fresh := ARRAY(SELECT u.pid FROM unnest(e_pid) WITH ORDINALITY AS u(pid, o)
                         WHERE NOT (u.pid = ANY (p_id)) GROUP BY u.pid ORDER BY min(u.o));
          IF cardinality(fresh) > 0 THEN
            -- A keyed limit's lock (above): exclusively, when free, if the fresh partitions are
            -- more than this claim may still lock one by one...
            IF any_keyed AND cardinality(fresh) > 128 - locks THEN
              limit_locked := limit_locked || ARRAY(
                SELECT k.name FROM (
                  SELECT DISTINCT l.name FROM unnest(fresh) AS u(pid)
                  JOIN @schema@.pgjobd_limits l ON l.name = split_part(u.pid, chr(31), 1)
                  WHERE l.key IS NOT NULL AND l.concurrency IS NOT NULL
                    AND NOT (l.name = ANY (limit_locked))
                  OFFSET 0) k  -- (the locks asked for once each)
                WHERE pg_try_advisory_xact_lock(
                        hashtextextended(@schema_name@ || chr(31) || k.name || chr(30), 0)));
            END IF;
            -- ...then each partition's lock, when free (a claimer holding it is counting or
            -- claiming there right now), a keyed limit's only under the limit's lock shared,
            -- and none for a limit whose lock this claim holds exclusively...
            locked_parts := ARRAY(
              SELECT c.pid FROM (
                SELECT u.pid, l.name, l.key IS NOT NULL AS keyed
                FROM unnest(fresh) WITH ORDINALITY AS u(pid, o)
                JOIN @schema@.pgjobd_limits l ON l.name = split_part(u.pid, chr(31), 1)
                WHERE l.concurrency IS NOT NULL AND NOT (l.name = ANY (limit_locked))
                ORDER BY u.o  -- the first in claim order first
                LIMIT 128 - locks) c  -- filtered before the locks are asked for
              WHERE CASE WHEN c.keyed AND NOT pg_try_advisory_xact_lock_shared(hashtextextended(
                                @schema_name@ || chr(31) || c.name || chr(30), 0)) THEN false
                         ELSE pg_try_advisory_xact_lock(
                                hashtextextended(@schema_name@ || chr(31) || c.pid, 0)) END);
            locks := locks + cardinality(locked_parts);
            IF cardinality(limit_locked) > 0 THEN
              locked_parts := locked_parts || ARRAY(
                SELECT u.pid FROM unnest(fresh) AS u(pid)
                WHERE split_part(u.pid, chr(31), 1) = ANY (limit_locked));
            END IF;
            -- ...then, in the next statements (snapshots taken after the lock), the
            -- buckets of the rate-limited ones: created when missing (full), then locked.
            IF any_rate THEN
              INSERT INTO @schema@.pgjobd_limit_buckets (limit_name, part, tokens, refilled_at)
              SELECT l.name, substr(u.pid, length(l.name) + 2), l.burst, now()
              FROM unnest(fresh) AS u(pid)
              JOIN @schema@.pgjobd_limits l ON l.name = split_part(u.pid, chr(31), 1)
              WHERE l.rate_per_second IS NOT NULL
                AND NOT EXISTS (SELECT 1 FROM @schema@.pgjobd_limit_buckets b
                                WHERE b.limit_name = l.name
                                  AND b.part = substr(u.pid, length(l.name) + 2))
              ON CONFLICT DO NOTHING;
              bucket_parts := ARRAY(
                SELECT b.limit_name || chr(31) || b.part FROM @schema@.pgjobd_limit_buckets b
                WHERE (b.limit_name, b.part) IN (
                  SELECT split_part(u.pid, chr(31), 1),
                         substr(u.pid, length(split_part(u.pid, chr(31), 1)) + 2)
                  FROM unnest(fresh) AS u(pid))
                FOR UPDATE OF b SKIP LOCKED);
            END IF;
            -- The room of each: the limit less its running jobs (counted among the running
            -- rows, once for all fresh partitions), and no more than its whole tokens, read
            -- as of one moment (kept: the write refills from it).
            read_at := clock_timestamp();
            WITH counted AS (
              SELECT r.pid, count(*)::int AS running FROM (
                SELECT l.name || chr(31) || CASE
                         WHEN pg_column_size(j.payload) <= 8192
                           THEN @schema@.pgjobd_limit_part(j.payload, l.key)
                         ELSE coalesce((SELECT c.part FROM @schema@.pgjobd_limit_parts c
                                        WHERE c.job_id = j.id AND c.key = l.key),
                                       @schema@.pgjobd_limit_part(j.payload, l.key)) END AS pid
                FROM @schema@.jobs j
                JOIN @schema@.pgjobd_limits l
                  ON (l.types IS NULL OR j.type = ANY (l.types))
                 AND (l.queues IS NULL OR j.queue = ANY (l.queues))
                WHERE j.status = 'running' AND l.concurrency IS NOT NULL
                  AND l.name = ANY (ARRAY(SELECT split_part(lp, chr(31), 1)
                                          FROM unnest(locked_parts) AS lp))
              ) r
              WHERE r.pid = ANY (locked_parts)
              GROUP BY r.pid
            ), learnt AS (
              SELECT u.pid, u.o, l.rate_per_second AS rate, l.key IS NOT NULL AS keyed,
                     CASE WHEN l.concurrency IS NULL THEN total
                          WHEN u.pid = ANY (locked_parts)
                            THEN greatest(l.concurrency - coalesce(c.running, 0), 0)
                          ELSE 0 END AS conc_room,
                     l.concurrency IS NOT NULL AND NOT (u.pid = ANY (locked_parts)) AS busy,
                     CASE WHEN l.rate_per_second IS NOT NULL AND u.pid = ANY (bucket_parts) THEN
                       (SELECT greatest(least(l.burst - b.held, b.tokens + greatest(
                                 extract(epoch FROM read_at - b.refilled_at)::float8, 0)
                                 * l.rate_per_second), 0)
                        FROM @schema@.pgjobd_limit_buckets b
                        WHERE b.limit_name = l.name AND b.part = substr(u.pid, length(l.name) + 2))
                     END AS tokens
              FROM unnest(fresh) WITH ORDINALITY AS u(pid, o)
              JOIN @schema@.pgjobd_limits l ON l.name = split_part(u.pid, chr(31), 1)
              LEFT JOIN counted c ON c.pid = u.pid
            ), roomed AS (
              SELECT g.*,
                     CASE WHEN g.rate IS NULL THEN g.conc_room
                          WHEN g.tokens IS NULL THEN 0  -- another claimer holds the bucket
                          ELSE least(g.conc_room, floor(g.tokens)::int) END AS room
              FROM learnt g
            )
            SELECT rated OR EXISTS (SELECT 1 FROM roomed r WHERE r.rate IS NOT NULL),
                   p_id || ARRAY(SELECT r.pid FROM roomed r ORDER BY r.o),
                   p_room || ARRAY(SELECT r.room FROM roomed r ORDER BY r.o),
                   p_used || ARRAY(SELECT 0 FROM roomed r ORDER BY r.o),
                   p_tokens || ARRAY(SELECT r.tokens FROM roomed r ORDER BY r.o),
                   p_read_at || ARRAY(SELECT extract(epoch FROM read_at)::float8
                                      FROM roomed r ORDER BY r.o),
                   p_rate || ARRAY(SELECT r.rate FROM roomed r ORDER BY r.o),
                   p_keyed || ARRAY(SELECT r.keyed FROM roomed r ORDER BY r.o),
                   p_reason || ARRAY(
                     SELECT CASE WHEN r.room > 0 THEN NULL
                                 WHEN r.busy OR r.conc_room = 0 THEN 'concurrency'
                                 ELSE 'rate' END
                     FROM roomed r ORDER BY r.o),
                   p_wait || ARRAY(
                     SELECT CASE WHEN r.room > 0 THEN NULL
                                 WHEN r.busy THEN 0.01
                                 WHEN r.conc_room = 0 THEN NULL
                                 WHEN r.tokens IS NULL THEN least(1 / r.rate, 0.1)
                                 ELSE (1 - r.tokens) / r.rate END
                     FROM roomed r ORDER BY r.o)
              INTO rated, p_id, p_room, p_used, p_tokens, p_read_at, p_rate, p_keyed, p_reason,
                   p_wait;
          END IF;
          IF round = 1 AND cardinality(remembered) > 0 THEN
            freed := ARRAY(SELECT s.pid FROM unnest(p_id, p_room) AS s(pid, room)
                           WHERE s.room > 0 AND s.pid = ANY (remembered));
            IF cardinality(freed) > 0 THEN
              SELECT ARRAY(SELECT k.id FROM unnest(skip, skip_pid) AS k(id, pid)
                           WHERE NOT (k.pid = ANY (freed))),
                     ARRAY(SELECT k.pid FROM unnest(skip, skip_pid) AS k(id, pid)
                           WHERE NOT (k.pid = ANY (freed)))
                INTO skip, skip_pid;
            END IF;
          END IF;

          -- The window's choice. Plenty of room (the usual case at a high limit): every
          -- partition of the window has room for all its candidates there (and, while
          -- capping, a keyed one stays within its share), so with one queue the first
          -- candidates in claim order are the choice. (Not asked when the next branch decides.)
          plenty := NOT (unkeyed AND one_set) AND NOT EXISTS (
            SELECT 1 FROM (SELECT u.pid, count(*) AS n FROM unnest(e_id, e_pid) AS u(id, pid)
                           WHERE u.id <> 0  -- (a remembered partition's, no job)
                           GROUP BY u.pid) c
            JOIN unnest(p_id, p_room, p_used, p_keyed) AS s(pid, room, used, keyed)
              ON s.pid = c.pid
            WHERE c.n > s.room OR (capping AND s.keyed AND s.used + c.n > share));
          IF unkeyed AND one_set THEN
            -- One queue and one set of partitions: the first candidates in claim order, as many
            -- as the queue, the claim and each partition have room for.
            chosen := w_id[1 : least(left_in_queue[1], total - taken, coalesce(
              (SELECT min(s.room) FROM unnest(p_id, p_room) AS s(pid, room)
               WHERE s.pid = ANY (e_pid)), total))];
          ELSIF plenty AND cardinality(queues) = 1 THEN
            chosen := w_id[1 : least(left_in_queue[1], total - taken)];
          ELSE
            -- Otherwise candidates whose partitions all have room (and, while capping, keyed
            -- ones within their share), ranked within each partition's room, then within
            -- their queue's free slots and the claim's total. A candidate turned down by one
            -- partition still counts in the ranks of its others (rare: a job under two
            -- limits both nearly full), which can only take fewer, never more.
            chosen := ARRAY(
              WITH ps AS (
                SELECT * FROM unnest(p_id, p_room, p_used, p_keyed) AS s(pid, room, used, keyed)
              ), c AS (
                SELECT * FROM unnest(w_id, w_qi) WITH ORDINALITY AS c(id, qi, ord)
              ), e AS (
                SELECT e.id, ps.pid,
                       CASE WHEN capping AND ps.keyed THEN least(ps.room, share - ps.used)
                            ELSE ps.room END AS room
                FROM unnest(e_id, e_pid) AS e(id, pid) JOIN ps ON ps.pid = e.pid
              ), fit AS (
                SELECT c.* FROM c
                WHERE NOT EXISTS (SELECT 1 FROM e WHERE e.id = c.id AND e.room <= 0)
              ), ranked AS (
                SELECT e.id,
                       row_number() OVER (PARTITION BY e.pid ORDER BY f.ord) <= e.room AS fits
                FROM e JOIN fit f ON f.id = e.id
              ), ok AS (
                SELECT f.*, row_number() OVER (PARTITION BY f.qi ORDER BY f.ord) AS k FROM fit f
                WHERE NOT EXISTS (SELECT 1 FROM ranked r WHERE r.id = f.id AND NOT r.fits)
              )
              SELECT ok.id FROM ok WHERE ok.k <= left_in_queue[ok.qi]
              ORDER BY ok.ord LIMIT total - taken);
          END IF;
          -- By primary key, whatever the statistics say: planned at each call (EXECUTE),
          -- as a cached plan made while the table was small walks the claim index through
          -- every due row; and the ids passed as ARRAY(SELECT ...), whose size the planner
          -- cannot see, as on a table not yet analysed it reads the claim index for 1,000.
          -- A remembered partition found with room: its skipped rows come first in claim
          -- order, so this window chooses nothing and the next one reads them too.
          IF round = 1 AND cardinality(freed) > 0 THEN
            chosen := '{}';
          END IF;
          locked_jobs := '{}';
          locked_tids := '{}';
          IF cardinality(chosen) > 0 THEN
            EXECUTE $q$
              SELECT coalesce(array_agg(l.id), '{}'), coalesce(array_agg(l.ctid), '{}') FROM (
                SELECT j.id, j.ctid FROM @schema@.jobs j
                WHERE j.id = ANY (ARRAY(SELECT unnest($1::bigint[])))
                  AND j.status IN ('pending', 'failed') AND j.run_at <= now()
                FOR UPDATE SKIP LOCKED) l$q$
              INTO locked_jobs, locked_tids USING chosen;
          END IF;
          IF cardinality(locked_jobs) > 0 THEN
            taken := taken + cardinality(locked_jobs);
            claimed := claimed || locked_jobs;
            claimed_tids := claimed_tids || locked_tids;
            IF cardinality(queues) = 1 THEN
              left_in_queue[1] := left_in_queue[1] - cardinality(locked_jobs);
            ELSE
              left_in_queue := ARRAY(
                SELECT q.free - (SELECT count(*) FROM unnest(w_id, w_qi) AS c(id, qi)
                                 WHERE c.qi = q.qi AND c.id = ANY (locked_jobs))::int
                FROM unnest(left_in_queue) WITH ORDINALITY AS q(free, qi) ORDER BY q.qi);
            END IF;
            -- What each partition took, unless the claim is full and no bucket needs it.
            IF taken < total OR rated THEN
              WITH took AS (
                SELECT e.pid, count(*)::int AS n FROM unnest(e_id, e_pid) AS e(id, pid)
                WHERE e.id IN (SELECT unnest(locked_jobs)) GROUP BY e.pid
              ), s AS (
                SELECT s.o, s.room - coalesce(t.n, 0) AS room, s.used + coalesce(t.n, 0) AS used
                FROM unnest(p_id, p_room, p_used) WITH ORDINALITY AS s(pid, room, used, o)
                LEFT JOIN took t ON t.pid = s.pid
              )
              SELECT ARRAY(SELECT s.room FROM s ORDER BY s.o),
                     ARRAY(SELECT s.used FROM s ORDER BY s.o)
                INTO p_room, p_used;
            END IF;
          END IF;
          EXIT WHEN taken >= total;

          -- Partitions that held back a candidate of this window: left out of the next,
          -- and reported once each, with why.
          WITH held AS (
            SELECT DISTINCT s.pid, s.o FROM unnest(e_id, e_pid) AS e(id, pid)
            JOIN unnest(p_id, p_room) WITH ORDINALITY AS s(pid, room, o) ON s.pid = e.pid
            WHERE s.room <= 0 AND e.id NOT IN (SELECT unnest(claimed))
              AND NOT (s.pid = ANY (blocked))
          ), why AS (
            SELECT h.pid, split_part(h.pid, chr(31), 1) AS lim,
                   coalesce(p_reason[h.o],
                            CASE WHEN p_tokens[h.o] - p_used[h.o] < 1 THEN 'rate'
                                 ELSE 'concurrency' END) AS reason,
                   CASE WHEN p_reason[h.o] IS NOT NULL THEN p_wait[h.o]
                        WHEN p_tokens[h.o] - p_used[h.o] < 1
                          THEN (1 - (p_tokens[h.o] - p_used[h.o])) / p_rate[h.o]
                   END AS wait
            FROM held h
          )
          SELECT ARRAY(SELECT pid FROM why ORDER BY pid),
                 h_limit || ARRAY(SELECT lim FROM why ORDER BY pid),
                 h_reason || ARRAY(SELECT reason FROM why ORDER BY pid),
                 h_wait || ARRAY(SELECT wait FROM why ORDER BY pid)
            INTO new_blocked, h_limit, h_reason, h_wait;
          blocked := blocked || new_blocked;
          new_blocked := ARRAY(SELECT u.pid FROM unnest(new_blocked) AS u(pid)
                               WHERE NOT (u.pid = ANY (remembered)));
          IF capping AND NOT unkeyed THEN  -- (a share caps keyed partitions only)
            capped := capped || ARRAY(
              SELECT DISTINCT s.pid FROM unnest(e_id, e_pid) AS e(id, pid)
              JOIN unnest(p_id, p_used, p_keyed) AS s(pid, used, keyed) ON s.pid = e.pid
              WHERE s.keyed AND s.used >= share AND e.id NOT IN (SELECT unnest(claimed))
                AND NOT (s.pid = ANY (capped)));
          END IF;

          -- Unkeyed: another window only for chosen jobs another claimer had locked (the
          -- next one reads past them).
          EXIT WHEN round >= 6 OR (unkeyed AND cardinality(locked_jobs) >= cardinality(chosen));
          IF unkeyed THEN
            passed := passed || ARRAY(SELECT u.id FROM unnest(chosen) AS u(id)
                                      WHERE u.id NOT IN (SELECT unnest(locked_jobs)));
            CONTINUE;
          END IF;
          -- Every served type of every queue with free slots is held by an unkeyed limit's
          -- partition without room: a further window could choose nothing, and would read up
          -- to scan_budget rows past to learn it (at a concurrency limit reached, every claim).
          EXIT WHEN NOT EXISTS (
            SELECT 1 FROM unnest(queues, left_in_queue) AS q(queue, free)
            CROSS JOIN unnest(types) AS t(type)
            WHERE q.free > 0 AND NOT EXISTS (
              SELECT 1 FROM @schema@.pgjobd_limits l
              WHERE l.key IS NULL AND (l.name || chr(31)) = ANY (blocked)
                AND (l.types IS NULL OR t.type = ANY (l.types))
                AND (l.queues IS NULL OR q.queue = ANY (l.queues))));
          -- The remembered partitions found with room had their rows skipped in this window.
          CONTINUE WHEN round = 1 AND cardinality(freed) > 0;
          -- Another window if this one was cut short with candidates turned down: the
          -- partitions now left out no longer fill it.
          CONTINUE WHEN cardinality(w_id) >= window_size
                    AND cardinality(w_id) > cardinality(locked_jobs);
          -- Every candidate outside those was seen: the capped partitions take the rest.
          EXIT WHEN NOT capping OR cardinality(capped) = 0;
          capping := false;
        END LOOP;

        -- Tokens taken: what was left after the take at the read, refilled from the read
        -- up to now and only then capped at the burst. The claim has held the bucket's row
        -- lock since the read.
        -- A bucket with held jobs is written also when nothing was taken (above: Prefetch
        -- under a rate limit); held is counted for unkeyed limits (keyed ones never prefetch:
        -- the claim is cut at startable while one exists, below).
        marking := any_rate AND cardinality(claimed) > coalesce(startable, cardinality(claimed));
        IF rated THEN
          WITH n AS (
            SELECT b.limit_name, b.part, u.tokens, u.used, u.read_at, l.burst, l.rate_per_second,
                   CASE WHEN l.key IS NULL AND (marking OR b.held > 0) THEN
                     (SELECT count(*) FROM @schema@.jobs j
                      WHERE j.status = 'running' AND j.prefetched
                        AND (l.types IS NULL OR j.type = ANY (l.types))
                        AND (l.queues IS NULL OR j.queue = ANY (l.queues)))
                     + CASE WHEN marking THEN u.used ELSE 0 END
                   ELSE b.held END AS held
            FROM unnest(p_id, p_tokens, p_used, p_read_at) AS u(pid, tokens, used, read_at)
            JOIN @schema@.pgjobd_limits l ON l.name = split_part(u.pid, chr(31), 1)
            JOIN @schema@.pgjobd_limit_buckets b
              ON b.limit_name = l.name AND b.part = substr(u.pid, length(l.name) + 2)
            WHERE u.tokens IS NOT NULL AND (u.used > 0 OR b.held > 0)
          )
          UPDATE @schema@.pgjobd_limit_buckets b
          SET tokens = greatest(least(n.burst - n.held, n.tokens - n.used + greatest(
                         extract(epoch FROM t.at)::float8 - n.read_at, 0) * n.rate_per_second), 0),
              held = n.held,
              refilled_at = t.at
          FROM n, (SELECT clock_timestamp() AS at) t
          WHERE b.limit_name = n.limit_name AND b.part = n.part;
        END IF;

        -- Held partitions first found by this claim, in one statement in a fixed order (two
        -- claimers writing the same ones wait for each other, never in a cycle).
        IF cardinality(held_new) > 0 THEN
          INSERT INTO @schema@.pgjobd_limit_held (limit_name, part)
          SELECT split_part(u.pid, chr(31), 1), substr(u.pid, length(split_part(u.pid, chr(31), 1)) + 2)
          FROM unnest(held_new) AS u(pid)
          ORDER BY 1, 2
          ON CONFLICT DO NOTHING;
        END IF;
        -- Remembered partitions found with room are forgotten (one another claimer is
        -- writing is left to it). After the inserts: this claim waits for no one after taking
        -- these row locks.
        IF cardinality(freed) > 0 THEN
          DELETE FROM @schema@.pgjobd_limit_held h
          WHERE h.ctid = ANY (ARRAY(
            SELECT g.ctid FROM @schema@.pgjobd_limit_held g
            WHERE g.limit_name || chr(31) || g.part = ANY (freed)
            FOR UPDATE SKIP LOCKED));
        END IF;

        -- Kept partitions of jobs that ended (or were deleted): swept now and then, by the
        -- claim that happens to draw it, so that the table holds about its live large jobs;
        -- then the remembered partitions left without kept rows (or limit), skipping any
        -- another claimer is writing.
        IF random() < 0.01 THEN
          DELETE FROM @schema@.pgjobd_limit_parts c
          WHERE NOT EXISTS (SELECT 1 FROM @schema@.jobs j
                            WHERE j.id = c.job_id AND j.status IN ('pending', 'failed', 'running'));
          DELETE FROM @schema@.pgjobd_limit_held h
          WHERE h.ctid = ANY (ARRAY(
            SELECT g.ctid FROM @schema@.pgjobd_limit_held g
            WHERE NOT EXISTS (SELECT 1 FROM @schema@.pgjobd_limits l
                              JOIN @schema@.pgjobd_limit_parts c
                                ON c.key = l.key AND c.part = g.part
                              WHERE l.name = g.limit_name)
            FOR UPDATE SKIP LOCKED));
        END IF;
      END IF;

      -- By the ctid each row was locked at (a TID scan, as the plain claim's UPDATE: by
      -- primary key each row cost a descent of jobs_pkey; joined, a hash join over two
      -- sequential scans of the table). The version locked was committed before this
      -- statement's snapshot, which so sees it. Each payload is turned into text once.
      IF cardinality(claimed) > 0 THEN
        RETURN QUERY
          WITH claimed_rows AS (
            UPDATE @schema@.jobs j
            SET status = 'running', attempts = least(j.attempts, 999999) + 1, locked_by = owner,
                locked_until = now() + lease_ms * interval '1 millisecond',
                started_at = now(), updated_at = now(), cancel_requested_at = NULL,
                cancel_reason = NULL, prefetched = marking
            WHERE j.ctid = ANY (claimed_tids)
            RETURNING j.id, j.queue, j.type, j.payload::text AS payload_text, j.attempts,
                      j.max_attempts, j.priority::int AS priority,
                      extract(epoch FROM now() - greatest(j.run_at, '1970-01-01 00:00:00+00'))::float8
                        AS queue_wait
          )
          SELECT c.id, c.queue, c.type,
                 CASE WHEN octet_length(c.payload_text) <= max_payload THEN c.payload_text END,
                 c.attempts, c.max_attempts, c.priority, c.queue_wait,
                 octet_length(c.payload_text)::bigint, NULL::text, NULL::text, NULL::float8
          FROM claimed_rows c;
      END IF;
      -- One limit: held back only if a due job is left (the claimed ones run now).
      IF o_reason IS NOT NULL AND EXISTS (
           SELECT 1 FROM unnest(queues, free) AS q(queue, free)
           CROSS JOIN (SELECT DISTINCT u.type FROM unnest(types) AS u(type)) t
           CROSS JOIN LATERAL (
             SELECT 1 FROM @schema@.jobs j
             WHERE j.queue = q.queue AND j.type = t.type
               AND j.status IN ('pending', 'failed') AND j.run_at <= now()
             LIMIT 1) j
           WHERE q.free > 0
             AND NOT EXISTS (SELECT 1 FROM @schema@.pgjobd_queues pq
                             WHERE pq.queue = q.queue AND pq.paused)) THEN
        h_limit := ARRAY[o_name];
        h_reason := ARRAY[o_reason];
        h_wait := ARRAY[o_wait];
      END IF;
      RETURN QUERY
      SELECT NULL::bigint, NULL::text, NULL::text, NULL::text, NULL::int, NULL::int, NULL::int,
             NULL::float8, NULL::bigint, h.limit_name, h.reason, min(h.wait)
      FROM unnest(h_limit, h_reason, h_wait) AS h(limit_name, reason, wait)
      GROUP BY h.limit_name, h.reason;
    END
    $body$;

-- PostgreSQL grants EXECUTE on a new function to PUBLIC: only roles granted it
-- (sql/grants.sql) may call this one.
REVOKE EXECUTE ON FUNCTION
  @schema@.pgjobd_claim_limited(text[], int[], text[], int, text, bigint, text, bigint, int, int)
FROM PUBLIC;
