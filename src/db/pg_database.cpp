// PgDatabase: stores, LISTEN sessions and the start-up schema check over libpqxx.

#include "db/pg_database.hpp"

#include <mutex>
#include <utility>

#include "db/call_deadline.hpp"
#include "db/connection.hpp"
#include "db/migrator.hpp"
#include "db/pg_job_store.hpp"
#include "db/pg_notifications.hpp"
#include "db/pg_schedule_store.hpp"
#include "db/pqxx_errors.hpp"

namespace pgjobd {

std::unique_ptr<JobStore> PgDatabase::open_store(const std::string& role, StoreUse use) {
  ConnectionPtr session;
  if (use == StoreUse::kHotPath) {
    std::lock_guard lock(spare_mutex_);
    session = std::move(spare_);
  }
  return std::make_unique<PgJobStore>(config_, role, use, std::move(session));
}

std::unique_ptr<ScheduleStore> PgDatabase::open_schedule_store(const std::string& role) {
  return std::make_unique<PgScheduleStore>(config_, role);
}

std::unique_ptr<Notifications> PgDatabase::listen() {
  return std::make_unique<PgNotifications>(config_);
}

void PgDatabase::shorten_calls(Millis cap) { CallDeadline::shorten_all(cap); }

SchemaReport PgDatabase::prepare_schema(bool migrate_schema,
                                        const std::function<bool()>& stop_requested) {
  try {
    auto conn = open_connection(config_, "startup");
    SchemaReport report;
    if (migrate_schema) {
      const MigrationReport migrated = migrate(*conn, config_.schema, stop_requested);
      if (migrated.stopped) {
        report.stopped = true;
        return report;
      }
      report.from_version = migrated.from_version;
      report.to_version = migrated.to_version;
    } else {
      report.from_version = report.to_version = schema_version(*conn, config_.schema);
    }
    report.problem = schema_problem(report.to_version, config_.schema);
    std::lock_guard lock(spare_mutex_);
    spare_ = std::move(conn);
    return report;
  } catch (...) {
    rethrow_as_db_error("schema");
  }
}

}  // namespace pgjobd
