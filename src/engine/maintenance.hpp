#pragma once
// The maintenance services as a daemon runs them, each a task with one job and its own
// schedule: Leadership (the leadership, the rescue of expired leases, expired daemon
// rows), DaemonRegistry (this daemon's row), QueueStatistics (the queue gauges, the schema
// check), LimitsSync (README "Limits"), DeadLetterSync (README "Dead letters"), Retention
// (prune, idle limit partitions) and DependencyRepair. Here is decided which share a thread
// and a session: all but Retention and DependencyRepair make short statements seconds apart
// and share the "maintenance" session; Retention, whose passes are the longest work, has the
// "retention" session, which only a leader ever opens, and shares it with DependencyRepair,
// the leader's other occasional work. So a
// follower holds one maintenance connection and the leader two. Lease heartbeats are not
// here: LeaseRenewer sends them on a thread and session of their own, so nothing these
// loops wait for can cost a lease.

#include <memory>
#include <string>
#include <vector>

#include "engine/daemon_registry.hpp"
#include "engine/dead_letter_sync.hpp"
#include "engine/dependency_repair.hpp"
#include "engine/health.hpp"
#include "engine/leadership.hpp"
#include "engine/limits_sync.hpp"
#include "engine/maintenance_loop.hpp"
#include "engine/queue_statistics.hpp"
#include "engine/retention.hpp"
#include "engine/worker_pool.hpp"
#include "limits/limit_registry.hpp"
#include "metrics/metrics.hpp"
#include "runtime/service.hpp"
#include "store/database.hpp"

namespace pgjobd {

class Maintenance final : public Service {
 public:
  // Opens its stores from `database` (connected on first use). limits: the registry the
  // limits sync writes and reads (README "Limits"), or null for none.
  Maintenance(const Config& config, const std::string& worker_id, Database& database,
              const WorkerPool& pool, Metrics& metrics, Health& health, LimitRegistry* limits);
  ~Maintenance() override;  // stop()
  Maintenance(const Maintenance&) = delete;
  Maintenance& operator=(const Maintenance&) = delete;

  void start() override;
  void request_stop() override;
  // The loops resign the leadership and delete this daemon's row on their way out, unless
  // their last call failed.
  void join() override;

  void set_retention(const RetentionConfig& retention) { retention_.set_retention(retention); }
  void set_queues(std::vector<std::string> queues) { statistics_.set_queues(std::move(queues)); }
  // The limits' first sync before start(), on the caller's thread (LimitsSync::prepare).
  void prepare_limits();
  // LimitsSync::request.
  void request_limits_sync();
  // DeadLetterSync::set_handlers.
  void set_handlers(const std::map<std::string, HandlerConfig>& handlers) {
    dead_letter_sync_.set_handlers(handlers);
  }

  // The roles of the sessions, in pg_stat_activity.
  static constexpr const char* kSessionRole = "maintenance";
  static constexpr const char* kRetentionRole = "retention";

 private:
  // session: shared by the tasks of loop_.
  Maintenance(const Config& config, const std::string& worker_id,
              const std::shared_ptr<JobStore>& session, std::shared_ptr<JobStore> retention_session,
              const WorkerPool& pool, Metrics& metrics, Health& health, LimitRegistry* limits);

  MaintenanceLoop loop_;
  MaintenanceLoop retention_loop_;
  // Owned by the loops above.
  DaemonRegistry& registry_;
  Leadership& leadership_;
  QueueStatistics& statistics_;
  LimitsSync* limits_sync_ = nullptr;  // none without limits
  DeadLetterSync& dead_letter_sync_;
  Retention& retention_;
};

}  // namespace pgjobd
