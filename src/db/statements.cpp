// The text of pgjobd's prepared statements. Values always travel as $n parameters.

#include "db/statements.hpp"

#include "db/sql_text.hpp"

namespace pgjobd::stmt {
namespace {

// One statement claims for every served queue: each queue takes at most its free slots
// (LATERAL), in claim order, skipping rows other daemons hold; the overall LIMIT keeps the
// total within the pool's free slots. The per-queue index makes each branch a short scan.
//
// Unless database.synchronous_claims, the claim commits without waiting for its WAL flush
// ($7 = 'off': synchronous_commit for this transaction only, set inside the statement, so
// no extra round trip and nothing left on a session that PgBouncer may hand to someone
// else; $7 = '' keeps the session's setting). That takes one of the two flushes off the
// pick-up path and off every claim. It cannot lose a job: a claim lost in a server crash
// only leaves the job pending, to be claimed again (a duplicate run, which at-least-once
// allows; the first runner's writes are fenced off by locked_by and attempts). Nor can a
// completion outlive its claim: completions commit synchronously, and flushing their WAL
// flushes the claim's, written before it.
//
// Nothing a row holds can make the claim fail for the others (an application writes these
// rows): attempts stops counting at 1,000,000 (the bound of constraint jobs_attempts_range,
// which a row older than that constraint may exceed), and a non-finite run_at, which the
// constraint jobs_run_at_finite refuses but an older row may hold, counts as waiting since
// 1970. A payload larger than $8 bytes as JSON text is not sent: the job comes back with
// a NULL payload and its size, and ends dead without running. The text is rendered once
// per claimed row, in `b` (OFFSET 0 keeps the planner from copying the cast into each
// place that uses it).
//
// A cancel request belongs to the attempt it was made during (pgjobd_cancel marks only
// running jobs): a new attempt starts without one, so a cancelled job that was retried is
// not stopped again.
//
// A queue paused with pgjobd_pause_queue (a row of pgjobd_queues with paused) gets no slot:
// checked here, in the claim itself, every daemon obeys at its next claim even if it
// missed the NOTIFY, and no job is claimed between a pause and a daemon hearing of it.
// The anti-join only touches the few `slots` rows (one per served queue) and the small
// pgjobd_queues table; the per-queue scans of jobs below are planned as before.
//
// The UPDATE reaches the picked rows through the primary key (`id = ANY (ARRAY(...))`)
// and joins nothing: the payload's text is made from its RETURNING. Joined by
// `j.id = picked.id`, a claim of a thousand rows (worker.prefetch) on a table of 100,000
// was planned as a hash join over a sequential scan of the whole table (45-50 ms per
// claim instead of 11-16); joined beside the `id = ANY`, a plan made while the table was
// empty expected one picked row and compared every claimed row with every picked one
// (a million comparisons, 145 ms, for a claim of 1,000).
//
// The fetcher's session pins its plan (StatementSet): made once, on jobs_claim_idx and
// jobs_pkey whatever the table holds then. Other sessions plan it at each execution: a
// generic plan made on a new, nearly empty table read the picked rows with a sequential
// scan, which it kept doing as the table grew (a steady stream into a new schema fell to
// about 100 jobs/s within seconds, each claim scanning the whole table, 600-1,000 ms,
// until autovacuum's ANALYZE invalidated the plan).
constexpr const char* kClaimSql = R"(
WITH {claim_ctes}
{claim_rows})";

// The claim of a daemon's own claim session (JobStore::claim_with_due): kClaim, and with
// $9 (the served queues, text[]) not empty, a claim that comes back short also says when
// the next job of those queues is due: one more row, its job columns NULL, holding the
// seconds until the earliest pending or failed job of $9 (not paused) and $3 that is not
// due yet (kNextDue's first answer, by the same index probes). A full claim skips the
// probes (a one-time filter on the claimed count). The claim and the probes read one
// snapshot with one now(): every row of those queues they see is either due, and the
// claim took it or skipped it (locked by another session, or no free slot), or it is due
// later and counted here. So this answer needs no look-back, unlike kNextDue's asked after
// the claim (see there), and saves the fetcher that second round trip: at 3,000 jobs/s
// the question followed nearly every claim (bench/README.md). Its plan is pinned on that
// session (StatementSet), made once; behind a transaction pooler, where every statement is
// planned at each execution, the plain kClaim is cheaper to plan (0.5 against 1.1 ms), so
// the store uses that there and the fetcher asks kNextDue when it needs to.
constexpr const char* kClaimWithDueSql = R"(
WITH RECURSIVE {claim_ctes}, short_claim AS (
  SELECT 1 AS short WHERE cardinality($9::text[]) > 0 AND (SELECT count(*) FROM claimed) < $4
), served AS (
  SELECT s.queue FROM short_claim CROSS JOIN unnest($9::text[]) AS s(queue)
  WHERE NOT EXISTS (SELECT 1 FROM {queues} p WHERE p.queue = s.queue AND p.paused)
), {due_priorities}, probes AS (
  SELECT {next_at} AS next_at FROM priorities p WHERE p.priority IS NOT NULL
)
{claim_rows}
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       {due_wait}
FROM (SELECT min(next_at) AS next_at FROM probes) m
WHERE EXISTS (SELECT 1 FROM short_claim))";

