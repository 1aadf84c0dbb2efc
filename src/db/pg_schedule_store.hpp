#pragma once
// ScheduleStore over one PostgreSQL session (DbSession): the schedule statements of
// statements.cpp. The connection is dropped on error and reopened on the next call.

#include <optional>
#include <string>
#include <vector>

#include "db/db_session.hpp"
#include "store/schedule_store.hpp"

namespace pqxx {
class result;
class transaction_base;
}  // namespace pqxx

namespace pgjobd {

class PgScheduleStore final : public ScheduleStore {
 public:
  PgScheduleStore(const DatabaseConfig& config, std::string role);
  ~PgScheduleStore() override;
  PgScheduleStore(const PgScheduleStore&) = delete;
  PgScheduleStore& operator=(const PgScheduleStore&) = delete;

  std::vector<ScheduleRow> load_schedules() override;
  FireResult fire(const FireRequest& request) override;
  std::optional<int> row_holder(const std::string& name) override;
  ReconcileReport reconcile(const std::map<std::string, ScheduleConfig>& schedules) override;

 private:
  template <typename... Args>
  pqxx::result execute(pqxx::transaction_base& txn, const char* name, Args&&... args);

  DbSession session_;
};

}  // namespace pgjobd
