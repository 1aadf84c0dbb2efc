// The text of pgjobd's prepared statements. Values always travel as $n parameters. Beside
// each statement: what it does, the index or plan it relies on (a planner trap in one line,
// with the measurement that found it) and what it must never do. How each came to be:
// bench/README.md, "How the statements came to be".

#include "db/statements.hpp"

#include <initializer_list>
#include <stdexcept>
#include <string_view>

#include "db/sql_text.hpp"

namespace pgjobd::stmt {
namespace {

// Fragments: SQL used in more than one place. One that reads parameters takes their
// numbers from the statement that binds them.

std::string param(int n) { return "$" + std::to_string(n); }

struct Part {
  std::string_view placeholder;
  std::string sql;
};

// `sql` with each placeholder replaced by its part.
std::string fill(std::string sql, std::initializer_list<Part> parts) {
  for (const Part& part : parts) replace_all(sql, part.placeholder, part.sql);
  return sql;
}

// Queue `queue` (a column) is not paused: an anti-join with the small pgjobd_queues, in the
// claim itself, so a daemon that missed the NOTIFY obeys a pause at its next claim too.
std::string not_paused(const char* queue) {
  return std::string("NOT EXISTS (SELECT 1 FROM {queues} p WHERE p.queue = ") + queue +
         " AND p.paused)";
}

// The fence of a write to a job found by id: row `row` still runs, held by worker
// $`worker` (the statement compares the attempt). `(status = 'running') IS TRUE` keeps the
// planner off the partial lease index. Trap: matched to it, completions walked its dead
// entries instead of the primary key (seconds a batch next to 5M done rows).
std::string still_ours(const char* row, int worker) {
  return std::string(row) + ".locked_by = " + param(worker) + " AND (" + row +
         ".status = 'running') IS TRUE";
}

// The element of array $`values` (of `type`) in the slot of row j's id in id array $`ids`:
// the completion's parallel arrays, read by position, never joined with unnest().
std::string slot(int values, const char* type, int ids) {
  return "(" + param(values) + "::" + type + "[])[array_position(" + param(ids) +
         "::bigint[], j.id)]";
}

// A CTE naming parameter $`n` as `type` and nothing more (never run: no one reads it), for
// a statement variant that binds the same values but has no use for that one: the server
// refuses to prepare a statement with a parameter whose type it cannot tell.
std::string unused_param(int n, const char* type) {
  return "unused_" + std::to_string(n) + " AS (SELECT " + param(n) + "::" + type + ")";
}

// How a done job is written, row j, before the statement's WHERE: kept as done (its lease
// cleared; locked_by stays, naming who ran the attempt; its result `result`, a jsonb
// expression) or, with retention.done = 0, deleted with its result. A deletion notes that
// it deletes done jobs (pgjobd.ended_as, for this transaction), so that the children of a
// parent deleted here see it done, not deleted by hand (sql/functions/pgjobd_dependencies.sql).
std::string done_write(bool delete_done, const std::string& result) {
  return delete_done ? "DELETE FROM {jobs} j\n"
                       "  USING (SELECT set_config('pgjobd.ended_as', 'done', true)) AS ended_as"
                     : "UPDATE {jobs} j\n  SET status = 'done', finished_at = now(), "
                       "updated_at = now(), locked_until = NULL,\n      result = " +
                           result;
}

// The newest 19 entries of row j's `column` (errors, attempt_log), to which the statement
// appends the 20th (README "Job lifecycle"): a job retried for long never grows its row
// without bound. A non-array value (an older row's) reads as empty, never fails the batch.
std::string recent_entries(const char* column) {
  return fill(R"((CASE
    WHEN jsonb_typeof({c}) IS DISTINCT FROM 'array' THEN '[]'::jsonb
    WHEN jsonb_array_length({c}) < 19 THEN {c}
    ELSE (SELECT coalesce(jsonb_agg(e.value ORDER BY e.n), '[]'::jsonb)
          FROM jsonb_array_elements({c}) WITH ORDINALITY AS e(value, n)
          WHERE e.n > jsonb_array_length({c}) - 19) END))",
              {{"{c}", column}});
}

// The attempt of row j that is ending, as an attempt_log entry; followed by its outcome
// and `)`. locked_by, which no constraint bounds, is cut to 200 characters.
constexpr const char* kAttemptEntry = R"(jsonb_build_object(
      'attempt', j.attempts, 'by', left(j.locked_by, 200), 'started_at', j.started_at,
      'ended_at', now(), 'outcome',)";

// The error of a job of row j that ends cancelled: the reason pgjobd_cancel was given.
constexpr const char* kCancelText = "coalesce('cancelled: ' || j.cancel_reason, 'cancelled')";

// The status a completion writes for row j: the outcome sent (text[] $`statuses`, in the
// slot of $`ids`), or cancelled when a cancel was requested. Never for done rows.
std::string outcome_status(int statuses, int ids) {
  return "(CASE WHEN j.cancel_requested_at IS NOT NULL\n      THEN 'cancelled' ELSE " +
         slot(statuses, "text", ids) + " END)";
}

// retry_policy.cpp's retry_delay in ms for row j's failed attempt, from the RetryConfig the
// statement binds: min($`base` * 2^(attempts-1), $`max_delay`) * (1 ± $`jitter`), random()
// drawing the jitter, the exponent clamped as there (a float8 overflows from about 1,025
// attempts). Only the rescue computes it in SQL, per row; tests/rescue_backoff_pgtest.cpp
// checks that the two agree.
std::string retry_delay_ms(int base, int max_delay, int jitter) {
  return "least(" + param(base) + "::float8 * power(2, least(greatest(j.attempts - 1, 0), 62)), " +
         param(max_delay) + "::float8) * (1 + " + param(jitter) + "::float8 * (2 * random() - 1))";
}

// kClaim: each served queue ($1) not paused takes at most its free slots ($2), in claim
// order, skipping rows other daemons hold; LIMIT $4 bounds the total to the pool's free
// slots.
// - By type: each served (queue, type) is read on its own (`arms`, a short scan of
//   jobs_claim_type_idx), so due rows of types this daemon has no handler for are never
//   walked past. Trap: jobs_claim_idx filters the types after the walk, and 200,000 due rows
//   of an unserved type at a higher priority made each claim 6-30x slower (bench/README.md,
//   "Unclaimable rows"). With one type the arm takes the queue's free slots; with more,
//   `shares` first reads each arm's first rows without locks and gives each type its place
//   among the queue's first `free` rows in claim order, so the claim locks about what it
//   takes (each arm taking `free` would lock types × free rows). A row another daemon holds
//   is skipped within its arm, which takes its next row instead.
// - Nothing but the index's columns is read of a row that is not claimed: no payload is
//   detoasted before the UPDATE.
// - $7 'off': the claim does not wait for its WAL flush (set inside, for this transaction
//   only: nothing left on a pooled session; '' keeps the session's). A claim lost in a crash
//   leaves its job pending; a completion's synchronous commit flushes its claim's WAL too.
// - No row may fail the claim (applications write them): attempts stops at 1,000,000 and a
//   non-finite run_at counts from 1970 (older rows may break those constraints).
// - A payload over $8 bytes comes back NULL with its size (the job ends dead unrun). `b`
//   renders the text once per row (OFFSET 0: the planner does not copy the cast).
// - A new attempt starts without its predecessor's cancel request.
// - The UPDATE finds the picked rows by the ctid `picked` locked them at (a TID scan) and
//   joins nothing: found again by primary key, each cost a descent of jobs_pkey, 7% of the
//   claim's time (bench/README.md, "SCHED_BATCH, and the claim by ctid"). Our lock keeps
//   that version current until the claim commits. A row updated by another transaction
//   since the claim's snapshot (its lock then went to the newer version, which the TID
//   scan does not see) stays locked and unclaimed until the claim ends: the next one takes
//   it. Trap: joined to `picked`, a hash join over the whole table (45-50 ms a claim of
//   1,000, not 11-16).
// - The fetcher's session pins a plan on jobs_claim_type_idx and the TID scan (StatementSet),
//   the others plan at each execution. Trap: a generic plan made on an empty table kept its
//   sequential scan as the table grew (600-1,000 ms a claim).
constexpr const char* kClaimSql = R"(
WITH {claim_ctes}
{claim_rows}{limits_row})";