// kClaim's parts: its CTEs (the last, `claimed`, the claimed rows) and the rows it returns
// ({due_column}: one more column in kClaimWithDue).
constexpr const char* kClaimCtes = R"(slots AS (
  SELECT * FROM unnest($1::text[], $2::int[]) AS s(queue, free)
  WHERE set_config('synchronous_commit',
                   coalesce(nullif($7::text, ''), current_setting('synchronous_commit')),
                   true) IS NOT NULL
    AND NOT EXISTS (SELECT 1 FROM {queues} p WHERE p.queue = s.queue AND p.paused)
), picked AS (
  SELECT c.id FROM slots CROSS JOIN LATERAL (
    SELECT j.id, j.priority, j.run_at FROM {jobs} j
    WHERE j.queue = slots.queue AND j.status IN ('pending', 'failed') AND j.run_at <= now()
      AND j.type = ANY($3::text[])
    ORDER BY j.priority DESC, j.run_at, j.id
    LIMIT slots.free
    FOR UPDATE OF j SKIP LOCKED
  ) c
  ORDER BY c.priority DESC, c.run_at, c.id
  LIMIT $4
), claimed AS (
  UPDATE {jobs} j
  SET status = 'running', attempts = least(j.attempts, 999999) + 1, locked_by = $5,
      locked_until = now() + $6::bigint * interval '1 millisecond',
      started_at = now(), updated_at = now(), cancel_requested_at = NULL, cancel_reason = NULL
  WHERE j.id = ANY (ARRAY(SELECT p.id FROM picked p))
  RETURNING j.id, j.queue, j.type, j.payload, j.attempts, j.max_attempts, j.priority, j.run_at
))";
constexpr const char* kClaimRows = R"(
SELECT c.id, c.queue, c.type, CASE WHEN octet_length(b.body) <= $8 THEN b.body END,
       c.attempts, c.max_attempts, c.priority,
       extract(epoch FROM now() - greatest(c.run_at, '1970-01-01 00:00:00+00'))::float8,
       octet_length(b.body)::bigint{due_column}
FROM claimed c CROSS JOIN LATERAL (SELECT c.payload::text AS body OFFSET 0) b)";

// When the jobs this daemon could claim become due (the fetcher asks after a short limited
// claim, never after a full one, so a busy daemon does not pay for it; the plain claim
// answers the first half itself, see kClaimWithDueSql): the wait until the first
// one not due yet, and how long ago the last one already due came due, if that was within
// the last $3 microseconds. It sees what the claim sees: the served queues ($1) that are
// not paused, the served types ($2), pending and failed rows. The fetcher tells from the
// second answer whether a due job may have come due after its claim looked (while the
// claim and this question were on their way): such a job was not skipped by the claim,
// and it claims again at once. A job due before the claim looked was: it is locked by
// another session or waits for a slot, and counting it would wake the fetcher over and
// over for nothing. ($3 is the time since the claim began, plus a second: older due jobs
// are not looked at, so a queue with many due jobs of types this daemon does not serve
// costs at most its last second of them.)
//
// The claim index leads with (queue, priority DESC) and only then run_at, so a plain
// min(run_at) per queue reads every live entry of the queue: every job scheduled for
// later, possibly millions. Instead, a loose index scan finds each distinct priority of a
// queue (one index probe each: `priority < previous ORDER BY priority DESC LIMIT 1`), and
// for each (queue, priority) the first future run_at is one more probe of the same index
// (`priority = p AND run_at > now() ORDER BY run_at LIMIT 1`), the last due one another,
// backwards: a few probes per queue whatever the table holds. The type is a filter on
// those probes, so jobs of types this daemon does not serve are read past (as the claim
// reads past due ones).
// The wait is clamped to a day: a run_at of 'infinity' would make the subtraction fail
// ("cannot subtract infinite timestamps"), and the fetcher never waits longer than
// poll.max_interval anyway.
constexpr const char* kNextDueSql = R"(
WITH RECURSIVE served AS (
  SELECT s.queue FROM unnest($1::text[]) AS s(queue)
  WHERE NOT EXISTS (SELECT 1 FROM {queues} p WHERE p.queue = s.queue AND p.paused)
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

// The parts of kNextDue that kClaimWithDue's answer shares (with_due_parts puts them in):
// each distinct priority of each served queue (`served`: a CTE of queue names), the first
// run_at after now() of one (queue, priority) (`p`) among the types `{types}`, and the
// wait until the earliest of those (`next_at`: a column) in seconds.
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
constexpr const char* kNextAt = R"((SELECT j.run_at FROM {jobs} j
          WHERE j.queue = p.queue AND j.status IN ('pending', 'failed') AND j.priority = p.priority
            AND j.run_at > now() AND j.type = ANY({types}::text[])
          ORDER BY j.run_at LIMIT 1))";
