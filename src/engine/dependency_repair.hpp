#pragma once
// The dependency repair, on the leader only: resolves blocked jobs' parents that ended or
// were deleted without the trigger that resolves them firing (README "Dependencies":
// triggers off during a restore with session_replication_role = replica). Normally it finds
// nothing. It runs on the retention loop and session: the leader's occasional work, which
// the leadership, rescue and statistics never wait for.

#include <chrono>
#include <memory>

#include "engine/leadership.hpp"
#include "engine/maintenance_loop.hpp"
#include "store/maintenance_stores.hpp"

namespace pgjobd {

class DependencyRepair final : public MaintenanceTask {
 public:
  DependencyRepair(std::shared_ptr<DependencyStore> store, const Leadership& leadership);

  void begin(Clock::time_point now) override { next_ = now + kFirstRepairAfter; }
  Clock::time_point due() const override { return next_; }
  void run(Clock::time_point now, const std::stop_token& stop, MaintenanceCalls& calls) override;

  static constexpr std::chrono::seconds kInterval{60};
  // The first pass: once the leadership is known.
  static constexpr std::chrono::seconds kFirstRepairAfter{5};
  // Parents resolved per call; a full batch is followed by the next at once (within the
  // pass budget), as retention's slices are.
  static constexpr int kBatch = 1000;
  static constexpr std::chrono::milliseconds kPassBudget{100};

 private:
  const std::shared_ptr<DependencyStore> store_;
  const Leadership& leadership_;
  Clock::time_point next_{};  // the loop's thread only
};

}  // namespace pgjobd