// kClaimWithDue: kClaim, and when the claim comes back short with $9 (the served queues)
// not empty, one more row, job columns NULL, with kNextDue's first answer for $9 and $3. A
// full claim skips the probes (a one-time filter). Claim and probes share a snapshot and
// now(), so every row is due (claimed or skipped) or counted: no look-back needed. Only for
// a pinned plan: planned at each execution it costs 1.1 ms against kClaim's 0.5. The last
// row also says whether a limit exists (kNoLimits), and comes whenever one does.
constexpr const char* kClaimWithDueSql = R"(
WITH RECURSIVE {claim_ctes}, short_claim AS (
  SELECT 1 AS short WHERE cardinality($9::text[]) > 0 AND (SELECT count(*) FROM claimed) < $4
), served AS (
  SELECT s.queue FROM short_claim CROSS JOIN unnest($9::text[]) AS s(queue)
  WHERE {s_not_paused}
), {due_priorities}, probes AS (
  SELECT {next_at} AS next_at FROM priorities p WHERE p.priority IS NOT NULL
)
{claim_rows}
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       {due_wait}, EXISTS (SELECT FROM {limits})
FROM (SELECT min(next_at) AS next_at FROM probes) m
WHERE EXISTS (SELECT 1 FROM short_claim) OR EXISTS (SELECT FROM {limits}))";

// kClaim's parts, reading its parameters (statements.hpp): its CTEs (`slots`, the pick
// ending in `picked`, and `claimed`, the claimed rows) and the rows it returns
// ({due_column}: kClaimWithDue's two more columns).
constexpr const char* kClaimSlotsCte = R"(slots AS (
  SELECT * FROM unnest($1::text[], $2::int[]) AS s(queue, free)
  WHERE set_config('synchronous_commit',
                   coalesce(nullif($7::text, ''), current_setting('synchronous_commit')),
                   true) IS NOT NULL
    AND {s_not_paused}{no_limits}
))";
constexpr const char* kClaimPickCtes = R"(arms AS (
  SELECT slots.queue, slots.free, t.type
  FROM slots CROSS JOIN (SELECT DISTINCT t.type FROM unnest($3::text[]) AS t(type)) t
), firsts AS (
  SELECT a.queue, a.type,
         row_number() OVER (PARTITION BY a.queue ORDER BY f.priority DESC, f.run_at, f.id)
           <= a.free AS within
  FROM arms a CROSS JOIN LATERAL (
    SELECT j.priority, j.run_at, j.id FROM {jobs} j
    WHERE j.queue = a.queue AND j.type = a.type AND j.status IN ('pending', 'failed')
      AND j.run_at <= now()
    ORDER BY j.priority DESC, j.run_at, j.id
    LIMIT a.free
  ) f
  WHERE cardinality($3::text[]) > 1
), shares AS (
  SELECT f.queue, f.type, count(*) FILTER (WHERE f.within) AS take
  FROM firsts f GROUP BY f.queue, f.type
  UNION ALL
  SELECT a.queue, a.type, a.free FROM arms a WHERE cardinality($3::text[]) <= 1
), picked AS (
  SELECT c.ctid FROM shares s CROSS JOIN LATERAL (
    SELECT j.ctid, j.id, j.priority, j.run_at FROM {jobs} j
    WHERE j.queue = s.queue AND j.type = s.type AND j.status IN ('pending', 'failed')
      AND j.run_at <= now()
    ORDER BY j.priority DESC, j.run_at, j.id
    LIMIT s.take
    FOR UPDATE OF j SKIP LOCKED
  ) c
  WHERE s.take > 0
  ORDER BY c.priority DESC, c.run_at, c.id
  LIMIT $4
))";
constexpr const char* kClaimUpdateCte = R"(claimed AS (
  UPDATE {jobs} j
  SET status = 'running', attempts = least(j.attempts, 999999) + 1, locked_by = $5,
      locked_until = now() + $6::bigint * interval '1 millisecond',
      started_at = now(), updated_at = now(), cancel_requested_at = NULL, cancel_reason = NULL,
      prefetched = false
  WHERE j.ctid = ANY (ARRAY(SELECT p.ctid FROM picked p))
  RETURNING j.id, j.queue, j.type, j.payload, j.attempts, j.max_attempts, j.priority, j.run_at
))";
// kClaimIds' pick: the rows of $9 among the served queues' free slots and types, due and
// not held, in claim order within each queue. Found through jobs_pkey alone: every other
// condition of the first read is an IS TRUE the planner cannot match to an index, so the
// pinned plan never walks jobs_claim_type_idx (whose dead entries, after a burst, are what
// this claim exists to avoid). The rows are read without locks first (a window function
// cannot sit beside FOR UPDATE), then locked by id, skipping those another session holds.
constexpr const char* kClaimIdsPickCtes = R"(candidates AS (
  SELECT j.id, s.free,
         row_number() OVER (PARTITION BY j.queue ORDER BY j.priority DESC, j.run_at, j.id) AS n
  FROM {jobs} j JOIN slots s ON (s.queue = j.queue) IS TRUE
  WHERE j.id = ANY ($9::bigint[]) AND (j.type = ANY ($3::text[])) IS TRUE
    AND (j.status IN ('pending', 'failed')) IS TRUE AND (j.run_at <= now()) IS TRUE
), picked AS (
  SELECT j.ctid FROM {jobs} j
  WHERE j.id = ANY (ARRAY(SELECT c.id FROM candidates c WHERE c.n <= c.free))
    AND (j.status IN ('pending', 'failed')) IS TRUE AND (j.run_at <= now()) IS TRUE
  ORDER BY j.id
  LIMIT $4
  FOR UPDATE OF j SKIP LOCKED
))";

constexpr const char* kClaimRows = R"(
SELECT c.id, c.queue, c.type, CASE WHEN octet_length(b.body) <= $8 THEN b.body END,
       c.attempts, c.max_attempts, c.priority,
       extract(epoch FROM now() - greatest(c.run_at, '1970-01-01 00:00:00+00'))::float8,
       octet_length(b.body)::bigint{due_column}
FROM claimed c CROSS JOIN LATERAL (SELECT c.payload::text AS body OFFSET 0) b)";

// kNextDue, asked after a short claim, never a full one: the wait until the first job not
// due yet, and how long ago the last due one came due if within $3 microseconds (since the
// claim began, plus a second: older due jobs are not read). It sees what the claim sees:
// queues $1 not paused, types $2, pending and failed rows. A job that came due after the
// claim looked makes the fetcher claim again at once; one due before was skipped by the
// claim (held, or no slot), and counting it would wake the fetcher for nothing.
// Plan: jobs_claim_idx leads with (queue, priority DESC), so min(run_at) per queue would read
// every future job. Instead a loose index scan: a probe per distinct priority
// (`priorities`), then per (queue, priority) one for the first future run_at and one,
// backwards, for the last due one: a few probes per queue whatever the table holds. The
// wait is clamped to a day ('infinity' would fail the subtraction).
constexpr const char* kNextDueSql = R"(
WITH RECURSIVE served AS (
  SELECT s.queue FROM unnest($1::text[]) AS s(queue)
  WHERE {s_not_paused}
), {due_priorities}, probes AS (
  SELECT {next_at} AS next_at,
         (SELECT j.run_at FROM {jobs} j
          WHERE j.queue = p.queue AND j.status IN ('pending', 'failed') AND j.priority = p.priority
            AND j.run_at <= now() AND j.run_at > now() - $3::bigint * interval '1 microsecond'
            AND j.type = ANY($2::text[])
          ORDER BY j.run_at DESC LIMIT 1) AS due_at
  FROM priorities p WHERE p.priority IS NOT NULL
)
SELECT {due_wait}, extract(epoch FROM now() - due_at)::float8
FROM (SELECT min(next_at) AS next_at, max(due_at) AS due_at FROM probes) m)";

