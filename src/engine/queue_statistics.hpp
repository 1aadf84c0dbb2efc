#pragma once
// The queue statistics behind the gauges (depth, oldest due job, paused queues, busy and
// held workers) every kStatsInterval, and the schema check behind /readyz every
// kSchemaCheckInterval, on every daemon.

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/health.hpp"
#include "engine/maintenance_loop.hpp"
#include "engine/worker_pool.hpp"
#include "metrics/metrics.hpp"
#include "store/maintenance_stores.hpp"

namespace pgjobd {

class QueueStatistics final : public MaintenanceTask {
 public:
  // queues: worker.queues, whose statistics feed the gauges.
  QueueStatistics(std::vector<std::string> queues, std::shared_ptr<StatisticsStore> store,
                  const WorkerPool& pool, Metrics& metrics, Health& health);

  // Live reload (worker.queues), any thread. The next round starts at once, so a new
  // queue's gauges do not wait kStatsInterval.
  void set_queues(std::vector<std::string> queues);

  void begin(Clock::time_point now) override;
  Clock::time_point due() const override;
  void run(Clock::time_point now, const std::stop_token& stop, MaintenanceCalls& calls) override;

  static constexpr std::chrono::seconds kStatsInterval{30};
  // The engine checks the schema at start; later checks only catch a concurrent
  // migration or downgrade, so they can be rare.
  static constexpr std::chrono::seconds kSchemaCheckInterval{300};

 private:
  void collect_stats();
  void check_schema();

  const std::shared_ptr<StatisticsStore> store_;
  const WorkerPool& pool_;
  Metrics& metrics_;
  Health& health_;
  // The loop's thread only.
  Clock::time_point next_stats_{};
  Clock::time_point next_schema_check_{};

  std::atomic<bool> requested_{false};  // set_queues: a round now
  std::mutex mutex_;                    // guards queues_
  std::vector<std::string> queues_;
};

}  // namespace pgjobd
