// The dependency repair: batches of parents resolved on the leader, a minute apart, or at
// once after a pass that ran out of budget with parents left.

#include "engine/dependency_repair.hpp"

#include <spdlog/spdlog.h>

namespace pgjobd {

DependencyRepair::DependencyRepair(std::shared_ptr<DependencyStore> store,
                                   const Leadership& leadership)
    : store_(std::move(store)), leadership_(leadership) {}

void DependencyRepair::run(Clock::time_point now, const std::stop_token& stop,
                           MaintenanceCalls& calls) {
  bool more = false;
  if (leadership_.leader()) {
    calls.guarded("dependency repair", [&] {
      const auto started = Clock::now();
      int resolved = 0;
      more = true;
      while (more && !stop.stop_requested() && Clock::now() - started < kPassBudget) {
        const int n = store_->repair_dependencies(kBatch);
        resolved += n;
        more = n == kBatch;
      }
      if (resolved > 0) {
        spdlog::warn(
            "dependencies: resolved {} parent(s) that had ended without their trigger firing "
            "(triggers disabled, session_replication_role = replica?)",
            resolved);
      }
    });
  }
  // After a failed call, the interval: going on at once would retry a broken database in a
  // loop.
  if (calls.last_failed()) more = false;
  next_ = more ? Clock::now() : now + kInterval;
}

}  // namespace pgjobd