// kNextDue's parts that kClaimWithDue shares: each distinct priority of each queue of the
// CTE `served`, and the wait until the earliest `next_at` (a column).
constexpr const char* kDuePriorities = R"(priorities AS (
  SELECT served.queue,
         (SELECT j.priority FROM {jobs} j
          WHERE j.queue = served.queue AND j.status IN ('pending', 'failed')
          ORDER BY j.priority DESC LIMIT 1) AS priority
  FROM served
  UNION ALL
  SELECT p.queue,
         (SELECT j.priority FROM {jobs} j
          WHERE j.queue = p.queue AND j.status IN ('pending', 'failed') AND j.priority < p.priority
          ORDER BY j.priority DESC LIMIT 1)
  FROM priorities p WHERE p.priority IS NOT NULL
))";
// The first run_at after now() of the (queue, priority) `p` among the types $`types`.
std::string next_at(int types) {
  return R"((SELECT j.run_at FROM {jobs} j
          WHERE j.queue = p.queue AND j.status IN ('pending', 'failed') AND j.priority = p.priority
            AND j.run_at > now() AND j.type = ANY()" +
         param(types) + R"(::text[])
          ORDER BY j.run_at LIMIT 1))";
}
constexpr const char* kDueWait =
    R"(CASE WHEN next_at IS NOT NULL  -- least() would turn no job into a day
         THEN extract(epoch FROM least(next_at, now() + interval '1 day') - now())::float8
       END)";

// kComplete and its variants write a batch in one statement, fenced (still_ours): done rows
// from $1/$2 (`done`); failed (retried after its delay), dead, released ('pending': back to
// the queue, the attempt not counted) and cancelled rows from the parallel arrays $3..$7
// (`other`).
// - A cancel request wins over every outcome but done: the job ends cancelled, never
//   retried, last_error giving the request's reason.
// - An attempt not ending done leaves an attempt_log entry; a done job keeps locked_by
//   instead (an entry on every done job cost about 9% of the serial ceiling).
// - Rows are found by `id = ANY(array)` (the primary key) and matched to their slot by
//   array_position. Trap: joined with unnest(), a nested loop over the function scan (a
//   backlog fell from 33,000 to 3,000-11,000 jobs/s).
// - $9, the done rows' common attempt (nearly always), spares array_position (9.9 against
//   7.5 ms per 1,000 rows); $9 = 0 (mixed) falls back to $2's slot.
// - $10, the done rows' results, is NULL when none has one (nearly always): their result is
//   then NULL without an array_position of its own.
constexpr const char* kCompleteDoneCte = R"({unused_results}
done AS (
  {done_write}
  WHERE (SELECT count(*) FROM ordered) >= 0 AND j.id = ANY ({done_ids})
    AND j.attempts = CASE WHEN $9::int > 0 THEN $9::int
                          ELSE {done_attempt} END
    AND {still_ours}
  RETURNING j.id, j.has_children
),)";

constexpr const char* kCompleteOtherCte = R"(
other AS (
  UPDATE {jobs} j
  SET status = {status},
      run_at = CASE {status}
                 WHEN 'failed' THEN now() + {delay}
                                            * interval '1 millisecond'
                 WHEN 'pending' THEN now() ELSE j.run_at END,
      attempts = CASE WHEN {status} = 'pending' THEN j.attempts - 1 ELSE j.attempts END,
      finished_at = CASE WHEN {status} IN ('dead', 'cancelled') THEN now() END,
      last_error = CASE {status} WHEN 'pending' THEN j.last_error
                                 WHEN 'cancelled' THEN {cancel_text}
                                 ELSE {given_error} END,
      errors = CASE WHEN {status} = 'pending' THEN j.errors
                    ELSE {recent_errors} || jsonb_build_array(jsonb_build_object(
                           'attempt', j.attempts, 'at', now(),
                           'error', CASE WHEN {status} = 'cancelled' THEN {cancel_text}
                                         ELSE {given_error} END)) END,
      attempt_log = {recent_attempts} || jsonb_build_array({attempt_entry}
                      CASE {status} WHEN 'pending' THEN 'released' ELSE {status} END)),
      locked_by = NULL, locked_until = NULL, updated_at = now()
  WHERE (SELECT count(*) FROM ordered) >= 0 AND j.id = ANY ({other_ids})
    AND j.attempts = {attempt}
    AND {still_ours}
  RETURNING j.id, j.status, j.has_children
))";

// Every statement writing several of a daemon's running jobs (heartbeat, completion) locks
// them in ascending id order: two orders deadlock, and PostgreSQL breaks a deadlock only
// after deadlock_timeout (1 s), when short leases have run out. A primary-key scan takes an
// `id = ANY` array in order, so only a batch holding both done and other rows needs
// `ordered`, which then locks them all first (a no-op otherwise; `done` and `other` wait
// for it: the count, an InitPlan, runs before their scans).
// A row another session holds must never hold up the daemon's completions until leases run
// out: the batch waits at most $10 (lock_timeout, set inside for this transaction only;
// the CASE sets it before `done` and `other` take their locks) and fails with 55P03,
// writing nothing; the daemon then sends kCompleteSkipLocked. The usual batch pays no lock
// pass of its own.
constexpr const char* kCompleteLockCte = R"(
WITH ordered AS (
  SELECT l.id FROM {jobs} l
  WHERE cardinality($1::bigint[]) > 0 AND cardinality($3::bigint[]) > 0
    AND l.id = ANY ($1::bigint[] || $3::bigint[])
  ORDER BY l.id
  FOR UPDATE OF l
),)";
constexpr const char* kCompleteCount = R"(
SELECT CASE WHEN set_config('lock_timeout', $11::text, true) IS NOT NULL{noted}
            THEN ((SELECT count(*) FROM done) + (SELECT count(*) FROM other))::int END{noted_end}{due_columns})";
// kComplete's two more columns (read after the count, whose CASE sets pgjobd.noted first):
// the children it counted to 0, which its trigger makes pending unless they start later
// (the daemon claims them by id: Fetcher), and whether the trigger may also have made jobs
// due another way (a parent ended dead or cancelled: its children resolved, a dead
// letter enqueued), for which the daemon makes a claim of its own (CompletionReport).
constexpr const char* kCompleteDueColumns = R"(,
       (SELECT coalesce(array_agg(c.id ORDER BY c.id), '{}') FROM counted c
        WHERE c.blocked_by = 0)::text,
       EXISTS (SELECT 1 FROM other o
               WHERE o.status = 'dead' OR (o.status = 'cancelled' AND o.has_children)))";
// kComplete (rows kept, none skipped: nearly every batch) resolves the children of the
// parents it ended done itself, and tells the dependency triggers
// (sql/functions/pgjobd_dependencies.sql) the rest instead of leaving it to a row trigger per
// parent: pgjobd.noted, set before `done` and `other` write a row (the outer CASE's
// condition runs first, the CTEs when a count reads them), turns the row trigger off for
// this transaction.
// - `counted` counts the done parents off their blocked children, as the triggers would
//   (edges not written: see pgjobd_resolve_ends), in this statement: the note, its parse
//   and the function's statements cost a fan-in's parents as much again as the edge reads.
//   It reads the children by their ids (`= ANY`: the primary key, in id order, so two
//   batches lock shared children in the same order) and each one's count from one jsonb
//   object (a binary search), never by a join: the generic plan, made next to a table with
//   few rows, nested a loop over the counts inside the children (a root's 10,000 children
//   took 28 s). Under the children's row locks, two batches ending parents of one child
//   decrement it one after the other, so it reaches 0 once. A child that reaches 0 is noted
//   (pgjobd.unblock) for the statement's trigger, which makes it pending with `_parents`:
//   built here, it would not see the parents this statement ended.
// - Parents that ended dead or cancelled are noted (pgjobd.ended), for the trigger to
//   resolve as any other end.
// A batch without parents pays an empty index probe and the scans of the written ids.
constexpr const char* kCompleteCountedCte = R"(,
counts AS (
  SELECT d.child_id, count(*)::int AS n FROM {dependencies} d
  WHERE d.parent_id = ANY (ARRAY(SELECT x.id FROM done x WHERE x.has_children))
    AND d.parent_status IS NULL
  GROUP BY d.child_id
),
counted AS (
  UPDATE {jobs} c
  SET blocked_by = greatest(c.blocked_by - ((SELECT jsonb_object_agg(e.child_id::text, e.n)
                                             FROM counts e) ->> c.id::text)::int, 0),
      updated_at = now()
  WHERE c.id = ANY (ARRAY(SELECT e.child_id FROM counts e)) AND (c.status = 'blocked') IS TRUE
  RETURNING c.id, c.blocked_by
))";
constexpr const char* kCompleteNoted = R"(
             AND set_config('pgjobd.noted', 'on', true) IS NOT NULL
            THEN CASE WHEN set_config('pgjobd.ended',
                   coalesce(current_setting('pgjobd.ended', true), '') || (
                     SELECT coalesce(string_agg(o.id || ':' || o.status || ',', ''), '')
                     FROM other o WHERE o.has_children AND o.status IN ('dead', 'cancelled')),
                   true) IS NOT NULL
                   AND set_config('pgjobd.unblock', (
                     SELECT coalesce(array_agg(c.id)::text, '') FROM counted c
                     WHERE c.blocked_by = 0), true) IS NOT NULL)";