constexpr const char* kDueWait =
    R"(CASE WHEN next_at IS NOT NULL  -- least() would turn no job into a day
         THEN extract(epoch FROM least(next_at, now() + interval '1 day') - now())::float8
       END)";

// Writes about jobs found by id (completions, heartbeats) spell the fence's status test
// `(status = 'running') IS TRUE`: the same test, but one the planner cannot match to the
// partial lease index (WHERE status = 'running'). Otherwise, once ANALYZE has seen few
// running rows (a large table of finished jobs, rarely vacuumed), it prefers walking that
// "tiny" index over primary-key lookups, and the walk covers every dead entry since the
// last vacuum: completions slowed to seconds per batch next to 5M done rows.
//
// Completions are fenced: only the owner of this very attempt, while it still runs. One
// statement (one round trip, autocommit) writes a whole batch: done rows from $1/$2;
// failed ('failed' retries after delay_ms), dead and released ('pending': back to the
// queue, the attempt not counted) rows from the parallel arrays $3..$7, and cancelled
// ones (a handler stopped because pgjobd_cancel asked).
// A cancel request on the row (pgjobd_cancel of a running job) wins over every outcome but
// done: the job ends cancelled, never retried, whether or not this daemon heard of the
// request before its handler returned; last_error then gives the request's reason. Each
// attempt that does not end done leaves an entry in attempt_log: who ran it, from when to
// when, how it ended. A done job keeps locked_by instead (its started_at and finished_at
// are the attempt's times): building a JSON entry on every done job cost about 9% of the
// serial claim-and-complete ceiling in the benchmark, keeping a column costs nothing.
// Rows are found with `id = ANY(array)`, always a primary-key lookup, and matched to
// their array slot with array_position. A join with unnest() looks natural but lets the
// planner pick a nested loop over the function scan (quadratic in the batch) or a scan
// of the whole partial lease index, dead versions included: hundreds of ms per batch.
// (Still so as a semi-join `(id, attempts) IN (SELECT * FROM unnest(...))` beside the
// `id = ANY`: right after a bulk enqueue the statistics hold no running row, the planner
// expects one, loops over the function scan, and a backlog went from 33,000 to 3,000-
// 11,000 jobs/s.) array_position is linear in the batch, though, and prefetch's batches
// hold about 1,000 rows: it took a quarter of the completion (9.9 against 7.5 ms per
// 1,000 rows without it). So when every done row of the batch is at the same attempt
// (nearly always: first attempts) the daemon sends that attempt as $9 and the row
// compares with it; $9 = 0 (mixed) falls back to array_position.
constexpr const char* kCompleteOtherCte = R"(
other AS (
  UPDATE {jobs} j
  SET status = {status},
      run_at = CASE {status}
                 WHEN 'failed' THEN now() + ($7::bigint[])[array_position($3::bigint[], j.id)]
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
    AND j.attempts = ($4::int[])[array_position($3::bigint[], j.id)]
    AND j.locked_by = $8 AND (j.status = 'running') IS TRUE
  RETURNING j.id
))";

