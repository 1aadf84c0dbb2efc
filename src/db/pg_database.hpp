#pragma once
// Database over PostgreSQL: what the engine is given in production.

#include <memory>
#include <string>

#include "pgjobd/config.hpp"
#include "store/database.hpp"

namespace pgjobd {

class PgDatabase final : public Database {
 public:
  explicit PgDatabase(DatabaseConfig config) : config_(std::move(config)) {}

  std::unique_ptr<JobStore> open_store(const std::string& role, StoreUse use) override;
  std::unique_ptr<ScheduleStore> open_schedule_store(const std::string& role) override;
  std::unique_ptr<Notifications> listen() override;
  SchemaReport prepare_schema(bool migrate) override;

 private:
  const DatabaseConfig config_;
};

}  // namespace pgjobd