// kCompleteSkipLocked: the batch again, writing only the rows `ordered` could lock (in id
// order, skipping held ones). A skipped row still ours (read without a lock from the
// snapshot) comes back as held, for the daemon to retry alone; one no longer ours is stale.
// Returns the written count (NULL id), then a row per held id (NULL count). `held` reads
// only the skipped ids (EXCEPT), so the attempt lookup runs for those few rows alone.
constexpr const char* kCompleteSkipLockedCte = R"(
WITH ordered AS (
  SELECT l.id FROM {jobs} l
  WHERE l.id = ANY ($1::bigint[] || $3::bigint[])
  ORDER BY l.id
  FOR UPDATE OF l SKIP LOCKED
),)";
constexpr const char* kCompleteHeld = R"(,
held AS (
  SELECT h.id FROM {jobs} h
  WHERE h.id = ANY (ARRAY(SELECT unnest($1::bigint[] || $3::bigint[])
                          EXCEPT SELECT o.id FROM ordered o))
    AND h.attempts = ($2::int[] || $4::int[])[array_position($1::bigint[] || $3::bigint[], h.id)]
    AND {h_still_ours}
)
SELECT ((SELECT count(*) FROM done) + (SELECT count(*) FROM other))::int, NULL::bigint
UNION ALL
SELECT NULL, h.id FROM held h)";
// The rows `done` and `other` write: those of $1 and $3, or in kCompleteSkipLocked those
// `ordered` locked. Never both: two `= ANY` arrays on the primary key make its scan walk
// every pair of elements (24 ms for two of 1,000).
constexpr const char* kDoneIds = "$1::bigint[]";
constexpr const char* kOtherIds = "$3::bigint[]";
constexpr const char* kLockedDoneIds =
    "ARRAY(SELECT o.id FROM ordered o WHERE o.id = ANY ($1::bigint[]))";
constexpr const char* kLockedOtherIds =
    "ARRAY(SELECT o.id FROM ordered o WHERE o.id = ANY ($3::bigint[]))";

// A batch completion from the parts above: done rows kept or deleted (retention.done = 0),
// waiting for held rows at most $11 (kComplete) or skipping them (skip_locked:
// kCompleteSkipLocked). The parts read kComplete's parameters (statements.hpp) directly;
// the fragments get theirs here.
std::string completion(bool delete_done, bool skip_locked) {
  const bool counted = !delete_done && !skip_locked;
  return fill(std::string(skip_locked ? kCompleteSkipLockedCte : kCompleteLockCte) +
                  kCompleteDoneCte + kCompleteOtherCte + (counted ? kCompleteCountedCte : "") +
                  (skip_locked ? kCompleteHeld : kCompleteCount),
              {{"{noted}", delete_done ? "" : kCompleteNoted},
               {"{due_columns}", counted ? kCompleteDueColumns : ""},
               {"{noted_end}", delete_done ? "" : " END"},
               {"{done_ids}", skip_locked ? kLockedDoneIds : kDoneIds},
               {"{other_ids}", skip_locked ? kLockedOtherIds : kOtherIds},
               {"{unused_results}", delete_done ? "\n" + unused_param(10, "jsonb[]") + "," : ""},
               {"{done_write}", done_write(delete_done, "CASE WHEN $10::jsonb[] IS NOT NULL THEN " +
                                                            slot(10, "jsonb", 1) + " END")},
               {"{done_attempt}", slot(2, "int", 1)},
               {"{status}", outcome_status(5, 3)},
               {"{delay}", slot(7, "bigint", 3)},
               {"{given_error}", slot(6, "text", 3)},
               {"{attempt}", slot(4, "int", 3)},
               {"{still_ours}", still_ours("j", 8)},
               {"{h_still_ours}", still_ours("h", 8)},
               {"{cancel_text}", kCancelText},
               {"{recent_errors}", recent_entries("j.errors")},
               {"{recent_attempts}", recent_entries("j.attempt_log")},
               {"{attempt_entry}", kAttemptEntry}});
}

// The sql handler's completion of one done job, in the handler's own transaction.
std::string complete_one(bool delete_done) {
  return (delete_done ? "\nWITH " + unused_param(4, "jsonb") : std::string()) + "\n" +
         done_write(delete_done, "$4::jsonb") + "\nWHERE j.id = $1 AND j.attempts = $2 AND " +
         still_ours("j", 3) + "\nRETURNING j.id";
}

// kHeartbeat renews the leases still ours, and says which jobs pgjobd_cancel asked to stop
// (a daemon that missed the NOTIFY learns it here). A row another session holds is never
// waited for, which would stop every other renewal behind it: one still ours comes back
// with renewed = false and keeps its old lease. Locks in id order (see `ordered`).
std::string heartbeat_sql() {
  return fill(R"(
WITH mine AS (
  SELECT l.id FROM {jobs} l
  WHERE l.id = ANY ($1::bigint[])
    AND l.attempts = ($2::int[])[array_position($1::bigint[], l.id)]
    AND {l_still_ours}
  ORDER BY l.id
  FOR UPDATE OF l SKIP LOCKED
), renewed AS (
  UPDATE {jobs} j
  SET locked_until = now() + $4::bigint * interval '1 millisecond'
  WHERE j.id = ANY (ARRAY(SELECT id FROM mine))
  RETURNING j.id, j.attempts, j.cancel_requested_at IS NOT NULL AS cancel
)
SELECT id, attempts, cancel, true FROM renewed
UNION ALL
SELECT h.id, h.attempts, h.cancel_requested_at IS NOT NULL, false FROM {jobs} h
WHERE h.id = ANY ($1::bigint[]) AND h.id <> ALL (ARRAY(SELECT id FROM mine))
  AND h.attempts = ($2::int[])[array_position($1::bigint[], h.id)]
  AND {h_still_ours})",
              {{"{l_still_ours}", still_ours("l", 3)}, {"{h_still_ours}", still_ours("h", 3)}});
}