// Row locks are taken in ascending id order by every statement that writes several of a
// daemon's running jobs (the heartbeat, and the completion): two of them writing the same
// rows in different orders deadlock, and PostgreSQL breaks a deadlock only after
// deadlock_timeout (1 s), long enough for short leases to run out and their jobs to run
// twice. It happened: the pinned completion scanned the primary key in id order while the
// heartbeat, planned at each execution, took a bitmap scan in the rows' physical order.
// A primary-key scan takes an `id = ANY` array in ascending order, so a completion whose
// jobs all succeeded (done) or all did not (other) needs nothing more; one holding both
// would lock the done rows, then the others, so `ordered` first locks them all in id
// order. Its condition on the two arrays makes it a no-op otherwise, and `done` and
// `other` wait for it (the count, an InitPlan, runs before their scans).
//
// An application may hold one of these rows (a `SELECT ... FOR UPDATE`, an uncommitted
// `UPDATE`) for as long as it likes; the completion must not wait for it, or that one row
// holds up every completion of the daemon while it keeps claiming, until leases run out
// and jobs run twice. So the batch statement waits at most $10 for a row lock
// (lock_timeout, set for this statement's transaction only, from inside it, as the
// claim's synchronous_commit: no round trip, nothing left on a session a transaction
// pooler hands on). A lock wait past it fails the statement (SQLSTATE 55P03), writing
// nothing, and the daemon sends the batch again as kCompleteSkipLocked (below). The usual
// batch, whose rows no one else holds, thus costs what it did: no lock pass of its own,
// one set_config (bench/README.md, "Completions past a locked row"). The CASE sets the
// timeout before `done` is read, and `done` and `other` take their locks only when read.
constexpr const char* kCompleteLockCte = R"(
WITH ordered AS (
  SELECT l.id FROM {jobs} l
  WHERE cardinality($1::bigint[]) > 0 AND cardinality($3::bigint[]) > 0
    AND l.id = ANY ($1::bigint[] || $3::bigint[])
  ORDER BY l.id
  FOR UPDATE OF l
),)";
constexpr const char* kCompleteCount = R"(
SELECT CASE WHEN set_config('lock_timeout', $10::text, true) IS NOT NULL
            THEN ((SELECT count(*) FROM done) + (SELECT count(*) FROM other))::int END)";

// The batch again, taking only the rows no other session holds: `ordered` locks them all,
// in id order, skipping held ones, and `done` and `other` write only rows it locked (the
// fence as before). A skipped row that is still ours (id, attempt, worker, running, read
// without a lock from the statement's snapshot: an uncommitted UPDATE still shows the row
// as it was) comes back as held, for the daemon to retry alone a little later; a skipped
// row no longer ours is stale, like any other. Returns the written count (one row, NULL
// id) and a row per held id (NULL count). `held` reads only the skipped ids (EXCEPT, a
// hashed set operation), so the attempt lookup runs for those few rows alone.
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
    AND h.locked_by = $8 AND (h.status = 'running') IS TRUE
)
SELECT ((SELECT count(*) FROM done) + (SELECT count(*) FROM other))::int, NULL::bigint
UNION ALL
SELECT NULL, h.id FROM held h)";
// The rows `done` and `other` write: those of $1 and $3, or in kCompleteSkipLocked only
// those `ordered` locked. (Not both conditions: two `= ANY` arrays on the primary key make
// the scan walk every pair of their elements, 24 ms for two of 1,000.)
constexpr const char* kDoneIds = "$1::bigint[]";
constexpr const char* kOtherIds = "$3::bigint[]";
constexpr const char* kLockedDoneIds =
    "ARRAY(SELECT o.id FROM ordered o WHERE o.id = ANY ($1::bigint[]))";
constexpr const char* kLockedOtherIds =
    "ARRAY(SELECT o.id FROM ordered o WHERE o.id = ANY ($3::bigint[]))";

constexpr const char* kCompleteDoneCte = R"(
done AS (
  UPDATE {jobs} j
  SET status = 'done', finished_at = now(), updated_at = now(), locked_until = NULL
  WHERE (SELECT count(*) FROM ordered) >= 0 AND j.id = ANY ({done_ids})
    AND j.attempts = CASE WHEN $9::int > 0 THEN $9::int
                          ELSE ($2::int[])[array_position($1::bigint[], j.id)] END
    AND j.locked_by = $8 AND (j.status = 'running') IS TRUE
  RETURNING j.id
),)";

// retention.done = 0: done rows are deleted instead of kept.
constexpr const char* kCompleteDeleteDoneCte = R"(
done AS (
  DELETE FROM {jobs} j
  WHERE (SELECT count(*) FROM ordered) >= 0 AND j.id = ANY ({done_ids})
    AND j.attempts = CASE WHEN $9::int > 0 THEN $9::int
                          ELSE ($2::int[])[array_position($1::bigint[], j.id)] END
    AND j.locked_by = $8 AND (j.status = 'running') IS TRUE
  RETURNING j.id
),)";

// The sql handler's completion, in its own transaction.
constexpr const char* kCompleteOneDoneSql = R"(
UPDATE {jobs}
SET status = 'done', finished_at = now(), updated_at = now(), locked_until = NULL
WHERE id = $1 AND attempts = $2 AND locked_by = $3 AND (status = 'running') IS TRUE
RETURNING id)";

