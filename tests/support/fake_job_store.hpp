#pragma once
// In-memory stand-ins for JobStore and Database, so the engine's parts are unit-tested
// without PostgreSQL. One FakeJobTable holds the rows and a record of every call; each
// FakeJobStore (one per engine part, as in production) works on it. A test can make a
// method fail (DbError, connection lost) for its next N calls, or hold its calls until
// released, and wait for any condition on the table without sleeping.
//
// The fake keeps the rules the engine relies on (claim limits and slots, fencing by worker
// and attempt, heartbeats return what is still ours, a pending row's run_at on the steady
// clock) and nothing else: retention is a count of expired rows (set_prune_backlog), and
// a retried row is not claimed again.

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "store/database.hpp"
#include "store/job_store.hpp"
#include "support/engine_printers.hpp"
#include "support/fake_schedule_store.hpp"

namespace pgjobd::testing {

enum class StoreMethod {
  kClaim,
  kComplete,
  kRunAndComplete,
  kHeartbeat,
  kLeadAndRescue,
  kResign,
  kPrune,
  kRepairDependencies,
  kQueueStats,
  kPausedQueues,
  kSchemaProblem,
  kNextDue,
  kClaimLimited,
  kSyncLimits,
  kLoadLimits,
  kLimitUsage,
  kLimitGarbage,
  kReportDaemon,
  kRemoveDaemon,
  kExpireDaemons,
  kSyncDeadLetters,
  kClaimIds,
  kAnnounceFinished,
};
// Counted from the last method, so that a method added at the end cannot outgrow the arrays.
inline constexpr std::size_t kStoreMethodCount =
    static_cast<std::size_t>(StoreMethod::kAnnounceFinished) + 1;

enum class FakeStatus { kPending, kRunning, kDone, kFailed, kDead, kCancelled };

struct FakeRow {
  Job job;  // job.attempt: attempts started so far (0 until first claimed)
  FakeStatus status = FakeStatus::kPending;
  std::string locked_by;
  int times_claimed = 0;
  bool deleted = false;  // completed with delete_done
  std::string last_error;
  Millis retry_delay{0};
  bool cancel_requested = false;  // request_cancel() while it ran
  // Not claimed before this time; next_due() reports it while it is in the future, or
  // since, within its look_back.
  std::chrono::steady_clock::time_point run_at{};
  std::chrono::steady_clock::time_point claimed_at{};  // by the last claim
};

// A row of the daemons table, as report_daemon() left it.
struct FakeDaemonRow {
  DaemonReport report;
  std::chrono::steady_clock::time_point seen_at{};
  int reports = 0;  // report_daemon() calls for this id
};

struct CompleteCall {
  std::vector<Completion> batch;
  std::string worker_id;
  bool delete_done = false;
};

// The shared state behind every FakeJobStore of one FakeDatabase. Thread-safe.
class FakeJobTable {
 public:
  using Clock = std::chrono::steady_clock;

  // Rows. Ids count up from 1 in insertion order, which is also the claim order within
  // one priority.
  std::int64_t add_job(const std::string& type, const std::string& queue = "default",
                       int priority = 0, int max_attempts = 5);
  std::vector<std::int64_t> add_jobs(int n, const std::string& type,
                                     const std::string& queue = "default");
  // A job due at `run_at` (a delayed job, as an INSERT with a future run_at).
  std::int64_t add_job_at(const std::string& type, Clock::time_point run_at,
                          const std::string& queue = "default");
  FakeRow row(std::int64_t id) const;  // throws std::out_of_range for an unknown id
  int count(FakeStatus status) const;
  // Another daemon took the job over (its lease expired, it was rescued and claimed
  // again): the attempt we hold is no longer ours, so heartbeats and completions for it
  // are fenced off.
  void take_over(std::int64_t id, const std::string& other_worker = "other-daemon");
  // As pgjobd_cancel: a pending or failed job is cancelled; a running one is marked, which
  // heartbeats report and which turns its completion (but done) into cancelled. Returns
  // the status left, by name.
  std::string request_cancel(std::int64_t id);