// kLeadAndRescue: leadership and rescue in one round trip (an idle daemon's budget is a few
// queries a minute). The leader row is taken when free or expired, renewed by its holder;
// only the leader rescues, and a rescue is safe even under two leaders. A job whose owner
// stopped heartbeating goes back to the queue after the retry backoff, or dies with its
// attempts used up (a job that crashes its daemon every time ends dead), or ends cancelled
// if a cancel was requested. The error quotes at most 200 characters of locked_by (no
// constraint bounds it; over 256 MB, a jsonb string's limit, failed every rescue).
std::string lead_and_rescue_sql() {
  const std::string rescue_error = std::string(R"((CASE WHEN j.cancel_requested_at IS NOT NULL
      THEN )") + kCancelText + R"( || ' (its daemon stopped: lease expired)'
      ELSE 'rescued: lease expired while ' || coalesce(left(j.locked_by, 200), '?') ||
           ' ran attempt ' || j.attempts END))";
  return fill(R"(
WITH leader AS (
  INSERT INTO {leader} AS l (role, leader_id, elected_at, expires_at)
  VALUES ('maintenance', $1, now(), now() + $2::bigint * interval '1 millisecond')
  ON CONFLICT (role) DO UPDATE
    SET leader_id = EXCLUDED.leader_id, expires_at = EXCLUDED.expires_at,
        elected_at = CASE WHEN l.leader_id = EXCLUDED.leader_id THEN l.elected_at
                          ELSE now() END
    WHERE l.leader_id = EXCLUDED.leader_id OR l.expires_at < now()
  RETURNING leader_id
), expired AS (
  SELECT id FROM {jobs}
  WHERE status = 'running' AND locked_until < now() AND EXISTS (SELECT 1 FROM leader)
  ORDER BY locked_until
  LIMIT $6
  FOR UPDATE SKIP LOCKED
), rescued AS (
  UPDATE {jobs} j
  SET status = {rescue_status},
      run_at = CASE WHEN {rescue_status} = 'failed'
                    THEN now() + {retry_delay_ms}
                                 * interval '1 millisecond'
                    ELSE j.run_at END,
      finished_at = CASE WHEN {rescue_status} <> 'failed' THEN now() END,
      last_error = {rescue_error},
      errors = {recent_errors} || jsonb_build_array(jsonb_build_object(
                 'attempt', j.attempts, 'at', now(), 'error', {rescue_error})),
      attempt_log = {recent_attempts} || jsonb_build_array({attempt_entry} 'lease_expired')),
      locked_by = NULL, locked_until = NULL, updated_at = now()
  FROM expired WHERE j.id = expired.id
  RETURNING j.id, j.status
)
SELECT EXISTS (SELECT 1 FROM leader),
       (SELECT count(*) FROM rescued WHERE status = 'failed')::int,
       (SELECT count(*) FROM rescued WHERE status = 'dead')::int,
       (SELECT count(*) FROM rescued WHERE status = 'cancelled')::int)",
              {{"{rescue_status}", R"((CASE WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled'
      WHEN j.attempts >= j.max_attempts THEN 'dead' ELSE 'failed' END))"},
               {"{retry_delay_ms}", retry_delay_ms(3, 4, 5)},
               {"{rescue_error}", rescue_error},
               {"{recent_errors}", recent_entries("j.errors")},
               {"{recent_attempts}", recent_entries("j.attempt_log")},
               {"{attempt_entry}", kAttemptEntry}});
}

// A leader that stops hands over at once instead of after its TTL.
constexpr const char* kResignSql = R"(
DELETE FROM {leader} WHERE role = 'maintenance' AND leader_id = $1)";

// kPrune: bounded slices with SKIP LOCKED (short transactions; pruning daemons split the
// work). Each branch is a range scan of jobs_finished_idx in finished_at order from the
// caller's cursor ($3, $4); the dead branch runs only when the done branch comes back short.
// Returns the count and the next cursors (the last finished_at deleted while a branch filled
// its share, else the end of its range). Traps, next to 3M done rows: without the ORDER BY
// a sequential scan (400 MB, 0.58 s for a pass's last slice); without the cursor every slice
// walked the deleted entries again (10 ms per 300,000); spelled `status = 'dead'`, a generic
// plan also took jobs_queue_status_idx and sorted every expired dead row. A parent stays
// while a child of it is blocked (README "Dependencies": the child's `_parents` is built
// from the parents' rows when it unblocks); the check is a filter of the same scan, and its
// subquery runs only for rows with has_children.
constexpr const char* kPruneSql = R"(
WITH old_done AS (
  SELECT id, finished_at FROM {jobs} p
  WHERE status IN ('done', 'cancelled')
    AND finished_at >= $3::timestamptz
    AND finished_at < now() - $1::bigint * interval '1 millisecond'
    AND NOT (has_children AND EXISTS (
      SELECT 1 FROM {dependencies} d JOIN {jobs} c ON c.id = d.child_id
      WHERE d.parent_id = p.id AND c.status = 'blocked'))
  ORDER BY finished_at
  LIMIT $5
  FOR UPDATE SKIP LOCKED
), old_dead AS (
  SELECT id, finished_at FROM {jobs} p
  WHERE status IN ('done', 'dead', 'cancelled') AND status NOT IN ('done', 'cancelled')
    AND finished_at >= $4::timestamptz
    AND finished_at < now() - $2::bigint * interval '1 millisecond'
    AND NOT (has_children AND EXISTS (
      SELECT 1 FROM {dependencies} d JOIN {jobs} c ON c.id = d.child_id
      WHERE d.parent_id = p.id AND c.status = 'blocked'))
  ORDER BY finished_at
  LIMIT $5 - (SELECT count(*) FROM old_done)
  FOR UPDATE SKIP LOCKED
), deleted AS (
  DELETE FROM {jobs} j
  USING (SELECT id FROM old_done UNION ALL SELECT id FROM old_dead) doomed
  WHERE j.id = doomed.id
  RETURNING 1
)
SELECT d.n::int,
       (CASE WHEN o.n = $5 THEN o.last
             ELSE now() - $1::bigint * interval '1 millisecond' END)::text,
       coalesce(x.last, $4::timestamptz)::text
FROM (SELECT count(*) AS n FROM deleted) d,
     (SELECT count(*) AS n, max(finished_at) AS last FROM old_done) o,
     (SELECT max(finished_at) AS last FROM old_dead) x)";

// kRepairDependencies: up to $1 parents that ended (or are gone) while the trigger did not
// fire (session_replication_role = replica during a restore, triggers disabled by hand),
// in one call of pgjobd_resolve_parents, which does what the trigger would have. A failed
// or vanished parent shows as an unwritten edge to a blocked child. A done parent's edges
// are never written (sql/functions/pgjobd_dependencies.sql), so a missed one shows only as
// a blocked child whose unwritten edges all lead to done parents: one of them is passed
// for it, and the function counts that parent's blocked children again from their edges.
// Walks the blocked jobs on jobs_blocked_idx (every blocked job when there is nothing to
// repair), on the leader, at the retention interval. Returns how many parents it passed.
constexpr const char* kRepairDependenciesSql = R"(
SELECT count(*)::int,
       {schema}.pgjobd_resolve_parents(coalesce(array_agg(e.parent_id), ARRAY[]::bigint[]),
                                       coalesce(array_agg(e.status), ARRAY[]::text[]))
FROM ((
  SELECT DISTINCT d.parent_id, coalesce(p.status, 'deleted') AS status
  FROM {jobs} c
  JOIN {dependencies} d ON d.child_id = c.id AND d.parent_status IS NULL
  LEFT JOIN {jobs} p ON p.id = d.parent_id
  WHERE c.status = 'blocked'
    AND (p.id IS NULL OR p.status IN ('dead', 'cancelled'))
  LIMIT $1
) UNION ALL (
  SELECT s.parent_id, 'done'
  FROM {jobs} c
  CROSS JOIN LATERAL (SELECT min(d.parent_id) AS parent_id FROM {dependencies} d
                      WHERE d.child_id = c.id AND d.parent_status IS NULL) s
  WHERE c.status = 'blocked' AND s.parent_id IS NOT NULL
    AND NOT EXISTS (SELECT 1 FROM {dependencies} d LEFT JOIN {jobs} p ON p.id = d.parent_id
                    WHERE d.child_id = c.id AND d.parent_status IS NULL
                      AND (p.id IS NULL OR p.status <> 'done'))
  LIMIT $1
) LIMIT $1) e)";

// jobs_claim_idx's order within a queue.
constexpr const char* kClaimOrder = "j.priority DESC, j.run_at, j.id";

// kQueueStats' count of served queue s's jobs in `status`, at most $2, read in the order of
// that status's partial index (`order`), under kQueueStatsPlanning.
std::string bounded_depth(const char* status, const char* order) {
  return std::string(
             "(SELECT count(*) FROM (SELECT 1 FROM {jobs} j WHERE j.queue = s.queue AND "
             "j.status = '") +
         status + "' ORDER BY " + order + " LIMIT $2) x)";
}

