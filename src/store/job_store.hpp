#pragma once
// The engine's seam to the database: what one connection can do with the jobs table.
// src/db/ implements it over PostgreSQL (PgJobStore); tests/support/ has a fake, so the
// engine's parts are unit-tested without a server. Every method throws DbError on
// failure; an implementation reconnects by itself on its next call.
//
// A store is used by one thread at a time (libpq connections are not shared); every
// engine part that talks to the database is given a store of its own.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "pgjobd/config.hpp"
#include "pgjobd/job.hpp"
#include "store/db_error.hpp"
#include "store/job_attempt.hpp"

namespace pgjobd {

struct QueueSlots {
  std::string queue;
  int free = 0;
};

// What one claim asks for.
struct ClaimRequest {
  std::vector<QueueSlots> slots;   // free slots per queue
  std::vector<std::string> types;  // job types that have a handler
  int limit = 0;                   // at most this many jobs in all
  std::string worker_id;
  Millis lease{0};
  // A larger payload is not read: its job comes back with oversized_payload_bytes set.
  std::int64_t max_payload_bytes = std::int64_t{4} << 20;
};

// A finished attempt, as the completer writes it.
struct Completion {
  JobAttempt job;
  Outcome outcome = Outcome::kDone;
  std::string error;      // retry / dead
  Millis retry_delay{0};  // retry
};

struct CompletionReport {
  int written = 0;
  int stale = 0;  // fenced off: the job is no longer ours (rescued, re-claimed)
  // Not written because another session holds the row's lock, and still ours (the same
  // attempt, running, locked by this worker): to be sent again later. Neither written nor
  // stale.
  std::vector<JobAttempt> held;
};

struct RescueReport {
  bool leader = false;  // this daemon holds the maintenance leadership
  int failed = 0;       // back in the queue for another attempt
  int dead = 0;         // attempts used up
  int cancelled = 0;    // pgjobd_cancel had asked for them to stop
};

struct HeartbeatReport {
  std::vector<JobAttempt> kept;  // still ours: leases extended
  // Still ours, but another session holds the row locked: not renewed this time (the
  // heartbeat does not wait for it).
  std::vector<JobAttempt> held;
  // Of those kept or held, the ones pgjobd_cancel asked to stop.
  std::vector<JobAttempt> cancel_requested;
};

struct QueueStatsRow {
  std::string queue;
  std::string status;
  double count = 0;
  double oldest_due_age_seconds = 0;  // 0 when nothing in the group is due
};

// A limit as the database holds it (README "Limits"): what every daemon applies.
struct LimitDefinition {
  std::string name;
  LimitConfig limit;  // rate is left empty: rate_per_second holds it
  std::string written_by;

  bool operator==(const LimitDefinition&) const = default;
};

// One change sync_limits made: change is "added", "changed" or "removed".
struct LimitChange {
  std::string name;
  std::string change;
  std::string previous_writer;  // who wrote the definition it replaced ("" for added)
};

// What sync_limits did: wrote the limits (changes), or wrote nothing because another
// session held a lock it needs for longer than the function waits (README "Limits").
struct LimitSync {
  std::vector<LimitChange> changes;
  std::string busy;  // non-empty when nothing was written: what holds the lock
};

// A limit that held back at least one due job in a claim.
struct LimitHold {
  std::string limit;
  std::string reason;  // "concurrency" or "rate"
  // rate: when the partition's next token is due; the claim is worth making again then.
  std::optional<std::chrono::microseconds> retry_in;
};

// What JobStore::next_due saw, at one moment of the database's clock.
struct DueTimes {
  // How long until the earliest job not due yet is. Nothing when there is none.
  std::optional<std::chrono::microseconds> next_in;
  // How long ago the job that came due last did, if within the look_back asked for (the
  // time since the claim began, and a margin). A due job the claim skipped is locked by
  // another session or has no slot, and waking for it again would only spin; but one that
  // came due after the claim looked was not skipped, and only this tells them apart.
  std::optional<std::chrono::microseconds> last_due_ago;
};

// A claim and, when it came back short, when the next job is due (JobStore::claim_with_due).
struct ClaimWithDue {
  std::vector<Job> jobs;
  // Set when the claim took fewer than request.limit jobs and the store answered; nothing
  // after a full claim.
  std::optional<DueTimes> due;
};

struct LimitedClaim {
  std::vector<Job> jobs;
  std::vector<LimitHold> held;
};

// A limit's use now: slots held (jobs running under it) over all its partitions.
struct LimitUsage {
  std::string name;
  std::int64_t running = 0;
  std::int64_t partitions = 0;  // partitions with a running job
};

// This daemon, as the dashboard's daemons table shows it (README "Dashboard").
struct DaemonReport {
  std::string id;  // the worker id
  std::string host;
  std::int64_t pid = 0;
  std::string version;
  int concurrency = 0;
  int busy = 0;   // jobs running now
  Millis ttl{0};  // the row stops being shown this long after the report (3 × lease)
};

class JobStore {
 public:
  virtual ~JobStore() = default;

  // Starts setting up the session in the background, so that the first statement does not
  // wait for all of it; a failure shows at that first statement, as it would have without.
  // Called at most once, before any other method. The default does nothing.
  virtual void connect_ahead() {}