constexpr const char* kCompleteOneDeleteSql = R"(
DELETE FROM {jobs}
WHERE id = $1 AND attempts = $2 AND locked_by = $3 AND (status = 'running') IS TRUE
RETURNING id)";

// Also returns whether pgjobd_cancel asked for the job to stop: a daemon that missed the
// NOTIFY learns of a cancel at its next heartbeat at the latest.
// A row another session holds (an application's SELECT ... FOR UPDATE or open UPDATE) is
// skipped, never waited for: waiting stopped the renewal of every other lease behind it.
// Such a row still ours (read from the statement's snapshot, without a lock) comes back
// with renewed = false: its job keeps running on its old lease. Rows are locked in id
// order (see the completion's `ordered`); the UPDATE then finds them held.
constexpr const char* kHeartbeatSql = R"(
WITH mine AS (
  SELECT l.id FROM {jobs} l
  WHERE l.id = ANY ($1::bigint[])
    AND l.attempts = ($2::int[])[array_position($1::bigint[], l.id)]
    AND l.locked_by = $3 AND (l.status = 'running') IS TRUE
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
  AND h.locked_by = $3 AND (h.status = 'running') IS TRUE)";

// Leadership and rescue in one round trip (an idle daemon's budget is a few queries a
// minute). The leader row is taken when free or expired and renewed by its holder; only
// the leader rescues. A job whose owner stopped heartbeating goes back to the queue with
// a backoff, or dies when its attempts are used up, so a job that crashes its daemon
// every time ends dead. The rescue is safe even if two daemons believe they lead.
// The backoff's exponent is clamped like the engine's (retry_policy.cpp): 2^(attempts-1)
// overflows a float8 from about 1,025 attempts, which stopped every rescue. The error
// quotes at most 200 characters of locked_by, which no constraint bounds: a row an
// application wrote with a huge one kept an error of that size, and one over 256 MB (the
// limit of a jsonb string) made every rescue fail.
// $1 worker id, $2 leadership TTL ms, $3 retry base ms, $4 max delay ms, $5 jitter,
// A job whose cancel was requested (pgjobd_cancel) ends cancelled instead: its daemon is
// gone, and nobody wants it run again.
// $6 batch size. Returns (leader, rescued back to the queue, rescued dead, cancelled).
constexpr const char* kLeadAndRescueSql = R"(
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
                    THEN now() + least($3::float8 * power(2, least(greatest(j.attempts - 1, 0), 62)),
                                       $4::float8)
                                 * (1 + $5::float8 * (2 * random() - 1))
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
       (SELECT count(*) FROM rescued WHERE status = 'cancelled')::int)";

// A leader that stops hands over at once instead of after its TTL.
constexpr const char* kResignSql = R"(
DELETE FROM {leader} WHERE role = 'maintenance' AND leader_id = $1)";