// kQueueStats: live and blocked jobs of the served queues ($1) by queue and status, for the
// queue gauges (only served queues: an application's many queue names never grow /metrics),
// and the age of each queue's oldest due job, on the row of its status.
// - Each count stops at $2 rows (the store estimates a group that reaches it): a range of at
//   most $2 entries of the status's partial index (pending: jobs_claim_idx; failed:
//   jobs_queue_status_idx; running: the lease index; blocked: jobs_blocked_idx), the
//   status a literal so that each matches its index, the queue in the index condition.
//   Trap: failed counted in claim order walked every pending entry for none (5 s at 10M). Trap:
//   counted to the end, 10,000,000 pending rows took a parallel scan of 3.6 s on three processes
//   every 30 s: the gauges went blind (past the call timeout), the claims lost the CPU, and the
//   long snapshot kept them from marking the entries of claimed rows dead, so each claim walked
//   more of them (bench/README.md, "Ten million pending jobs"). Before that, one `status IN (...)`
//   of all statuses matched no index and read the whole table (0.4 s at 5M done rows).
// - The oldest due job: a loose index scan of jobs_claim_idx, per distinct priority of the
//   queue (`priorities`) its first run_at, a few probes per queue whatever it holds. The
//   age is clamped to 100 years ('-infinity' would fail the subtraction and blind every
//   gauge).
constexpr const char* kQueueStatsSql = R"(
WITH RECURSIVE served AS (
  SELECT DISTINCT s.queue FROM unnest($1::text[]) AS s(queue)
), {due_priorities}, firsts AS (
  SELECT p.queue, f.run_at, f.status FROM priorities p CROSS JOIN LATERAL (
    SELECT greatest(j.run_at, now() - interval '100 years') AS run_at, j.status FROM {jobs} j
    WHERE j.queue = p.queue AND j.status IN ('pending', 'failed') AND j.priority = p.priority
    ORDER BY j.run_at LIMIT 1) f
  WHERE p.priority IS NOT NULL
), oldest AS (
  SELECT DISTINCT ON (f.queue) f.queue, f.status, f.run_at FROM firsts f
  WHERE f.run_at <= now() ORDER BY f.queue, f.run_at
)
SELECT s.queue, c.status, c.n::float8,
       coalesce((SELECT extract(epoch FROM now() - o.run_at) FROM oldest o
                 WHERE o.queue = s.queue AND o.status = c.status), 0)::float8
FROM served s CROSS JOIN LATERAL (VALUES
  ('pending', {count_pending}), ('failed', {count_failed}),
  ('running', {count_running}), ('blocked', {count_blocked})) c(status, n)
WHERE c.n > 0)";

// kQueueStatsPlanning: for the transaction only (nothing stays on a pooled session). Trap:
// planned freely, a count whose group the statistics put below the bound was a bitmap scan
// of the whole group and a sort, whatever the group had grown to since ANALYZE. Trap: a
// plan's cost then counts each disabled node at 1e10, far past jit_above_cost, and the
// statement was compiled by JIT at each round: 220-275 ms on an empty table, during which
// the maintenance loop did nothing else (a daemon learnt a new limit 0.3 s late).
constexpr const char* kQueueStatsPlanningSql = R"(
SELECT set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true),
       set_config('enable_sort', 'off', true), set_config('jit', 'off', true))";

// kQueueDepthEstimate: the planner's estimate of the rows of queue $1 with status $2, from
// the table's statistics (ANALYZE; the (queue, status) pairs' frequencies from
// jobs_queue_status_stats): a group too large to count every 30 s.
constexpr const char* kQueueDepthEstimateSql = R"(
EXPLAIN (FORMAT JSON) SELECT 1 FROM {jobs} j WHERE j.queue = $1::text AND j.status = $2::text)";

// kDeadLettersSync: a few rows by primary key. Every CTE sees the table as the statement
// began, so `before` holds the rows as the other daemons left them. Rows are written in
// type order: two daemons syncing overlapping types at once lock them in the same order.
constexpr const char* kDeadLettersSyncSql = R"(
WITH wanted AS (
  SELECT e.key AS type, e.value ->> 'type' AS target_type, e.value ->> 'queue' AS target_queue
  FROM jsonb_each($1::jsonb) e),
before AS (
  SELECT d.type, d.target_type, d.target_queue, d.written_by FROM {dead_letters} d
  WHERE d.type = ANY($2::text[])),
removed AS (
  DELETE FROM {dead_letters} d
  WHERE d.type = ANY($2::text[]) AND NOT EXISTS (SELECT 1 FROM wanted w WHERE w.type = d.type)
  RETURNING d.type),
written AS (
  INSERT INTO {dead_letters} AS d (type, target_type, target_queue, written_by)
  SELECT w.type, w.target_type, w.target_queue, $3::text FROM wanted w ORDER BY w.type
  ON CONFLICT (type) DO UPDATE
  SET target_type = EXCLUDED.target_type, target_queue = EXCLUDED.target_queue,
      written_by = EXCLUDED.written_by, updated_at = now()
  WHERE (d.target_type, d.target_queue)
        IS DISTINCT FROM (EXCLUDED.target_type, EXCLUDED.target_queue)
  RETURNING d.type)
SELECT b.type, CASE WHEN r.type IS NULL THEN 'changed' ELSE 'removed' END, b.target_type,
       coalesce(b.target_queue, ''), b.written_by
FROM before b LEFT JOIN removed r ON r.type = b.type LEFT JOIN written w ON w.type = b.type
WHERE (r.type IS NOT NULL OR w.type IS NOT NULL) AND b.written_by <> $3::text
ORDER BY b.type)";

// The served queues ($1) that pgjobd_pause_queue paused, for pgjobd_queue_paused{queue}.
constexpr const char* kPausedQueuesSql = R"(
SELECT queue FROM {queues} WHERE paused AND queue = ANY($1::text[]))";

// Schedules. The table holds one row per schedule (tens, hundreds): every statement reaches
// its row by the primary key, or reads the whole small table.
constexpr const char* kScheduleLoadSql = R"(
SELECT name, coalesce(cron, ''), coalesce(every_seconds, 0), timezone, type, queue, source,
       enabled, paused, overlap, misfire, misfire_grace_seconds,
       floor(extract(epoch FROM last_tick))::bigint,
       floor(extract(epoch FROM next_tick))::bigint, priority, max_attempts, payload::text
FROM {schedules} ORDER BY name)";

// kScheduleLock, the compare-and-set. NOWAIT: a row another session holds (a daemon firing
// it, an operator's open transaction) fails at once with 55P03, and the scheduler fires the
// others and asks again soon; it must never wait (one held row stopped every schedule).
// The holder fires at most once: asked again after it committed, last_tick has moved (READ
// COMMITTED re-checks a row updated since the snapshot): no row. The timing must match what
// the caller computed the tick from, so a daemon that has not seen a change fires no tick of
// the old timing. last_tick compares as whole seconds (now() holds a fraction); `tick >
// last_tick` keeps it growing whatever the caller asks.
constexpr const char* kScheduleLockSql = R"(
SELECT s.overlap = 'skip' AND s.last_job_id IS NOT NULL AND EXISTS (
         SELECT 1 FROM {jobs} j
         WHERE j.id = s.last_job_id AND j.status IN ('pending', 'running', 'failed'))
FROM {schedules} s
WHERE s.name = $1 AND floor(extract(epoch FROM s.last_tick)) = $2::bigint
  AND to_timestamp($3::bigint) > s.last_tick
  AND s.cron IS NOT DISTINCT FROM nullif($4::text, '')
  AND s.every_seconds IS NOT DISTINCT FROM nullif($5::int, 0)
  AND s.timezone = $6 AND s.enabled AND NOT s.paused
FOR UPDATE OF s NOWAIT)";

// Who holds a schedule's row, for the log: the session whose transaction is the row's xmax
// (a lock or an update not committed yet). None when several sessions share the lock
// (xmax is then a multixact) or the holder has finished.
constexpr const char* kScheduleHolderSql = R"(
SELECT l.pid FROM {schedules} s
JOIN pg_locks l ON l.locktype = 'transactionid' AND l.transactionid = s.xmax
 AND l.mode = 'ExclusiveLock' AND l.granted
WHERE s.name = $1 AND s.xmax <> '0'::xid)";

