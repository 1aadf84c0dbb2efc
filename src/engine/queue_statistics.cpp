// QueueStatistics: a statistics round per interval (or at once after a reload), a schema
// check now and then.

#include "engine/queue_statistics.hpp"

#include <algorithm>
#include <map>

namespace pgjobd {

QueueStatistics::QueueStatistics(std::vector<std::string> queues,
                                 std::shared_ptr<StatisticsStore> store, const WorkerPool& pool,
                                 Metrics& metrics, Health& health)
    : store_(std::move(store)),
      pool_(pool),
      metrics_(metrics),
      health_(health),
      queues_(std::move(queues)) {}

void QueueStatistics::set_queues(std::vector<std::string> queues) {
  {
    std::lock_guard lock(mutex_);
    queues_ = std::move(queues);
  }
  requested_ = true;
  wake_loop();
}

void QueueStatistics::begin(Clock::time_point now) {
  next_stats_ = now;
  next_schema_check_ = now + kSchemaCheckInterval;
}

QueueStatistics::Clock::time_point QueueStatistics::due() const {
  // A requested round is due since the steady clock's epoch: long past, and no overflow in
  // the loop's wait.
  if (requested_) return Clock::time_point{};
  return std::min(next_stats_, next_schema_check_);
}

void QueueStatistics::run(Clock::time_point now, const std::stop_token& /*stop*/,
                          MaintenanceCalls& calls) {
  if (requested_.exchange(false) || now >= next_stats_) {
    calls.guarded("stats", [&] { collect_stats(); });
    next_stats_ = now + kStatsInterval;
  }
  if (now >= next_schema_check_) {
    calls.guarded("schema check", [&] { check_schema(); });
    next_schema_check_ = now + kSchemaCheckInterval;
  }
}

void QueueStatistics::collect_stats() {
  std::vector<std::string> queues;
  {
    std::lock_guard lock(mutex_);
    queues = queues_;
  }
  std::vector<Metrics::DepthRow> depth;
  std::map<std::string, double> oldest;
  std::vector<std::pair<std::string, double>> blocked;
  // Only the served queues: the metrics keep no series for any other (see Metrics).
  for (auto& row : store_->queue_stats(queues)) {
    if (row.status == "blocked") {  // waits for its parents: neither depth nor due
      blocked.emplace_back(row.queue, row.count);
      continue;
    }
    depth.push_back({row.queue, row.status, row.count});
    oldest[row.queue] = std::max(oldest[row.queue], row.oldest_due_age_seconds);
  }
  const auto paused = store_->paused_queues(queues);
  health_.clear("database");
  metrics_.set_queue_depth(depth);
  metrics_.set_oldest_due_age({oldest.begin(), oldest.end()});
  metrics_.set_queue_paused(paused);
  metrics_.set_queue_blocked(blocked);
  metrics_.set_workers_busy(pool_.working());
  metrics_.set_jobs_held(pool_.held());
}

void QueueStatistics::check_schema() { health_.set_problem("schema", store_->schema_problem()); }

}  // namespace pgjobd
