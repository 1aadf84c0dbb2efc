// Maintenance: the services on their loops, in the order each loop runs them.

#include "engine/maintenance.hpp"

namespace pgjobd {

namespace {
std::vector<std::string> queue_names(const Config& config) {
  std::vector<std::string> names;
  for (const auto& [name, queue] : config.worker.queues) names.push_back(name);
  return names;
}
}  // namespace

Maintenance::Maintenance(const Config& config, const std::string& worker_id, Database& database,
                         const WorkerPool& pool, Metrics& metrics, Health& health,
                         LimitRegistry* limits)
    : Maintenance(config, worker_id, database.open_store(kSessionRole, StoreUse::kOccasional),
                  database.open_store(kRetentionRole, StoreUse::kOccasional), pool, metrics, health,
                  limits) {}

Maintenance::Maintenance(const Config& config, const std::string& worker_id,
                         const std::shared_ptr<JobStore>& session,
                         std::shared_ptr<JobStore> retention_session, const WorkerPool& pool,
                         Metrics& metrics, Health& health, LimitRegistry* limits)
    : loop_(metrics, health),
      retention_loop_(metrics, health),
      registry_(loop_.add(std::make_unique<DaemonRegistry>(config, worker_id, session, pool))),
      leadership_(loop_.add(
          std::make_unique<Leadership>(config, worker_id, session, pool, metrics, limits))),
      statistics_(loop_.add(
          std::make_unique<QueueStatistics>(queue_names(config), session, pool, metrics, health))),
      retention_(retention_loop_.add(
          std::make_unique<Retention>(config.retention, retention_session, leadership_, limits))) {
  retention_loop_.add(
      std::make_unique<DependencyRepair>(std::move(retention_session), leadership_));
  if (limits != nullptr) {
    limits_sync_ =
        &loop_.add(std::make_unique<LimitsSync>(config.lease.duration, session, *limits, metrics));
  }
}

Maintenance::~Maintenance() { stop(); }

void Maintenance::start() {
  loop_.start();
  retention_loop_.start();
}

void Maintenance::request_stop() {
  loop_.request_stop();
  retention_loop_.request_stop();
}

void Maintenance::join() {
  loop_.join();
  retention_loop_.join();
}

void Maintenance::prepare_limits() {
  if (limits_sync_ != nullptr) limits_sync_->prepare(loop_.calls());
}

void Maintenance::request_limits_sync() {
  if (limits_sync_ != nullptr) limits_sync_->request();
}

}  // namespace pgjobd