// The reconciliation's bound on a row lock (upsert and delete wait for a row another
// session holds): $1 as lock_timeout text, for this transaction only.
constexpr const char* kScheduleLockTimeoutSql = R"(
SELECT set_config('lock_timeout', $1, true))";

// The tick's job, from the row's current values. The unique_key names the schedule and the
// tick; an object payload also gets `_schedule` {name, tick, late} (README "Recurring
// jobs"). run_at is the tick: late ticks of `misfire: all` run in tick order.
constexpr const char* kScheduleInsertJobSql = R"(
WITH t AS (
  SELECT to_char(to_timestamp($2::bigint) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS tick)
INSERT INTO {jobs} (queue, type, payload, priority, max_attempts, unique_key, run_at)
SELECT s.queue, s.type,
       CASE WHEN jsonb_typeof(s.payload) = 'object'
            THEN s.payload || jsonb_build_object('_schedule', jsonb_build_object(
                   'name', s.name, 'tick', t.tick, 'late', $3::boolean))
            ELSE s.payload END,
       s.priority, s.max_attempts, 'schedule:' || s.name || ':' || t.tick,
       to_timestamp($2::bigint)
FROM {schedules} s, t WHERE s.name = $1
ON CONFLICT (type, unique_key)
  WHERE unique_key IS NOT NULL AND status IN ('pending', 'running', 'failed') DO NOTHING
RETURNING id)";

constexpr const char* kScheduleAdvanceSql = R"(
UPDATE {schedules}
SET last_tick = to_timestamp($2::bigint),
    next_tick = CASE WHEN $3::bigint < 0 THEN NULL ELSE to_timestamp($3::bigint) END,
    last_job_id = CASE WHEN $4::bigint = 0 THEN last_job_id ELSE $4::bigint END,
    updated_at = now()
WHERE name = $1)";

constexpr const char* kScheduleSqlHeldSql = R"(
SELECT name FROM {schedules} WHERE source = 'sql' AND name = ANY($1::text[]))";

// A new row starts at now(), so it never backfills; so does a changed timing and a schedule
// enabled again. An unchanged entry writes nothing (no churn on every reload).
constexpr const char* kScheduleUpsertYamlSql = R"(
INSERT INTO {schedules} AS x (name, cron, every_seconds, timezone, type, queue, priority,
    max_attempts, payload, overlap, misfire, misfire_grace_seconds, enabled, source, last_tick)
VALUES ($1, nullif($2::text, ''), nullif($3::int, 0), $4, $5, $6, $7::smallint, $8::int,
        $9::jsonb, $10, $11, $12::int, $13::boolean, 'yaml', date_trunc('second', now()))
ON CONFLICT ON CONSTRAINT pgjobd_schedules_pkey DO UPDATE SET
  cron = EXCLUDED.cron, every_seconds = EXCLUDED.every_seconds, timezone = EXCLUDED.timezone,
  type = EXCLUDED.type, queue = EXCLUDED.queue, priority = EXCLUDED.priority,
  max_attempts = EXCLUDED.max_attempts, payload = EXCLUDED.payload,
  overlap = EXCLUDED.overlap, misfire = EXCLUDED.misfire,
  misfire_grace_seconds = EXCLUDED.misfire_grace_seconds, enabled = EXCLUDED.enabled,
  last_tick = CASE
    WHEN (x.cron, x.every_seconds, x.timezone)
           IS DISTINCT FROM (EXCLUDED.cron, EXCLUDED.every_seconds, EXCLUDED.timezone)
      OR (NOT x.enabled AND EXCLUDED.enabled)
    THEN greatest(x.last_tick, EXCLUDED.last_tick) ELSE x.last_tick END,
  updated_at = now()
WHERE x.source = 'yaml'
  AND (x.cron, x.every_seconds, x.timezone, x.type, x.queue, x.priority, x.max_attempts,
       x.payload, x.overlap, x.misfire, x.misfire_grace_seconds, x.enabled)
      IS DISTINCT FROM
      (EXCLUDED.cron, EXCLUDED.every_seconds, EXCLUDED.timezone, EXCLUDED.type,
       EXCLUDED.queue, EXCLUDED.priority, EXCLUDED.max_attempts, EXCLUDED.payload,
       EXCLUDED.overlap, EXCLUDED.misfire, EXCLUDED.misfire_grace_seconds, EXCLUDED.enabled)
RETURNING xmax = 0)";

constexpr const char* kScheduleDeleteYamlSql = R"(
DELETE FROM {schedules} WHERE source = 'yaml' AND NOT (name = ANY($1::text[])) RETURNING name)";

// Limits (README "Limits"). The limited claim is a SQL function: it takes locks and counts
// between its statements, which one statement cannot express.
constexpr const char* kClaimLimitedSql = R"(
SELECT * FROM {schema}.pgjobd_claim_limited($1::text[], $2::int[], $3::text[], $4::int,
                                            $5::text, $6::bigint, $7::text, $8::bigint,
                                            $9::int, $10::int))";

constexpr const char* kClaimRoomSql = R"(
SELECT limit_name, room FROM {schema}.pgjobd_claim_room($1::text[], $2::text[], $3::text, $4::int))";

constexpr const char* kLimitsSyncSql = R"(
SELECT limit_name, change, coalesce(previous_writer, '')
FROM {schema}.pgjobd_limits_sync($1::jsonb, $2::text))";

// Arrays as JSON text: a type name may hold any character, so no separator is safe.
constexpr const char* kLimitsLoadSql = R"(
SELECT name, coalesce(array_to_json(types)::text, '[]'), coalesce(array_to_json(queues)::text, '[]'),
       coalesce(key, ''), coalesce(concurrency, 0), coalesce(rate_per_second, 0)::float8, burst,
       coalesce(written_by, ''), coalesce(rate_text, '')
FROM {limits} ORDER BY name)";

// A job counts against a limit while its row is running
// (sql/functions/pgjobd_claim_limited.sql):
// the claim's own count, read among the running rows (the lease index), per limit and
// with its busy partitions. A limit with no running job joins one row of NULLs, and
// pgjobd_limit_part(NULL, key) is '' (the partition of jobs without the field), not NULL:
// only rows with a job count.
constexpr const char* kLimitUsageSql = R"(
SELECT l.name, count(j.id)::bigint,
       count(DISTINCT {schema}.pgjobd_limit_part(j.payload, l.key))
         FILTER (WHERE j.id IS NOT NULL)::bigint
FROM {limits} l LEFT JOIN {jobs} j
  ON j.status = 'running' AND l.concurrency IS NOT NULL
 AND (l.types IS NULL OR j.type = ANY (l.types)) AND (l.queues IS NULL OR j.queue = ANY (l.queues))
GROUP BY l.name ORDER BY l.name)";

// Partitions of keyed rate limits come and go with payload values (one per user, say): a
// bucket is deleted once it has refilled to its burst (no row means a full bucket) and
// was not touched for $1 ms. Rows a claimer holds are skipped.
constexpr const char* kLimitGarbageSql = R"(
WITH full_buckets AS (
  SELECT b.limit_name, b.part FROM {limit_buckets} b JOIN {limits} l ON l.name = b.limit_name
  WHERE b.part <> '' AND b.refilled_at < now() - $1::bigint * interval '1 millisecond'
    AND b.tokens + extract(epoch FROM now() - b.refilled_at) * coalesce(l.rate_per_second, 0)
        >= l.burst
  LIMIT $2
  FOR UPDATE OF b SKIP LOCKED
), gone AS (
  DELETE FROM {limit_buckets} b USING full_buckets f
  WHERE b.limit_name = f.limit_name AND b.part = f.part
    AND b.refilled_at < now() - $1::bigint * interval '1 millisecond'  -- as it is now
  RETURNING 1
)
SELECT count(*)::int FROM gone)";

// The dashboard's daemons table (one row per daemon): an upsert per heartbeat interval,
// expiry by the leader only; a sequential scan of the tiny table is what it should be.
constexpr const char* kDaemonReportSql = R"(
INSERT INTO {daemons} AS d (id, host, pid, version, concurrency, busy, started_at, seen_at,
                            expires_at)