// Bounded batches with SKIP LOCKED: short transactions, and several daemons pruning at
// once split the work instead of waiting on each other. Each branch is a range scan of
// jobs_finished_idx in finished_at order from the caller's cursor ($3, $4), so a slice
// reads the rows it deletes, not those its predecessors deleted (their entries stay until
// VACUUM). Planner traps, next to 3M done rows: without the order the plan was a
// sequential scan, which read the whole table (400 MB, 0.58 s) for each pass's last slice;
// without the cursor every slice walked the deleted entries again (10 ms per 300,000:
// minutes of index reads over a 3M backlog); with `status = 'dead'` the generic plan also
// took the dashboard's jobs_queue_status_idx, ANDed two bitmaps and sorted every expired
// dead row per slice (the form below implies only jobs_finished_idx's predicate).
// The dead branch runs only when the done branch comes back short, so a backlog of done
// rows is never walked by it. Returns the count and the next cursors: the last finished_at
// deleted while a branch filled its share, else the end of its range.
constexpr const char* kPruneSql = R"(
WITH old_done AS (
  SELECT id, finished_at FROM {jobs}
  WHERE status IN ('done', 'cancelled')
    AND finished_at >= $3::timestamptz
    AND finished_at < now() - $1::bigint * interval '1 millisecond'
  ORDER BY finished_at
  LIMIT $5
  FOR UPDATE SKIP LOCKED
), old_dead AS (
  SELECT id, finished_at FROM {jobs}
  WHERE status IN ('done', 'dead', 'cancelled') AND status NOT IN ('done', 'cancelled')
    AND finished_at >= $4::timestamptz
    AND finished_at < now() - $2::bigint * interval '1 millisecond'
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

// Live jobs by queue and status, with the age of the oldest due job of each group: one
// query feeds both queue-depth gauges (idle daemons should cost almost nothing). Two
// branches, each matching a partial index (claim: pending/failed; lease: running): a
// single `status IN (pending, failed, running)` matches neither, so it scanned the whole
// table, finished rows included (0.4 s and two parallel workers at 5M done rows, on
// every daemon every 30 s).
// $1: the queues this daemon serves. Only those get gauges, so an application that inserts
// many distinct queue names neither grows /metrics nor is counted here. The filter keeps
// each branch on its index: EXPLAIN ANALYZE (PostgreSQL 15, 1M done rows, 2,000 pending
// and 500 running in 1,000 queues, generic plan) shows a Bitmap Index Scan on
// jobs_claim_idx with `Index Cond: queue = ANY($1)` and an Index Scan on jobs_lease_idx
// filtering queue, 0.2 ms for one queue and 9 ms for all 1,000; no scan of done rows.
// The age is clamped per row to 100 years: a run_at of '-infinity' (an application's
// "as soon as possible") would make `now() - min(run_at)` raise "cannot subtract infinite
// timestamps" and fail the whole query, blinding the gauges of every queue. Clamped
// inside the aggregate, not around it, so a group with nothing due still yields NULL (0).
constexpr const char* kQueueStatsSql = R"(
SELECT queue, status, count(*)::float8,
       coalesce(extract(epoch FROM now() - min(greatest(run_at, now() - interval '100 years'))
         FILTER (WHERE status IN ('pending', 'failed') AND run_at <= now())), 0)::float8
FROM (SELECT queue, status, run_at FROM {jobs}
      WHERE status IN ('pending', 'failed') AND queue = ANY($1::text[])
      UNION ALL
      SELECT queue, status, run_at FROM {jobs}
      WHERE status = 'running' AND queue = ANY($1::text[])) live
GROUP BY queue, status)";

// The served queues ($1) that pgjobd_pause_queue paused, for pgjobd_queue_paused{queue}.
constexpr const char* kPausedQueuesSql = R"(
SELECT queue FROM {queues} WHERE paused AND queue = ANY($1::text[]))";

// A job's `errors` keeps the errors of its last 20 attempts (19 kept plus the one being
// appended; README "Job lifecycle"): a job retried for a long time must not grow its row without
// bound. Reads a non-array value, which constraint jobs_errors_array refuses but an older row may
// hold, as empty instead of failing the whole batch.
constexpr const char* kRecentErrors = R"((CASE
    WHEN jsonb_typeof(j.errors) IS DISTINCT FROM 'array' THEN '[]'::jsonb
    WHEN jsonb_array_length(j.errors) < 19 THEN j.errors
    ELSE (SELECT coalesce(jsonb_agg(e.value ORDER BY e.n), '[]'::jsonb)
          FROM jsonb_array_elements(j.errors) WITH ORDINALITY AS e(value, n)
          WHERE e.n > jsonb_array_length(j.errors) - 19) END))";

// A job's attempt_log keeps its last 20 attempts, the same way (older rows may hold a
// non-array value here too if an application wrote one).
constexpr const char* kRecentAttempts = R"((CASE
    WHEN jsonb_typeof(j.attempt_log) IS DISTINCT FROM 'array' THEN '[]'::jsonb
    WHEN jsonb_array_length(j.attempt_log) < 19 THEN j.attempt_log
    ELSE (SELECT coalesce(jsonb_agg(e.value ORDER BY e.n), '[]'::jsonb)
          FROM jsonb_array_elements(j.attempt_log) WITH ORDINALITY AS e(value, n)
          WHERE e.n > jsonb_array_length(j.attempt_log) - 19) END))";

// The attempt that is ending, as an attempt_log entry; followed by its outcome and `)`.
// locked_by is cut like in the rescue's error: no constraint bounds it.
constexpr const char* kAttemptEntry = R"(jsonb_build_object(
      'attempt', j.attempts, 'by', left(j.locked_by, 200), 'started_at', j.started_at,
      'ended_at', now(), 'outcome',)";

// The completion's status for row j: the outcome the daemon sent, unless a cancel was
// requested (then cancelled). Only in kCompleteOtherCte: done is never overridden.
constexpr const char* kOtherStatus = R"((CASE WHEN j.cancel_requested_at IS NOT NULL
      THEN 'cancelled' ELSE ($5::text[])[array_position($3::bigint[], j.id)] END))";
constexpr const char* kOtherError = "($6::text[])[array_position($3::bigint[], j.id)]";
constexpr const char* kCancelText = "coalesce('cancelled: ' || j.cancel_reason, 'cancelled')";

