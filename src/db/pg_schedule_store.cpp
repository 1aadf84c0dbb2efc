// PgScheduleStore: loading, firing (the compare-and-set transaction) and reconciling
// schedules with the prepared statements of statements.cpp.
#include "db/pg_schedule_store.hpp"

#include <pqxx/pqxx>
#include <stdexcept>
#include <string_view>

#include "db/sql_text.hpp"
#include "db/statements.hpp"

namespace pgjobd {
namespace {

std::int64_t epoch_seconds(TickTime t) { return t.time_since_epoch().count(); }

}  // namespace

PgScheduleStore::PgScheduleStore(const DatabaseConfig& config, std::string role)
    : session_(config, std::move(role), stmt::schedule_statements(quote_identifier(config.schema)),
               Planning::kEachExecution) {}

template <typename... Args>
pqxx::result PgScheduleStore::execute(pqxx::transaction_base& txn, const char* name,
                                      Args&&... args) {
  return session_.execute(txn, name, std::forward<Args>(args)...);
}

PgScheduleStore::~PgScheduleStore() = default;

std::vector<ScheduleRow> PgScheduleStore::load_schedules() {
  session_.connect();
  return session_.call("load schedules", [&] {
    pqxx::nontransaction txn(session_.connection());
    const pqxx::result rows = execute(txn, stmt::kScheduleLoad);
    std::vector<ScheduleRow> out;
    out.reserve(rows.size());
    for (const auto& row : rows) {
      ScheduleRow s;
      s.name = row[0].c_str();
      s.timing.cron = row[1].c_str();
      s.timing.every_seconds = row[2].as<std::int64_t>();
      s.timing.timezone = row[3].c_str();
      s.type = row[4].c_str();
      s.queue = row[5].c_str();
      s.source = row[6].c_str();
      s.enabled = row[7].as<bool>();
      s.paused = row[8].as<bool>();
      s.overlap_skip = std::string(row[9].c_str()) == "skip";
      s.misfire = misfire_policy(row[10].c_str());
      s.misfire_grace = std::chrono::seconds(row[11].as<std::int64_t>());
      s.last_tick = TickTime(std::chrono::seconds(row[12].as<std::int64_t>()));
      if (!row[13].is_null()) {
        s.next_tick = TickTime(std::chrono::seconds(row[13].as<std::int64_t>()));
      }
      s.priority = row[14].as<int>();
      s.max_attempts = row[15].as<int>();
      s.payload = row[16].c_str();
      out.push_back(std::move(s));
    }
    return out;
  });
}

FireResult PgScheduleStore::fire(const FireRequest& request) {
  session_.connect();
  return session_.call("fire schedule", [&] {
    pqxx::work txn(session_.connection());
    pqxx::result locked;
    try {
      locked = execute(txn, stmt::kScheduleLock, request.name,
                       epoch_seconds(request.expected_last_tick), epoch_seconds(request.tick),
                       request.timing.cron, request.timing.every_seconds, request.timing.timezone);
    } catch (const pqxx::sql_error& e) {
      // NOWAIT found the row held: the transaction rolls back, the session stays.
      if (e.sqlstate() == ScheduleStore::kLockNotAvailable) return FireResult::kHeld;
      throw;
    }
    if (locked.empty()) return FireResult::kLost;  // the transaction rolls back: no writes
    const bool busy = locked[0][0].as<bool>();
    FireResult result = FireResult::kAdvanced;
    std::int64_t job_id = 0;
    if (request.insert_job && busy) {
      result = FireResult::kSkippedOverlap;
    } else if (request.insert_job) {
      const pqxx::result inserted = execute(txn, stmt::kScheduleInsertJob, request.name,
                                            epoch_seconds(request.tick), request.late);
      if (!inserted.empty()) job_id = inserted[0][0].as<std::int64_t>();
      result = FireResult::kFired;
    }
    execute(txn, stmt::kScheduleAdvance, request.name, epoch_seconds(request.tick),
            request.next_tick ? epoch_seconds(*request.next_tick) : std::int64_t{-1}, job_id);
    txn.commit();
    return result;
  });
}

std::optional<int> PgScheduleStore::row_holder(const std::string& name) {
  session_.connect();
  return session_.call("schedule row holder", [&]() -> std::optional<int> {
    pqxx::nontransaction txn(session_.connection());
    const pqxx::result rows = execute(txn, stmt::kScheduleHolder, name);
    if (rows.empty()) return std::nullopt;
    return rows[0][0].as<int>();
  });
}

ReconcileReport PgScheduleStore::reconcile(const std::map<std::string, ScheduleConfig>& schedules) {
  session_.connect();
  return session_.call("reconcile schedules", [&] {
    ReconcileReport report;
    std::vector<std::string> names;
    names.reserve(schedules.size());
    for (const auto& entry : schedules) names.push_back(entry.first);
    pqxx::work txn(session_.connection());
    execute(txn, stmt::kScheduleLockTimeout,
            std::to_string(ScheduleStore::kReconcileLockWait.count()) + "ms");
    for (const auto& row : execute(txn, stmt::kScheduleSqlHeld, text_array_literal(names))) {
      report.held_by_sql.emplace_back(row[0].c_str());
    }
    for (const auto& [name, s] : schedules) {
      if (std::find(report.held_by_sql.begin(), report.held_by_sql.end(), name) !=
          report.held_by_sql.end()) {
        continue;
      }
      const ScheduleRow row = yaml_schedule_row(name, s);
      const pqxx::result changed = execute(
          txn, stmt::kScheduleUpsertYaml, name, row.timing.cron, row.timing.every_seconds,
          row.timing.timezone, row.type, row.queue, row.priority, row.max_attempts, row.payload,
          s.overlap, s.misfire, static_cast<std::int64_t>(row.misfire_grace.count()), row.enabled);
      if (!changed.empty()) ++(changed[0][0].as<bool>() ? report.added : report.changed);
    }
    report.removed =
        static_cast<int>(execute(txn, stmt::kScheduleDeleteYaml, text_array_literal(names)).size());
    txn.commit();
    return report;
  });
}

}  // namespace pgjobd