VALUES ($1, $2, $3, $4, $5, $6, now(), now(), now() + $7::bigint * interval '1 millisecond')
ON CONFLICT ON CONSTRAINT pgjobd_daemons_pkey DO UPDATE
SET host = EXCLUDED.host, pid = EXCLUDED.pid, version = EXCLUDED.version,
    concurrency = EXCLUDED.concurrency, busy = EXCLUDED.busy, seen_at = EXCLUDED.seen_at,
    expires_at = EXCLUDED.expires_at)";

constexpr const char* kDaemonRemoveSql = R"(
DELETE FROM {daemons} WHERE id = $1)";

constexpr const char* kDaemonExpireSql = R"(
WITH gone AS (DELETE FROM {daemons} WHERE expires_at < now() RETURNING 1)
SELECT count(*)::int FROM gone)";

// One statement, so one implicit transaction: the NOTIFY takes PostgreSQL's server-wide
// notification lock from its pre-commit to the end of its commit, and without
// synchronous_commit off that commit (a NOTIFY assigns a transaction id) would hold it
// through a WAL flush. set_config(..., true) lasts until this transaction ends, so a
// transaction pooler's session keeps nothing.
constexpr const char* kNotifyFinishedSql = R"(
SELECT count(pg_notify('pgjobd_finished', p))::int
FROM set_config('synchronous_commit', 'off', true) s, unnest($1::text[]) p)";

// The plain claims' check for limits. A daemon takes the plain claim while the limits it
// read say there are none; one added since (a daemon without a `limits:` section learns of
// it by a NOTIFY, tens of ms later) is seen here, in the claim's own snapshot: the claim
// then takes nothing and says so (the row of NULLs), so no job that a committed limit
// covers starts outside it. One scan of the small pgjobd_limits, a one-time filter.
constexpr const char* kNoLimits = "\n    AND NOT EXISTS (SELECT FROM {limits})";
constexpr const char* kLimitsRow = R"(
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL WHERE EXISTS (SELECT FROM {limits}))";

// How a claim statement treats limits: it checks there are none (kClaim, kClaimIds,
// kClaimWithDue, whose own last row says it), or it runs within a limit's room (kClaimInRoom).
enum class ClaimLimits { kChecked, kInRoom };

// kClaim, kClaimWithDue, kClaimIds or kClaimInRoom: `sql` with the claim's parts, `pick`
// the CTEs that end in `picked`, `due_column` kClaimWithDue's extra columns.
std::string claim_statement(const char* sql, const char* pick, const char* due_column,
                            ClaimLimits limits) {
  const bool checked = limits == ClaimLimits::kChecked;
  return fill(sql,
              {{"{claim_ctes}", std::string(kClaimSlotsCte) + ", " + pick + ", " + kClaimUpdateCte},
               {"{claim_rows}", kClaimRows},
               {"{no_limits}", checked ? kNoLimits : ""},
               // kClaimWithDue's last row says it itself.
               {"{limits_row}", checked && *due_column == '\0' ? kLimitsRow : ""},
               {"{due_column}", due_column},
               {"{s_not_paused}", not_paused("s.queue")},
               {"{due_priorities}", kDuePriorities},
               {"{next_at}", next_at(3)},
               {"{due_wait}", kDueWait}});
}

}  // namespace

std::string with_tables(std::string sql, const std::string& schema) {
  replace_all(sql, "{jobs}", schema + ".jobs");
  replace_all(sql, "{leader}", schema + ".pgjobd_leader");
  replace_all(sql, "{queues}", schema + ".pgjobd_queues");
  replace_all(sql, "{daemons}", schema + ".pgjobd_daemons");
  replace_all(sql, "{schedules}", schema + ".pgjobd_schedules");
  replace_all(sql, "{limits}", schema + ".pgjobd_limits");
  replace_all(sql, "{limit_buckets}", schema + ".pgjobd_limit_buckets");
  replace_all(sql, "{audit}", schema + ".pgjobd_audit");
  replace_all(sql, "{dependencies}", schema + ".pgjobd_dependencies");
  replace_all(sql, "{dead_letters}", schema + ".pgjobd_dead_letters");
  replace_all(sql, "{schema}", schema);
  return sql;
}

const Statement& statement_named(const std::vector<Statement>& statements, std::string_view name) {
  for (const Statement& statement : statements) {
    if (name == statement.name) return statement;
  }
  throw std::logic_error("no statement " + std::string(name));
}

std::vector<Statement> job_statements(const std::string& schema) {
  const auto on = [&](std::string sql) { return with_tables(std::move(sql), schema); };
  return {
      {kClaim, on(claim_statement(kClaimSql, kClaimPickCtes, "", ClaimLimits::kChecked))},
      {kClaimWithDue, on(claim_statement(kClaimWithDueSql, kClaimPickCtes,
                                         ", NULL::float8, NULL::bool", ClaimLimits::kChecked))},
      {kClaimIds, on(claim_statement(kClaimSql, kClaimIdsPickCtes, "", ClaimLimits::kChecked))},
      {kClaimInRoom, on(claim_statement(kClaimSql, kClaimPickCtes, "", ClaimLimits::kInRoom))},
      {kNextDue, on(fill(kNextDueSql, {{"{s_not_paused}", not_paused("s.queue")},
                                       {"{due_priorities}", kDuePriorities},
                                       {"{next_at}", next_at(2)},
                                       {"{due_wait}", kDueWait}}))},
      {kComplete, on(completion(false, false))},
      {kCompleteDeleteDone, on(completion(true, false))},
      {kCompleteSkipLocked, on(completion(false, true))},
      {kCompleteDeleteDoneSkipLocked, on(completion(true, true))},
      {kCompleteOneDone, on(complete_one(false))},
      {kCompleteOneDelete, on(complete_one(true))},
      {kHeartbeat, on(heartbeat_sql())},
      {kLeadAndRescue, on(lead_and_rescue_sql())},
      {kResign, on(kResignSql)},
      {kPrune, on(kPruneSql)},
      {kRepairDependencies, on(kRepairDependenciesSql)},
      {kQueueStats,
       on(fill(kQueueStatsSql, {{"{due_priorities}", kDuePriorities},
                                {"{count_pending}", bounded_depth("pending", kClaimOrder)},
                                {"{count_failed}", bounded_depth("failed", "j.id")},
                                {"{count_running}", bounded_depth("running", "j.locked_until")},
                                {"{count_blocked}", bounded_depth("blocked", "j.id")}}))},
      {kQueueStatsPlanning, kQueueStatsPlanningSql},
      {kPausedQueues, on(kPausedQueuesSql)},
      {kDeadLettersSync, on(kDeadLettersSyncSql)},
      {kClaimLimited, on(kClaimLimitedSql)},
      {kClaimRoom, on(kClaimRoomSql)},
      {kLimitsSync, on(kLimitsSyncSql)},
      {kLimitsLoad, on(kLimitsLoadSql)},
      {kLimitUsage, on(kLimitUsageSql)},
      {kLimitGarbage, on(kLimitGarbageSql)},
      {kDaemonReport, on(kDaemonReportSql)},
      {kDaemonRemove, on(kDaemonRemoveSql)},
      {kDaemonExpire, on(kDaemonExpireSql)},
      {kNotifyFinished, on(kNotifyFinishedSql)},
  };
}

std::string queue_depth_estimate(const std::string& schema) {
  return with_tables(kQueueDepthEstimateSql, schema);
}

std::vector<Statement> schedule_statements(const std::string& schema) {
  const auto on = [&](std::string sql) { return with_tables(std::move(sql), schema); };
  return {
      {kScheduleLoad, on(kScheduleLoadSql)},
      {kScheduleLock, on(kScheduleLockSql)},
      {kScheduleHolder, on(kScheduleHolderSql)},
      {kScheduleLockTimeout, kScheduleLockTimeoutSql},
      {kScheduleInsertJob, on(kScheduleInsertJobSql)},
      {kScheduleAdvance, on(kScheduleAdvanceSql)},
      {kScheduleSqlHeld, on(kScheduleSqlHeldSql)},
      {kScheduleUpsertYaml, on(kScheduleUpsertYamlSql)},
      {kScheduleDeleteYaml, on(kScheduleDeleteYamlSql)},
  };
}

}  // namespace pgjobd::stmt