// The rescue's status and error for row j.
constexpr const char* kRescueStatus =
    R"((CASE WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled'
      WHEN j.attempts >= j.max_attempts THEN 'dead' ELSE 'failed' END))";
constexpr const char* kRescueError = R"((CASE WHEN j.cancel_requested_at IS NOT NULL
      THEN coalesce('cancelled: ' || j.cancel_reason, 'cancelled') || ' (its daemon stopped: lease expired)'
      ELSE 'rescued: lease expired while ' || coalesce(left(j.locked_by, 200), '?') ||
           ' ran attempt ' || j.attempts END))";

// Schedules. The table holds one row per schedule (tens, hundreds): every statement reaches
// its row by the primary key, or reads the whole small table.
constexpr const char* kScheduleLoadSql = R"(
SELECT name, coalesce(cron, ''), coalesce(every_seconds, 0), timezone, type, queue, source,
       enabled, paused, overlap, misfire, misfire_grace_seconds,
       floor(extract(epoch FROM last_tick))::bigint,
       floor(extract(epoch FROM next_tick))::bigint
FROM {schedules} ORDER BY name)";

// The compare-and-set. NOWAIT: a row another session holds (a daemon firing it this very
// moment, or an operator's open transaction around pgjobd_schedule_pause) fails at once
// with lock_not_available, and the scheduler fires the other schedules and asks again
// soon; waiting here stopped every schedule behind one held row. Whoever holds the lock
// fires at most once: a daemon that asks again after the first committed finds last_tick
// moved (and under READ COMMITTED a row updated since the statement's snapshot is
// re-checked before it is locked): no row, nothing written. The timing must also match
// what the caller computed the tick from, so a daemon that has not yet seen a changed
// schedule cannot fire a tick of the old timing. last_tick is compared as whole seconds (a
// row created by now() holds a fraction); `tick > last_tick` keeps it growing whatever the
// caller asks.
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

// Limits (README "Limits", sql/007_limits.up.sql, sql/009_limit_counts.up.sql). The
// limited claim is a function: it takes locks and counts between its statements, which
// one statement cannot express.
constexpr const char* kClaimLimitedSql = R"(
SELECT * FROM {schema}.pgjobd_claim_limited($1::text[], $2::int[], $3::text[], $4::int,
                                            $5::text, $6::bigint, $7::text, $8::bigint))";

constexpr const char* kLimitsSyncSql = R"(
SELECT limit_name, change, coalesce(previous_writer, '')
FROM {schema}.pgjobd_limits_sync($1::jsonb, $2::text))";

// Arrays as JSON text: a type name may hold any character, so no separator is safe.
constexpr const char* kLimitsLoadSql = R"(
SELECT name, coalesce(array_to_json(types)::text, '[]'), coalesce(array_to_json(queues)::text, '[]'),
       coalesce(key, ''), coalesce(concurrency, 0), coalesce(rate_per_second, 0)::float8, burst,
       coalesce(written_by, '')
FROM {limits} ORDER BY name)";

// A job counts against a limit while its row is running (sql/009_limit_counts.up.sql):
// the claim's own count, read among the running rows (the lease index), per limit and
// with its busy partitions.
constexpr const char* kLimitUsageSql = R"(
SELECT l.name, count(j.id)::bigint,
       count(DISTINCT {schema}.pgjobd_limit_part(j.payload, l.key))::bigint
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
// The dashboard's daemons table (sql/008_dashboard.up.sql): one upsert per heartbeat
// interval per daemon, on a table of one row per daemon. The expiry runs on the leader
// only; the table is tiny, so a sequential scan is what it should be.
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

std::string with_table(const char* sql, const std::string& schema) {
  std::string text = sql;
  replace_all(text, "{jobs}", schema + ".jobs");
  replace_all(text, "{leader}", schema + ".pgjobd_leader");
  replace_all(text, "{queues}", schema + ".pgjobd_queues");
  replace_all(text, "{daemons}", schema + ".pgjobd_daemons");
  replace_all(text, "{schedules}", schema + ".pgjobd_schedules");
  replace_all(text, "{limits}", schema + ".pgjobd_limits");
  replace_all(text, "{limit_buckets}", schema + ".pgjobd_limit_buckets");
  replace_all(text, "{schema}", schema);
  replace_all(text, "{recent_errors}", kRecentErrors);
  replace_all(text, "{recent_attempts}", kRecentAttempts);
  replace_all(text, "{attempt_entry}", kAttemptEntry);
  replace_all(text, "{status}", kOtherStatus);
  replace_all(text, "{given_error}", kOtherError);
  replace_all(text, "{cancel_text}", kCancelText);
  replace_all(text, "{rescue_status}", kRescueStatus);
  replace_all(text, "{rescue_error}", kRescueError);
  return text;
}

