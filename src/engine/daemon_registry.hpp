#pragma once
// This daemon's row in the dashboard's daemons table: reported at the start, then at the
// heartbeat interval while its busy count changes and once per lease otherwise; deleted on
// a clean exit. (Expired rows of other daemons are the leader's upkeep: Leadership.)

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "engine/maintenance_loop.hpp"
#include "engine/worker_pool.hpp"
#include "pgjobd/config.hpp"
#include "store/maintenance_stores.hpp"

namespace pgjobd {

class DaemonRegistry final : public MaintenanceTask {
 public:
  DaemonRegistry(const Config& config, const std::string& worker_id,
                 std::shared_ptr<DaemonRegistryStore> store, const WorkerPool& pool);

  void begin(Clock::time_point now) override;
  Clock::time_point due() const override { return next_report_; }
  void run(Clock::time_point now, const std::stop_token& stop, MaintenanceCalls& calls) override;
  void finish(MaintenanceCalls& calls) override;  // deletes the row

 private:
  void report();

  const std::shared_ptr<DaemonRegistryStore> store_;
  const WorkerPool& pool_;
  const Millis lease_;
  const Millis interval_;  // the heartbeat interval
  DaemonReport daemon_;    // the loop's thread (busy changes at each report)
  // The loop's thread; none before the first report.
  std::optional<Clock::time_point> last_report_;
  Clock::time_point next_report_{};
};

}  // namespace pgjobd