  // Claims due jobs: at most request.limit in all and slots[i].free of queue slots[i].
  virtual std::vector<Job> claim(const ClaimRequest& request) = 0;

  // The claim, and, when it comes back short, the answer next_due(due_queues,
  // request.types) would give, in the same round trip and from the claim's own snapshot
  // and clock. A job the claim did not take for being due later is then next_in; nothing
  // can have come due after the claim looked, so last_due_ago is never set. A full claim
  // asks nothing: a daemon working off a backlog does not pay for the question. A store
  // may leave even a short claim unanswered (PgJobStore behind a transaction pooler, where
  // the plain claim is cheaper to plan); the caller then asks next_due.
  virtual ClaimWithDue claim_with_due(const ClaimRequest& request,
                                      const std::vector<std::string>& due_queues) = 0;

  // The claim when limits exist: the same request, each job also taking a slot or token of
  // every limit it matches; jobs whose limits have no room stay (README "Limits").
  virtual LimitedClaim claim_limited(const ClaimRequest& request) = 0;

  // When the jobs this daemon could claim become due: the pending or failed jobs of
  // `queues` (paused ones left out) whose type is one of `types`. The fetcher asks after a
  // claim that came back short, so that it wakes when the next job is due instead of at
  // its next poll, and so that it claims again at once for a job that came due after the
  // claim looked (see DueTimes).
  virtual DueTimes next_due(const std::vector<std::string>& queues,
                            const std::vector<std::string>& types,
                            std::chrono::microseconds look_back) = 0;

  // Writes a batch in one transaction, each fenced by worker and attempt, without waiting
  // (beyond a few tens of milliseconds) for a row another session holds: such rows are
  // left as they are and reported held.
  // delete_done: remove done rows instead of keeping them (retention.done = 0).
  virtual CompletionReport complete(const std::vector<Completion>& batch,
                                    const std::string& worker_id, bool delete_done) = 0;

  // The sql handler's exactly-once step: in one transaction, runs `sql` with $1 = the
  // payload (jsonb) and $2 = the job id, then marks the job done (or deletes it) fenced by
  // worker and attempt. Returns false, changing nothing, when the job is no longer ours.
  // A request on `stop` cancels the running statement. `timeout` > 0 bounds the statement.
  virtual bool run_and_complete(const std::string& sql, const Job& job,
                                const std::string& worker_id, bool delete_done, Millis timeout,
                                std::stop_token stop) = 0;

  // Extends the lease of these attempts; returns those still ours (renewed, or held by
  // another session's row lock and left as they are), and which of them have a cancel
  // request. Never waits for another session's lock.
  virtual HeartbeatReport heartbeat(const std::vector<JobAttempt>& jobs,
                                    const std::string& worker_id, Millis lease) = 0;

  // Takes or renews the maintenance leadership for `leadership_ttl` and, when leader,
  // returns up to batch_size jobs whose lease expired to the queue (or, when a cancel was
  // requested, ends them cancelled).
  virtual RescueReport lead_and_rescue(const std::string& worker_id, Millis leadership_ttl,
                                       const RetryConfig& retry, int batch_size) = 0;
  // Hands leadership over at once (a clean shutdown).
  virtual void resign(const std::string& worker_id) = 0;

  // Deletes one batch of finished jobs past retention; returns how many. Successive calls
  // continue where the last one stopped until one returns fewer than batch_size.
  virtual int prune(const RetentionConfig& retention, int batch_size) = 0;

  // Live (pending, failed, running) jobs of `queues` by queue and status; other queues'
  // rows are neither returned nor counted.
  virtual std::vector<QueueStatsRow> queue_stats(const std::vector<std::string>& queues) = 0;

  // Those of `queues` that are paused (pgjobd_pause_queue), for the pgjobd_queue_paused
  // gauge. The claim itself skips paused queues; this only reports them.
  virtual std::vector<std::string> paused_queues(const std::vector<std::string>& queues) = 0;

  // Makes the database's limits exactly `limits` (a daemon's `limits:` section), marking
  // them written by `writer`; returns what changed, or that another session's lock kept it
  // from writing (it waits for a lock 200 ms at most).
  virtual LimitSync sync_limits(const std::map<std::string, LimitConfig>& limits,
                                const std::string& writer) = 0;
  // The limits every daemon applies, by name.
  virtual std::vector<LimitDefinition> load_limits() = 0;
  // Each limit's use now.
  virtual std::vector<LimitUsage> limit_usage() = 0;
  // Deletes up to batch_size bucket rows that say nothing any more: partitions of keyed
  // rate limits idle for longer than `idle`. Returns how many.
  virtual int collect_limit_garbage(Millis idle, int batch_size) = 0;
  // Upserts this daemon's row in the daemons table: seen now, shown until report.ttl from
  // now; started_at stays that of the first report.
  virtual void report_daemon(const DaemonReport& report) = 0;
  // Deletes the daemon's row (a clean exit).
  virtual void remove_daemon(const std::string& worker_id) = 0;
  // Deletes the rows of daemons whose ttl has passed (the leader's upkeep); returns how many.
  virtual int expire_daemons() = 0;

  // Empty when the schema is current; else what is wrong (never throws for that).
  virtual std::string schema_problem() = 0;
};

}  // namespace pgjobd
