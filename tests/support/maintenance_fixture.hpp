#pragma once
// A fixture for the maintenance services (leadership, daemon registry, queue statistics,
// retention): a PoolFixture and the services started as a daemon wires them (Maintenance).

#include <memory>
#include <string>
#include <vector>

#include "engine/maintenance.hpp"
#include "limits/limit_registry.hpp"
#include "support/pool_fixture.hpp"

namespace pgjobd::testing {

class MaintenanceFixture : public PoolFixture {
 protected:
  // A lease of 300 ms: a leadership pass every 100 ms, so a test sees several in well
  // under a second; nothing here depends on how long the lease actually is.
  Maintenance& start_maintenance(const std::vector<std::string>& queues = {"default"},
                                 LimitRegistry* limits = nullptr) {
    Config config;
    config.lease.duration = Millis(300);
    config.worker.queues.clear();
    for (const auto& queue : queues) config.worker.queues[queue];
    maintenance_ = std::make_unique<Maintenance>(config, "worker-1", database_, *pool_, metrics_,
                                                 health_, limits);
    maintenance_->start();
    return *maintenance_;
  }

  std::unique_ptr<Maintenance> maintenance_;  // last: stopped before the pool
};

}  // namespace pgjobd::testing