  // Faults. fail_next: the next `n` calls of `method` throw DbError(connection_lost), or,
  // given a sqlstate, a server's refusal with that code (a read-only server: "25006").
  // block: calls of `method` wait (before doing anything) until unblock(); a test's
  // TearDown should unblock_all(), or a part's join() waits forever.
  void fail_next(StoreMethod method, int n, const std::string& sqlstate = {});
  // The next `n` calls of `method` throw std::runtime_error, not a DbError: a bug or a
  // library's own exception, which a loop must survive as it survives a database error.
  void throw_next(StoreMethod method, int n);
  void block(StoreMethod method);
  // block() for the calls made through the stores opened for `role` only (Database::
  // open_store's: "fetcher", "maintenance", ...); unblock() ends both kinds.
  void block_role(StoreMethod method, const std::string& role);
  void unblock(StoreMethod method);
  void unblock_all();
  int held(StoreMethod method) const;  // calls waiting in block() now
  // A row the database refuses: every complete() whose batch holds job `id` throws a data
  // error (DbError, sqlstate 22008, not connection_lost), writing nothing of that batch,
  // as one out-of-range interval makes PostgreSQL roll back the whole transaction.
  void poison_completion(std::int64_t id);
  // Another session holds the row's lock (an application's open transaction), until
  // release_row(): complete() and heartbeat() leave it as it is and report it held while it
  // is still ours (complete(): stale otherwise), writing the rest of their batch.
  void hold_row(std::int64_t id);
  void release_row(std::int64_t id);
  // Held for the next complete() that meets it only, as the daemon's own heartbeat holds a
  // row for the milliseconds of its write.
  void hold_row_once(std::int64_t id);
  void set_leader(bool leader);  // what lead_and_rescue reports (default: leader)
  // Retention: `rows` finished rows past retention, which prune() deletes up to its batch
  // size per call, each call taking `per_slice` (as a DELETE does); none by default.
  void set_prune_backlog(int rows, Millis per_slice = Millis(0));
  int prune_backlog() const;  // rows left
  void set_schema_problem(std::string problem);
  // What the next complete() reports it made due (CompletionReport's last three fields).
  void set_completion_news(std::vector<std::int64_t> unblocked, bool other_due, int notify_pid);
  // A store that breaks its contract, to show the engine does not trust it: claim()
  // returns pending rows whatever their queue and type (still within request.limit), and
  // queue_stats() returns `rows` whatever queues it was asked for.
  void set_claim_ignores_filters(bool ignore);
  void set_queue_stats(std::vector<QueueStatsRow> rows);
  // Paused queues: claim() skips them and next_due() leaves them out, as the real
  // statements do; paused_queues() reports those of them it is asked about.
  void set_paused_queues(std::vector<std::string> queues);
  // Limits. The table keeps the definitions sync_limits() writes (or set_limits() puts)
  // and claim_limited() applies the unkeyed concurrency limits by type, as the real claim
  // does: a limit's jobs run at most `concurrency` at once, counting every worker's, and
  // a claim that left one of its jobs behind reports it held. A rate hold is scripted:
  // while set, the limit's jobs are not claimed and are reported held for `retry_in`.
  void set_limits(std::vector<LimitDefinition> limits);
  std::vector<LimitDefinition> limits() const;
  void set_rate_hold(const std::string& limit, std::optional<std::chrono::microseconds> retry_in);
  std::vector<std::map<std::string, LimitConfig>> limit_syncs() const;  // each sync's limits
  // Each sync_dead_letters() call's settings (it writes nothing and reports no overwrite).
  std::vector<std::map<std::string, DeadLetterConfig>> dead_letter_syncs() const;
  // While `holder` is non-empty, sync_limits() writes nothing and answers busy with it, as
  // the real one does when another session holds the limits' lock.
  void set_limits_busy(std::string holder);

  // What was asked. calls() counts every call that started, failed ones included.
  int calls(StoreMethod method) const;
  std::vector<Clock::time_point> call_times(StoreMethod method) const;
  std::vector<ClaimRequest> claim_requests() const;
  // Of the kClaim calls, those made with claim(): no answer of when the next job is due.
  int plain_claims() const;
  // Batches written (not those that failed; without the rows found held).
  std::vector<CompleteCall> completed() const;
  std::vector<Completion> completions() const;                 // all written completions, in order
  std::vector<std::vector<JobAttempt>> heartbeats() const;     // each set asked for (sorted)
  std::vector<std::string> resigned() const;                   // worker ids
  std::vector<std::string> opened_roles() const;               // Database::open_store
  std::map<std::string, StoreUse> opened_uses() const;         // by role, the last one's
  std::vector<std::vector<std::string>> stats_queues() const;  // queue_stats' queues, per call
  // The daemons table: rows by worker id. expire_daemons() deletes rows whose ttl passed
  // on the steady clock.
  std::map<std::string, FakeDaemonRow> daemons() const;
  // Another daemon's row, last reported `seen_ago` ago.
  void add_daemon(const DaemonReport& report, Millis seen_ago = Millis(0));
  // The payloads announce_finished() sent on pgjobd_finished, each call's in order.
  std::vector<std::vector<std::string>> announced() const;
  int listen_sessions_opened() const;
  int listen_sessions_closed() const;
  int notifications_delivered() const;  // handed to on_notify by Notifications::consume

