#pragma once
// The maintenance leadership (a row with a TTL) and, as leader, the rescue of jobs whose
// owner stopped heartbeating and the deletion of the daemons table's expired rows. Every
// daemon takes or renews the leadership at the rescue interval; a leader that exits
// cleanly resigns. Each statement is safe even when two daemons believe they lead (SKIP
// LOCKED, fenced updates). Retention reads leader() to prune only on the leader.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include "engine/maintenance_loop.hpp"
#include "engine/worker_pool.hpp"
#include "limits/limit_registry.hpp"
#include "metrics/metrics.hpp"
#include "pgjobd/config.hpp"
#include "store/maintenance_stores.hpp"

namespace pgjobd {

class Leadership final : public MaintenanceTask {
 public:
  // limits: the fetcher's count of claims a limit held back (busy, not idle), or null.
  Leadership(const Config& config, std::string worker_id, std::shared_ptr<LeadershipStore> store,
             const WorkerPool& pool, Metrics& metrics, const LimitRegistry* limits);

  // This daemon held the leadership at its last pass. Any thread.
  bool leader() const { return leader_.load(std::memory_order_acquire); }

  void begin(Clock::time_point now) override;
  Clock::time_point due() const override { return next_rescue_; }
  void run(Clock::time_point now, const std::stop_token& stop, MaintenanceCalls& calls) override;
  void finish(MaintenanceCalls& calls) override;  // resigns, when leader

  // An idle daemon (nothing running, nothing started since its last pass) leads and
  // rescues at most this often, whatever the lease: its cost stays at a query per 5 s.
  static constexpr std::chrono::seconds kIdleRescueInterval{5};
  // The leader deletes the daemons table's expired rows this often (hidden from the
  // dashboard already; the deletion only keeps the table small).
  static constexpr std::chrono::seconds kDaemonExpiryInterval{60};
  static constexpr int kRescueBatch = 1000;

 private:
  void lead_and_rescue(std::chrono::milliseconds interval);
  // The time to the next leadership pass: rescue_interval_ while this daemon has work,
  // kIdleRescueInterval (if longer) once it has none.
  std::chrono::milliseconds next_rescue_interval();

  const std::string worker_id_;
  const RetryConfig retry_;
  const std::shared_ptr<LeadershipStore> store_;
  const WorkerPool& pool_;
  Metrics& metrics_;
  const LimitRegistry* const limits_;
  const std::chrono::milliseconds rescue_interval_;
  std::atomic<bool> leader_{false};  // written by the loop's thread only
  // The loop's thread only.
  Clock::time_point next_rescue_{};
  Clock::time_point next_expiry_{};  // once leader
  // None before the first pass, which never counts as idle.
  std::uint64_t submitted_at_last_pass_ = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t holds_at_last_pass_ = 0;  // LimitRegistry::holds() then
};

}  // namespace pgjobd
