// Retention: prune passes on the leader, a short pause between passes of a backlog, a
// minute between the others.

#include "engine/retention.hpp"

#include <spdlog/spdlog.h>

namespace pgjobd {

Retention::Retention(const RetentionConfig& retention, std::shared_ptr<RetentionStore> store,
                     const Leadership& leadership, const LimitRegistry* limits)
    : store_(std::move(store)), leadership_(leadership), limits_(limits), retention_(retention) {}

void Retention::set_retention(const RetentionConfig& retention) {
  std::lock_guard lock(mutex_);
  retention_ = retention;
}

void Retention::begin(Clock::time_point now) { next_prune_ = now + kFirstPruneAfter; }

void Retention::run(Clock::time_point now, const std::stop_token& stop, MaintenanceCalls& calls) {
  bool backlog = false;
  if (leadership_.leader()) calls.guarded("prune", [&] { backlog = prune(stop); });
  // A backlog goes on after a pause counted from the pass's end: time the claim path has
  // the database to itself. A follower waits an interval too: left due, the loop would
  // wake at once, again and again.
  next_prune_ = backlog ? Clock::now() + kPrunePause : now + kPruneInterval;
}

bool Retention::prune(const std::stop_token& stop) {
  RetentionConfig retention;
  {
    std::lock_guard lock(mutex_);
    retention = retention_;
  }
  const auto started = Clock::now();
  if (!backlog_since_ && limits_ != nullptr && limits_->active()) {
    // Once per interval (not per pass of a backlog): idle partitions are not urgent.
    const int removed = store_->collect_limit_garbage(kLimitPartitionIdle, kPruneSlice);
    if (removed > 0) spdlog::debug("limits: deleted {} idle partition row(s)", removed);
  }
  int deleted = 0;
  bool more = true;
  while (more && !stop.stop_requested() && Clock::now() - started < kPrunePassBudget) {
    const int n = store_->prune(retention, kPruneSlice);
    deleted += n;
    more = n == kPruneSlice;
  }
  backlog_deleted_ += deleted;
  if (more) {
    if (!backlog_since_) {
      backlog_since_ = started;
      spdlog::info("retention: more expired jobs than one pass deletes; deleting them in slices");
    }
    return true;
  }
  if (backlog_deleted_ > 0) {
    const std::chrono::duration<double> took = Clock::now() - backlog_since_.value_or(started);
    spdlog::info("retention: deleted {} finished job(s) in {:.1f} s", backlog_deleted_,
                 took.count());
  }
  backlog_since_.reset();
  backlog_deleted_ = 0;
  return false;
}

}  // namespace pgjobd
