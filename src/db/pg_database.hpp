#pragma once
// Database over PostgreSQL: what the engine is given in production.

#include <memory>
#include <mutex>
#include <string>

#include "db/connection.hpp"
#include "pgjobd/config.hpp"
#include "store/database.hpp"

namespace pgjobd {

class PgDatabase final : public Database {
 public:
  explicit PgDatabase(DatabaseConfig config) : config_(std::move(config)) {}

  std::unique_ptr<JobStore> open_store(const std::string& role, StoreUse use) override;
  std::unique_ptr<ScheduleStore> open_schedule_store(const std::string& role) override;
  std::unique_ptr<Notifications> listen() override;
  SchemaReport prepare_schema(bool migrate, const std::function<bool()>& stop_requested) override;
  void shorten_calls(Millis cap) override;

 private:
  const DatabaseConfig config_;
  std::mutex spare_mutex_;
  // prepare_schema()'s session, kept for the next hot-path store (the engine opens its
  // claim session right after the schema check): that store's first claim then waits
  // neither for a backend to start nor for its catalog caches to be filled from scratch.
  ConnectionPtr spare_;
};

}  // namespace pgjobd
