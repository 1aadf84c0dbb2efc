#pragma once
// Periodic work on a connection of its own: the maintenance leadership (a row with a TTL),
// and as leader the rescue of jobs whose owner stopped heartbeating and retention pruning;
// on every daemon the queue statistics and schema check behind the metrics and /readyz, the
// limits sync, and this daemon's row in the dashboard's daemons table (reported at the
// heartbeat interval while its busy count changes, else once per lease; expired ones deleted
// by the leader, its own deleted on a clean exit). Each statement is safe even when two
// daemons believe they lead (SKIP LOCKED, fenced updates). Lease heartbeats are not here:
// LeaseRenewer sends them on a thread and session of their own, so nothing this loop waits
// for can cost a lease.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/health.hpp"
#include "engine/worker_pool.hpp"
#include "limits/limit_registry.hpp"
#include "metrics/metrics.hpp"
#include "runtime/service.hpp"
#include "store/job_store.hpp"

namespace pgjobd {

class Maintenance final : public Service {
 public:
  Maintenance(const Config& config, std::string worker_id, std::unique_ptr<JobStore> store,
              WorkerPool& pool, Metrics& metrics, Health& health);
  ~Maintenance() override;  // stop()
  Maintenance(const Maintenance&) = delete;
  Maintenance& operator=(const Maintenance&) = delete;

  void start() override;
  void request_stop() override;
  void join() override;  // the loop resigns leadership on its way out

  void set_retention(const RetentionConfig& retention);  // live reload
  // Live reload: the queues whose statistics feed the gauges (worker.queues). The next
  // statistics round starts at once, so a new queue's gauges do not wait kStatsInterval.
  void set_queues(std::vector<std::string> queues);
  // Limits (README "Limits"): the maintenance loop writes this daemon's and reads
  // everyone's back every heartbeat interval and on request_limits_sync(), reports their
  // use in pgjobd_limit_running and, as leader, deletes idle partitions' rows. Set before
  // start(); prepare_limits() does the first sync on the caller's thread, so the first
  // claim already knows whether limits exist (a failure is logged and retried by the loop;
  // meanwhile the registry says active, the safe answer). A write that another session's
  // lock keeps out costs at most 200 ms (the function's lock_timeout) and is retried
  // within a second. Without it the loop syncs at once.
  void set_limits(LimitRegistry* limits);
  void prepare_limits();
  // Now rather than at the next interval: a reload changed the section, or another
  // daemon's write was announced (NOTIFY pgjobd_limits).
  void request_limits_sync();

  static constexpr std::chrono::seconds kStatsInterval{30};
  static constexpr std::chrono::seconds kPruneInterval{60};
  // The engine checks the schema at start; later checks only catch a concurrent
  // migration or downgrade, so they can be rare.
  static constexpr std::chrono::seconds kSchemaCheckInterval{300};
  // An idle daemon (nothing running, nothing started since its last pass) leads and
  // rescues at most this often, whatever the lease: its cost stays at a query per 5 s.
  static constexpr std::chrono::seconds kIdleRescueInterval{5};
  // The leader deletes the daemons table's expired rows this often (hidden from the
  // dashboard already; the deletion only keeps the table small).
  static constexpr std::chrono::seconds kDaemonExpiryInterval{60};
  static constexpr int kRescueBatch = 1000;
  // Retention (bench/README.md "Retention backlog"): expired rows are deleted in slices of
  // kPruneSlice rows, each a short transaction (2-15 ms next to millions of rows). A pass
  // starts no slice after kPrunePassBudget; then the loop's other duties run and the claim
  // path has the database to itself for at least kPrunePause before the next pass. Only
  // once a slice comes back short does the next pass wait kPruneInterval. Retention so
  // holds at most about half of one session: 3M expired rows took 34-86 s beside 64 busy
  // workers, whose throughput kept a median 93% of a control run's, against 74% with
  // passes back to back.
  static constexpr int kPruneSlice = 1000;
  static constexpr std::chrono::milliseconds kPrunePassBudget{100};
  static constexpr std::chrono::milliseconds kPrunePause{100};
  // A keyed limit's partition with nothing running and nothing taken for this long has
  // its rows deleted (they are recreated when needed).
  static constexpr std::chrono::minutes kLimitPartitionIdle{10};

 private:
  void run(const std::stop_token& stop);
  void lead_and_rescue(std::chrono::milliseconds interval);
  // The time to the next leadership pass: rescue_interval_ while this daemon has work,
  // kIdleRescueInterval (if longer) once it has none.
  std::chrono::milliseconds next_rescue_interval();
  // One pass: slices until none is left (false) or kPrunePassBudget is spent (true).
  bool prune(const std::stop_token& stop);
  void collect_stats();
  void check_schema();
  void sync_limits();
  void report_daemon();
  // Runs one task, turning a database error into a log line, a metric and a backoff.
  template <typename Task>
  void guarded(const char* operation, Task&& task);

  const Config config_;  // retention and queues are read from retention_, queues_ (reloadable)
  const std::string worker_id_;
  WorkerPool& pool_;
  Metrics& metrics_;
  Health& health_;
  const std::unique_ptr<JobStore> store_;
  const std::chrono::milliseconds heartbeat_interval_;
  const std::chrono::milliseconds rescue_interval_;
  DaemonReport daemon_;  // maintenance thread only (busy changes at each report)
  // Maintenance thread only; none before the first report.
  std::optional<std::chrono::steady_clock::time_point> last_daemon_report_;
  bool leader_ = false;  // maintenance thread only
  // The last database call failed (maintenance thread, and prepare_limits before start).
  bool last_call_failed_ = false;
  // Maintenance thread only; none before the first pass, which never counts as idle.
  std::uint64_t submitted_at_last_pass_ = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t holds_at_last_pass_ = 0;  // LimitRegistry::holds() then
  bool limits_prepared_ = false;          // set before start()
  // Maintenance thread only: since when prune passes follow each other without a rest
  // (rows expired faster than one pass deletes), and how many they deleted.
  std::optional<std::chrono::steady_clock::time_point> prune_backlog_since_;
  std::int64_t prune_backlog_deleted_ = 0;

  mutable std::mutex mutex_;  // guards the members below up to limits_
  RetentionConfig retention_;
  std::vector<std::string> queues_;
  bool stats_requested_ = false;      // set_queues: run the statistics now
  bool limits_requested_ = false;     // request_limits_sync: sync limits now
  LimitRegistry* limits_ = nullptr;   // set before start
  std::condition_variable_any wake_;  // the loop's wait; set_queues and the stop token end it
  ServiceThread thread_;              // last: joined before the members it uses go away
};

}  // namespace pgjobd
