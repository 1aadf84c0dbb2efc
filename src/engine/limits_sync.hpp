#pragma once
// Limits (README "Limits"): writes this daemon's `limits:` section and reads everyone's back
// every heartbeat interval and on request(), and reports their use in
// pgjobd_limit_running. A write that another session's lock keeps out costs at most 200 ms
// (the function's lock_timeout) and is retried within a second.

#include <atomic>
#include <chrono>
#include <memory>

#include "engine/maintenance_loop.hpp"
#include "limits/limit_registry.hpp"
#include "metrics/metrics.hpp"
#include "store/limit_store.hpp"

namespace pgjobd {

class LimitsSync final : public MaintenanceTask {
 public:
  LimitsSync(Millis lease, std::shared_ptr<LimitStore> store, LimitRegistry& limits,
             Metrics& metrics);

  // The first sync, before the loop starts, on the caller's thread through the loop's
  // `calls`: the first claim then already knows whether limits exist. A failure is logged
  // and retried by the loop (meanwhile the registry says active, the safe answer). Without
  // it the loop syncs at once.
  void prepare(MaintenanceCalls& calls);
  // Now rather than at the next interval, from any thread: a reload changed the section,
  // or another daemon's write was announced (NOTIFY pgjobd_limits).
  void request();

  void begin(Clock::time_point now) override;
  Clock::time_point due() const override;
  void run(Clock::time_point now, const std::stop_token& stop, MaintenanceCalls& calls) override;

 private:
  void sync();
  // The heartbeat interval, or a second while a write is pending (it failed, or another
  // session's lock kept it out): retried soon, not a heartbeat interval later.
  Millis interval() const;

  const std::shared_ptr<LimitStore> store_;
  LimitRegistry& limits_;
  Metrics& metrics_;
  const Millis heartbeat_interval_;
  bool prepared_ = false;          // set before the loop starts
  Clock::time_point next_sync_{};  // the loop's thread
  std::atomic<bool> requested_{false};
};

}  // namespace pgjobd