// A statement holding kNextDue's parts, `types` being the parameter of its job types.
std::string with_due_parts(const char* sql, const char* types, const std::string& schema) {
  std::string text = sql;
  replace_all(text, "{due_priorities}", kDuePriorities);
  replace_all(text, "{next_at}", kNextAt);
  replace_all(text, "{due_wait}", kDueWait);
  replace_all(text, "{types}", types);
  return with_table(text.c_str(), schema);
}

// A claim statement: kClaimSql or kClaimWithDueSql, `due_column` the latter's extra column.
std::string claim_statement(const char* sql, const char* due_column, const std::string& schema) {
  std::string text = sql;
  replace_all(text, "{claim_ctes}", kClaimCtes);
  replace_all(text, "{claim_rows}", kClaimRows);
  replace_all(text, "{due_column}", due_column);
  return with_due_parts(text.c_str(), "$3", schema);
}

// A batch completion: its done CTE, then the others'; waiting for held rows at most $10
// (kComplete) or skipping them (skip_locked: kCompleteSkipLocked).
std::string completion(const char* done_cte, bool skip_locked, const std::string& schema) {
  std::string text = std::string(skip_locked ? kCompleteSkipLockedCte : kCompleteLockCte) +
                     done_cte + kCompleteOtherCte + (skip_locked ? kCompleteHeld : kCompleteCount);
  replace_all(text, "{done_ids}", skip_locked ? kLockedDoneIds : kDoneIds);
  replace_all(text, "{other_ids}", skip_locked ? kLockedOtherIds : kOtherIds);
  return with_table(text.c_str(), schema);
}

}  // namespace

std::vector<Statement> job_statements(const std::string& schema) {
  return {
      {kClaim, claim_statement(kClaimSql, "", schema)},
      {kClaimWithDue, claim_statement(kClaimWithDueSql, ", NULL::float8", schema)},
      {kNextDue, with_due_parts(kNextDueSql, "$2", schema)},
      {kComplete, completion(kCompleteDoneCte, false, schema)},
      {kCompleteDeleteDone, completion(kCompleteDeleteDoneCte, false, schema)},
      {kCompleteSkipLocked, completion(kCompleteDoneCte, true, schema)},
      {kCompleteDeleteDoneSkipLocked, completion(kCompleteDeleteDoneCte, true, schema)},
      {kCompleteOneDone, with_table(kCompleteOneDoneSql, schema)},
      {kCompleteOneDelete, with_table(kCompleteOneDeleteSql, schema)},
      {kHeartbeat, with_table(kHeartbeatSql, schema)},
      {kLeadAndRescue, with_table(kLeadAndRescueSql, schema)},
      {kResign, with_table(kResignSql, schema)},
      {kPrune, with_table(kPruneSql, schema)},
      {kQueueStats, with_table(kQueueStatsSql, schema)},
      {kPausedQueues, with_table(kPausedQueuesSql, schema)},
      {kClaimLimited, with_table(kClaimLimitedSql, schema)},
      {kLimitsSync, with_table(kLimitsSyncSql, schema)},
      {kLimitsLoad, with_table(kLimitsLoadSql, schema)},
      {kLimitUsage, with_table(kLimitUsageSql, schema)},
      {kLimitGarbage, with_table(kLimitGarbageSql, schema)},
      {kDaemonReport, with_table(kDaemonReportSql, schema)},
      {kDaemonRemove, with_table(kDaemonRemoveSql, schema)},
      {kDaemonExpire, with_table(kDaemonExpireSql, schema)},
  };
}

std::vector<Statement> schedule_statements(const std::string& schema) {
  return {
      {kScheduleLoad, with_table(kScheduleLoadSql, schema)},
      {kScheduleLock, with_table(kScheduleLockSql, schema)},
      {kScheduleHolder, with_table(kScheduleHolderSql, schema)},
      {kScheduleLockTimeout, kScheduleLockTimeoutSql},
      {kScheduleInsertJob, with_table(kScheduleInsertJobSql, schema)},
      {kScheduleAdvance, with_table(kScheduleAdvanceSql, schema)},
      {kScheduleSqlHeld, with_table(kScheduleSqlHeldSql, schema)},
      {kScheduleUpsertYaml, with_table(kScheduleUpsertYamlSql, schema)},
      {kScheduleDeleteYaml, with_table(kScheduleDeleteYamlSql, schema)},
  };
}

}  // namespace pgjobd::stmt
