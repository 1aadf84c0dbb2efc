#pragma once
// Retention, on the leader only: deletes finished jobs past retention.done / retention.dead,
// and the rows of keyed limits' idle partitions. A pass is the longest work of maintenance,
// so it runs on a loop and a session of its own (Maintenance): the leadership, rescue and
// statistics never wait for it. The session connects on the first pass, so a follower
// never opens it.

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "engine/leadership.hpp"
#include "engine/maintenance_loop.hpp"
#include "limits/limit_registry.hpp"
#include "pgjobd/config.hpp"
#include "store/maintenance_stores.hpp"

namespace pgjobd {

class Retention final : public MaintenanceTask {
 public:
  // limits: whether limits exist (their garbage is collected then), or null.
  Retention(const RetentionConfig& retention, std::shared_ptr<RetentionStore> store,
            const Leadership& leadership, const LimitRegistry* limits);

  void set_retention(const RetentionConfig& retention);  // live reload, any thread

  void begin(Clock::time_point now) override;
  Clock::time_point due() const override { return next_prune_; }
  void run(Clock::time_point now, const std::stop_token& stop, MaintenanceCalls& calls) override;

  static constexpr std::chrono::seconds kPruneInterval{60};
  // The first pass: a few seconds after the start, once the leadership is known.
  static constexpr std::chrono::seconds kFirstPruneAfter{5};
  // Retention (bench/README.md "Retention backlog"): expired rows are deleted in slices of
  // kPruneSlice rows, each a short transaction (2-15 ms next to millions of rows). A pass
  // starts no slice after kPrunePassBudget; then the claim path has the database to itself
  // for at least kPrunePause before the next pass. Only once a slice comes back short does
  // the next pass wait kPruneInterval. Retention so holds at most about half of one
  // session: 3M expired rows took 34-86 s beside 64 busy workers, whose throughput kept a
  // median 93% of a control run's, against 74% with passes back to back.
  static constexpr int kPruneSlice = 1000;
  static constexpr std::chrono::milliseconds kPrunePassBudget{100};
  static constexpr std::chrono::milliseconds kPrunePause{100};
  // A keyed limit's partition with nothing running and nothing taken for this long has
  // its rows deleted (they are recreated when needed).
  static constexpr std::chrono::minutes kLimitPartitionIdle{10};

 private:
  // One pass: slices until none is left (false) or kPrunePassBudget is spent (true).
  bool prune(const std::stop_token& stop);

  const std::shared_ptr<RetentionStore> store_;
  const Leadership& leadership_;
  const LimitRegistry* const limits_;
  // The loop's thread only.
  Clock::time_point next_prune_{};
  // Since when passes follow each other without a rest (rows expired faster than one pass
  // deletes), and how many they deleted.
  std::optional<Clock::time_point> backlog_since_;
  std::int64_t backlog_deleted_ = 0;

  std::mutex mutex_;  // guards retention_
  RetentionConfig retention_;
};

}  // namespace pgjobd
