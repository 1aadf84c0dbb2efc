#pragma once
// Every SQL statement pgjobd runs against the jobs table, named and prepared once per
// connection (or sent unnamed each time behind a transaction pooler: database.pooler).
// `{jobs}`, `{leader}`, `{daemons}` in the text stand for the quoted, schema-qualified tables.

#include <string>
#include <string_view>
#include <vector>

namespace pgjobd::stmt {

// Claim, while no limit exists: $1 queues text[], $2 free slots per queue int[], $3 types
// text[], $4 total limit, $5 worker id, $6 lease ms, $7 synchronous_commit for the claim
// ('off', or '' to keep the session's), $8 largest payload read (bytes). Returns the
// claimed jobs; or, when pgjobd_limits holds a row in the claim's snapshot, claims nothing
// and returns one row whose columns are all NULL (the claim must be the limited one).
inline constexpr const char* kClaim = "pgjobd_claim";
// The same claim, $9 served queues text[] ('{}': ask nothing). Returns the claimed jobs
// (columns 0..8; 9 and 10 are NULL) and, after a short claim with $9 given or when a limit
// exists, one more row, its job columns NULL, whose column 9 is kNextDue's first answer for
// $9 and $3 and column 10 whether a limit exists (then nothing was claimed).
inline constexpr const char* kClaimWithDue = "pgjobd_claim_with_due";
// The claim of given jobs: kClaim's $1..$8, $9 ids bigint[]. Claims those of $9 that kClaim
// could (due, of a served queue not paused and a served type, within the queue's free slots
// and $4), found by id: the completer names the children its batch unblocked (Fetcher).
// Returns the claimed jobs, or the row of NULLs, as kClaim.
inline constexpr const char* kClaimIds = "pgjobd_claim_ids";
// kClaim without its check for limits: the claim within the room kClaimRoom gave, in its
// transaction. Returns the claimed jobs.
inline constexpr const char* kClaimInRoom = "pgjobd_claim_in_room";
// The wait until the next job not yet due: $1 queues text[], $2 types text[], $3 look-back
// in microseconds (bigint). Returns one row: seconds (float8) until the earliest future
// run_at of a pending or failed job of those queues (not paused) and types, at most a day,
// NULL when there is none; and seconds since the latest run_at already due within the
// look-back, NULL when there is none.
inline constexpr const char* kNextDue = "pgjobd_next_due";
// Complete a batch: $1 done ids bigint[], $2 their attempts int[]; for failed, dead and
// released (and cancelled) jobs the parallel arrays $3 ids, $4 attempts, $5 new status
// text[] ('failed', 'dead', 'pending' or 'cancelled'), $6 errors text[], $7 retry delays in
// ms bigint[]; $8 worker id; $9 the done rows' common attempt (0: they differ, $2 says);
// $10 the done rows' results jsonb[] parallel to $1 (NULL elements: none; NULL: none has
// one); $11 the longest wait for a row lock another session holds (lock_timeout text,
// '50ms'). A row with a cancel request ends cancelled unless done. Returns one row: the
// number of rows written, the ids (bigint[] text) of the blocked children whose last parent
// it ended done, and whether a job ended dead or a parent cancelled (bool: the triggers may
// have made other jobs due). Fails with SQLSTATE 55P03 (lock_not_available), writing
// nothing, when a row stayed locked for $11: then send kCompleteSkipLocked.
inline constexpr const char* kComplete = "pgjobd_complete";
// Same, deleting done rows instead of keeping them (retention.done = 0): $10 is unused, and
// only the count comes back (the row triggers resolve the children).
inline constexpr const char* kCompleteDeleteDone = "pgjobd_complete_delete_done";
// kComplete's $1..$10 (no $11), never waiting: writes the rows no other session holds and
// returns their count (one row: count, NULL), then one row (NULL, id) per held row that is
// still this attempt's (a row held and no longer ours counts as neither: stale).
inline constexpr const char* kCompleteSkipLocked = "pgjobd_complete_skip_locked";
// Same, deleting done rows (retention.done = 0).
inline constexpr const char* kCompleteDeleteDoneSkipLocked =
    "pgjobd_complete_delete_done_skip_locked";
// One job done inside the sql handler's own transaction: $1 id, $2 attempt, $3 worker id,
// $4 its result (jsonb, NULL for none). Returns the id when the job was still ours.
inline constexpr const char* kCompleteOneDone = "pgjobd_complete_one_done";
// Same, deleting the row (retention.done = 0), result and all ($4 unused).
inline constexpr const char* kCompleteOneDelete = "pgjobd_complete_one_delete";
// Lease heartbeat: $1 ids, $2 attempts, $3 worker id, $4 lease ms. Returns (id, attempt,
// cancel requested, renewed) for each of those jobs still ours: renewed is false for a row
// another session holds locked (skipped, not waited for).
inline constexpr const char* kHeartbeat = "pgjobd_heartbeat";
// Take or renew leadership and, as leader, rescue expired leases: $1 worker id, $2 TTL ms,
// $3 retry base ms, $4 max delay ms, $5 jitter, $6 batch. Returns (leader, failed, dead,
// cancelled).
inline constexpr const char* kLeadAndRescue = "pgjobd_lead_and_rescue";
// Give up leadership: $1 worker id.
inline constexpr const char* kResign = "pgjobd_resign";
// Retention: delete up to $5 finished rows; done/cancelled older than $1 ms finished at
// or after $3 (timestamptz), dead older than $2 ms finished at or after $4. Returns the
// number deleted and the next $3 and $4 (text), for the next slice of the same pass.
inline constexpr const char* kPrune = "pgjobd_prune";
// The dependency repair: resolve up to $1 parents that ended or vanished while a blocked
// child's edge to them is unresolved. Returns how many parents.
inline constexpr const char* kRepairDependencies = "pgjobd_repair_dependencies";
// Live (pending, failed, running) and blocked jobs of the queues $1 (text[]) by queue and
// status, each count stopping at $2 (bigint), and the age in seconds of each queue's
// oldest due job on the row of its status (0 on the others).
inline constexpr const char* kQueueStats = "pgjobd_queue_stats";
// Before kQueueStats, in its transaction: plans without sequential or bitmap scans and
// without sorts, so that each count walks its index in order and stops at its bound.
inline constexpr const char* kQueueStatsPlanning = "pgjobd_queue_stats_planning";
// handlers.TYPE.dead_letter (README "Dead letters"): $1 jsonb {type: {"type": target,
// "queue": queue | null}}, $2 text[] the daemon's handler types, $3 writer. Upserts $1,
// deletes the other rows of $2's types; returns the rows another writer had written
// differently: type, 'changed' | 'removed', its target type, target queue ('' = none),
// writer.
inline constexpr const char* kDeadLettersSync = "pgjobd_dead_letters_sync";
// The queues of $1 (text[]) paused with pgjobd_pause_queue.
inline constexpr const char* kPausedQueues = "pgjobd_paused_queues";
// The daemons table: $1 worker id, $2 host, $3 pid, $4 version, $5 concurrency, $6 busy,
// $7 ttl ms. Upsert, keeping started_at.
inline constexpr const char* kDaemonReport = "pgjobd_daemon_report";
// $1 worker id.
inline constexpr const char* kDaemonRemove = "pgjobd_daemon_remove";
// Deletes expired rows; returns how many (one row).
inline constexpr const char* kDaemonExpire = "pgjobd_daemon_expire";
// Announce finished jobs: sends each of $1 (text[], JSON payloads) on pgjobd_finished, in a
// transaction of its own that commits without waiting for its WAL flush. Returns the count.
inline constexpr const char* kNotifyFinished = "pgjobd_notify_finished";

// Limits (README "Limits"). The claim when limits exist: $1..$8 as kClaim's, $9 how many of
// the claimed jobs start at once (NULL: all; ClaimRequest::startable), $10 how many jobs
// the daemon holds whose handlers have not returned (NULL: not told;
// ClaimRequest::own_running). Returns the
// claimed jobs as kClaim does, then a row per limit that held a job back: NULL job
// columns, limit name, reason ('concurrency' or 'rate'), seconds until its next token.
inline constexpr const char* kClaimLimited = "pgjobd_claim_limited";
// The room of the one limit a claim meets, when it is one unkeyed concurrency limit without
// a rate: $1 served queues text[], $2 served types text[], $3 worker id, $4 own_running
// (NULL: not told). Takes the limit's lock for the transaction and returns (limit name,
// room >= 1); no row otherwise (sql/functions/pgjobd_claim_room.sql). The claim that
// follows in the transaction is kClaim, cut at the room.
inline constexpr const char* kClaimRoom = "pgjobd_claim_room";
// Write a daemon's limits: $1 jsonb {name: {types, queues, key, concurrency,
// rate_per_second, rate_text, burst}}, $2 writer. Returns (name, change, previous writer), or one
// row (NULL, 'busy', what holds the lock) when another session's lock kept it from writing
// (sql/functions/pgjobd_limits_sync.sql).
inline constexpr const char* kLimitsSync = "pgjobd_limits_sync";
// Every limit: name, types (JSON), queues (JSON), key, concurrency, rate_per_second, burst,
// written_by, the rate as written ('' / 0 for none; '' too for a row an older daemon wrote).
inline constexpr const char* kLimitsLoad = "pgjobd_limits_load";
// Per limit: name, running jobs (concurrency limits), partitions with a running job.
inline constexpr const char* kLimitUsage = "pgjobd_limit_usage";
// Delete idle partitions' full buckets: $1 idle ms, $2 batch. Returns the number of rows
// deleted.
inline constexpr const char* kLimitGarbage = "pgjobd_limit_garbage";

// Schedules (README "Recurring jobs"). Times travel as whole seconds since the epoch.
// Load every schedule: name, cron, every_seconds, timezone, type, queue, source, enabled,
// paused, overlap, misfire, misfire_grace_seconds, last_tick, next_tick (NULL or seconds),
// priority, max_attempts, payload (JSON text).
inline constexpr const char* kScheduleLoad = "pgjobd_schedule_load";
// Fire, step 1, the compare-and-set's lock: $1 name, $2 expected last_tick, $3 tick,
// $4 cron ('' = none), $5 every_seconds (0 = none), $6 timezone. One row (true when the
// previous tick's job is still live and overlap is skip) when the row is as expected;
// none otherwise. Locks the row until the transaction ends; fails with lock_not_available
// (55P03) at once when another session holds it.
inline constexpr const char* kScheduleLock = "pgjobd_schedule_lock";
// The pid of the session holding schedule $1's row (no row when unknown).
inline constexpr const char* kScheduleHolder = "pgjobd_schedule_holder";
// SET LOCAL lock_timeout to $1 (text, e.g. '1000ms').
inline constexpr const char* kScheduleLockTimeout = "pgjobd_schedule_lock_timeout";
// Fire, step 2: insert the tick's job from the row: $1 name, $2 tick, $3 late. Returns
// the job's id (no row if a live job holds its unique_key).
inline constexpr const char* kScheduleInsertJob = "pgjobd_schedule_insert_job";
// Fire, step 3: $1 name, $2 tick, $3 next tick (-1 = unknown), $4 job id (0 = none).
inline constexpr const char* kScheduleAdvance = "pgjobd_schedule_advance";
// Reconcile: the names of $1 (text[]) held by schedules of source 'sql'.
inline constexpr const char* kScheduleSqlHeld = "pgjobd_schedule_sql_held";
// Reconcile: insert or update one YAML schedule: $1 name, $2 cron, $3 every_seconds,
// $4 timezone, $5 type, $6 queue, $7 priority, $8 max_attempts, $9 payload (JSON text),
// $10 overlap, $11 misfire, $12 misfire_grace_seconds, $13 enabled. Returns one row
// (true = inserted) when something changed.
inline constexpr const char* kScheduleUpsertYaml = "pgjobd_schedule_upsert_yaml";
// Reconcile: delete the YAML schedules not named in $1 (text[]). Returns their names.
inline constexpr const char* kScheduleDeleteYaml = "pgjobd_schedule_delete_yaml";

// `sql` with the placeholders {jobs}, {leader}, {queues}, {daemons}, {schedules}, {limits},
// {limit_buckets} and {audit} naming the tables of `schema` (already quoted), and {schema}
// the schema itself.
std::string with_tables(std::string sql, const std::string& schema);

struct Statement {
  const char* name;
  std::string sql;
};

// The statement of `statements` called `name`. Throws std::logic_error for a name not
// among them. Found by text: the same name's literal may sit at another address in
// another object file.
const Statement& statement_named(const std::vector<Statement>& statements, std::string_view name);

// All statements for a schema (already quoted): {jobs}, {leader} and {queues} name its
// tables.
std::vector<Statement> job_statements(const std::string& schema);

// EXPLAIN (FORMAT JSON) of the rows of queue $1 with status $2 in the schema (already
// quoted): the planner's estimate of their number. Not among job_statements: an EXPLAIN
// cannot be PREPAREd, so it runs as an unnamed statement.
std::string queue_depth_estimate(const std::string& schema);

// The schedule statements for a schema (already quoted).
std::vector<Statement> schedule_statements(const std::string& schema);

}  // namespace pgjobd::stmt