  // Waits until `condition` (which may call this table's accessors) holds, re-checking
  // after every change to the table; false after `timeout`.
  bool wait_until(const std::function<bool()>& condition,
                  std::chrono::milliseconds timeout = std::chrono::seconds(20)) const;
  // Shorthands: until `method` has been called `n` times in all / `n` calls are held.
  bool wait_calls(StoreMethod method, int n,
                  std::chrono::milliseconds timeout = std::chrono::seconds(20)) const;
  bool wait_held(StoreMethod method, int n = 1,
                 std::chrono::milliseconds timeout = std::chrono::seconds(20)) const;

 private:
  friend class FakeJobStore;
  friend class FakeDatabase;
  friend class FakeNotifications;

  // Each store method starts here: counts the call, waits while blocked, then throws if a
  // failure is pending. Returns with the lock held.
  std::unique_lock<std::mutex> enter(StoreMethod method, const std::string& role = {});
  void changed();                  // under the lock: wakes waiters
  FakeRow* find(std::int64_t id);  // under the lock
  bool owned(const FakeRow& row, const JobAttempt& job, const std::string& worker) const;

  mutable std::mutex mutex_;
  mutable std::condition_variable cv_;
  std::uint64_t version_ = 0;  // bumped on every change; wait_until waits for it to move
  std::map<std::int64_t, FakeRow> rows_;
  std::int64_t next_id_ = 1;
  std::array<int, kStoreMethodCount> calls_{};
  std::array<int, kStoreMethodCount> fail_{};
  std::array<std::string, kStoreMethodCount> fail_sqlstate_{};  // empty: connection lost
  std::array<int, kStoreMethodCount> throw_{};                  // throw_next()
  std::array<bool, kStoreMethodCount> blocked_{};
  std::array<std::set<std::string>, kStoreMethodCount> blocked_roles_{};
  std::array<int, kStoreMethodCount> held_{};
  std::array<std::vector<Clock::time_point>, kStoreMethodCount> call_times_;
  std::set<std::int64_t> poisoned_;       // complete() refuses batches holding these ids
  std::set<std::int64_t> row_held_;       // hold_row()
  std::set<std::int64_t> row_held_once_;  // hold_row_once()
  bool leader_ = true;
  int prune_backlog_ = 0;
  Millis prune_per_slice_{0};
  std::string schema_problem_;
  CompletionReport completion_news_;
  bool claim_ignores_filters_ = false;
  std::optional<std::vector<QueueStatsRow>> stats_override_;
  std::vector<std::string> paused_queues_;
  std::vector<LimitDefinition> limits_;
  std::map<std::string, std::chrono::microseconds> rate_holds_;
  std::vector<std::map<std::string, LimitConfig>> limit_syncs_;
  std::vector<std::map<std::string, DeadLetterConfig>> dead_letter_syncs_;
  std::string limits_busy_;
  std::vector<std::vector<std::string>> stats_queues_;
  std::vector<ClaimRequest> claim_requests_;
  int plain_claims_ = 0;
  std::vector<CompleteCall> completed_;
  std::vector<std::vector<JobAttempt>> heartbeats_;
  std::vector<std::vector<std::string>> announced_;
  std::vector<std::string> resigned_;
  std::map<std::string, FakeDaemonRow> daemons_;
  std::vector<std::string> opened_roles_;
  std::map<std::string, StoreUse> opened_uses_;
  // Open LISTEN sessions: an eventfd each, with what was sent to it and not yet consumed.
  std::map<int, std::deque<NotifyChannel>> sessions_;
  int listen_opened_ = 0;
  int listen_closed_ = 0;
  int delivered_ = 0;
};

// One "connection" to the table. Like PgJobStore, it is used by one thread at a time.
class FakeJobStore final : public JobStore {
 public:
  explicit FakeJobStore(std::shared_ptr<FakeJobTable> table, std::string role = {})
      : table_(std::move(table)), role_(std::move(role)) {}

  std::vector<Job> claim(const ClaimRequest& request) override;
  ClaimWithDue claim_with_due(const ClaimRequest& request,
                              const std::vector<std::string>& due_queues) override;
  LimitedClaim claim_limited(const ClaimRequest& request) override;
  std::vector<Job> claim_ids(const ClaimRequest& request,
                             const std::vector<std::int64_t>& ids) override;
  DueTimes next_due(const std::vector<std::string>& queues, const std::vector<std::string>& types,
                    std::chrono::microseconds look_back) override;
  CompletionReport complete(const std::vector<Completion>& batch, const std::string& worker_id,
                            bool delete_done) override;
  bool run_and_complete(const std::string& sql, const Job& job, const std::string& worker_id,
                        bool delete_done, Millis timeout, std::size_t max_result_bytes,
                        std::stop_token stop) override;
  HeartbeatReport heartbeat(const std::vector<JobAttempt>& jobs, const std::string& worker_id,
                            Millis lease) override;
  RescueReport lead_and_rescue(const std::string& worker_id, Millis leadership_ttl,
                               const RetryConfig& retry, int batch_size) override;
  void resign(const std::string& worker_id) override;
  int prune(const RetentionConfig& retention, int batch_size) override;
  std::vector<QueueStatsRow> queue_stats(const std::vector<std::string>& queues) override;
  std::vector<std::string> paused_queues(const std::vector<std::string>& queues) override;
  LimitSync sync_limits(const std::map<std::string, LimitConfig>& limits,
                        const std::string& writer) override;
  std::vector<LimitDefinition> load_limits() override;
  std::vector<LimitUsage> limit_usage() override;
  int collect_limit_garbage(Millis idle, int batch_size) override;
  int repair_dependencies(int batch_size) override;
  void report_daemon(const DaemonReport& report) override;
  void remove_daemon(const std::string& worker_id) override;
  int expire_daemons() override;
  std::vector<DeadLetterOverwrite> sync_dead_letters(
      const std::map<std::string, DeadLetterConfig>& dead_letters,
      const std::vector<std::string>& served, const std::string& writer) override;
  void announce_finished(const std::vector<std::string>& payloads) override;
  std::string schema_problem() override;

 private:
  // The claim, under the table's lock; with `limited`, it applies the table's limits and
  // records what held jobs back; with `only`, it takes none but those ids.
  std::vector<Job> claim_locked(const ClaimRequest& request, std::vector<LimitHold>* held,
                                FakeJobTable::Clock::time_point now,
                                const std::vector<std::int64_t>* only = nullptr);
  // next_due's answer at `now`, due jobs counted since `since` (under the table's lock).
  DueTimes due_locked(const std::vector<std::string>& queues, const std::vector<std::string>& types,
                      FakeJobTable::Clock::time_point now,
                      FakeJobTable::Clock::time_point since) const;

  const std::shared_ptr<FakeJobTable> table_;
  const std::string role_;  // what it was opened for (FakeJobTable::block_role)
};

// A Database whose stores share one FakeJobTable and whose LISTEN sessions the test
// triggers with notify().
class FakeDatabase final : public Database {
 public:
  FakeDatabase()
      : table_(std::make_shared<FakeJobTable>()),
        schedules_(std::make_shared<FakeScheduleTable>()) {}

  FakeJobTable& table() { return *table_; }
  FakeScheduleTable& schedules() { return *schedules_; }

  std::unique_ptr<JobStore> open_store(const std::string& role, StoreUse use) override;
  std::unique_ptr<ScheduleStore> open_schedule_store(const std::string& role) override;
  std::unique_ptr<Notifications> listen() override;
  SchemaReport prepare_schema(bool migrate, const std::function<bool()>& stop_requested) override;

  // One notification to every open LISTEN session (as the INSERT trigger's NOTIFY, or
  // pgjobd_cancel's).
  void notify(NotifyChannel channel = NotifyChannel::kJobs);

 private:
  const std::shared_ptr<FakeJobTable> table_;
  const std::shared_ptr<FakeScheduleTable> schedules_;
};

}  // namespace pgjobd::testing
