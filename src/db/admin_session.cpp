// The SQL behind the CLI's migrate, enqueue, stats, retry and cancel.

#include "db/admin_session.hpp"

#include <pqxx/pqxx>
#include <stdexcept>

#include "db/connection.hpp"
#include "db/migrator.hpp"
#include "db/pqxx_errors.hpp"
#include "db/sql_text.hpp"

namespace pgjobd {
namespace {

std::string table(const std::string& schema) { return quote_identifier(schema) + ".jobs"; }

std::string current_status(pqxx::transaction_base& txn, const std::string& schema,
                           std::int64_t id) {
  const auto rows =
      txn.exec_params("SELECT status FROM " + table(schema) + " WHERE id = $1 FOR UPDATE", id);
  if (rows.empty()) throw std::runtime_error("job " + std::to_string(id) + " does not exist");
  return rows[0][0].c_str();
}

}  // namespace

struct AdminSession::Connection {
  ConnectionPtr conn;
};

AdminSession::AdminSession(const DatabaseConfig& config, const std::string& role)
    : schema_(config.schema), conn_(translating_db_errors([&] {
        return std::make_unique<Connection>(Connection{open_connection(config, role)});
      })) {}

AdminSession::~AdminSession() = default;

MigrationReport AdminSession::migrate() {
  return translating_db_errors([&] { return pgjobd::migrate(*conn_->conn, schema_); });
}

int AdminSession::schema_version() {
  return translating_db_errors([&] { return pgjobd::schema_version(*conn_->conn, schema_); });
}

EnqueueResult AdminSession::enqueue(const EnqueueRequest& request) {
  return translating_db_errors([&] {
    pqxx::work txn(*conn_->conn);
    const char* run_at = request.run_at ? request.run_at->c_str() : nullptr;
    const char* unique_key = request.unique_key ? request.unique_key->c_str() : nullptr;
    const auto inserted = txn.exec_params(
        "INSERT INTO " + table(schema_) +
            " (queue, type, payload, priority, run_at, max_attempts, unique_key)"
            " VALUES ($1, $2, $3::jsonb, $4, coalesce($5::timestamptz, now()), $6, $7)"
            " ON CONFLICT (type, unique_key) WHERE unique_key IS NOT NULL"
            " AND status IN ('pending', 'running', 'failed') DO NOTHING RETURNING id",
        request.queue, request.type, request.payload, request.priority, run_at,
        request.max_attempts, unique_key);
    EnqueueResult result;
    if (!inserted.empty()) {
      result.id = inserted[0][0].as<std::int64_t>();
    } else {
      result.created = false;
      const auto existing = txn.exec_params(
          "SELECT id FROM " + table(schema_) +
              " WHERE type = $1 AND unique_key = $2 AND status IN ('pending', 'running', 'failed')",
          request.type, unique_key);
      if (!existing.empty()) result.id = existing[0][0].as<std::int64_t>();
    }
    txn.commit();
    return result;
  });
}

std::vector<StatsRow> AdminSession::stats() {
  return translating_db_errors([&] {
    pqxx::read_transaction txn(*conn_->conn);
    std::vector<StatsRow> rows;
    for (const auto& row : txn.exec("SELECT queue, status, count(*) FROM " + table(schema_) +
                                    " GROUP BY queue, status ORDER BY queue, status")) {
      rows.push_back({row[0].c_str(), row[1].c_str(), row[2].as<std::int64_t>()});
    }
    return rows;
  });
}

std::string AdminSession::retry(std::int64_t id) {
  return translating_db_errors([&] {
    pqxx::work txn(*conn_->conn);
    const std::string status = current_status(txn, schema_, id);
    if (status != "failed" && status != "dead" && status != "cancelled") {
      throw std::runtime_error("job " + std::to_string(id) + " is " + status +
                               ": only failed, dead or cancelled jobs can be retried");
    }
    // A dead job gets one more attempt; its error history is kept.
    txn.exec_params("UPDATE " + table(schema_) +
                        " SET status = 'pending', run_at = now(), finished_at = NULL,"
                        " max_attempts = greatest(max_attempts, attempts + 1), updated_at = now()"
                        " WHERE id = $1",
                    id);
    txn.commit();
    return "job " + std::to_string(id) + " is pending again (was " + status + ")";
  });
}

std::string AdminSession::cancel(std::int64_t id) {
  return translating_db_errors([&] {
    pqxx::work txn(*conn_->conn);
    const std::string status = current_status(txn, schema_, id);
    if (status != "pending" && status != "failed") {
      throw std::runtime_error("job " + std::to_string(id) + " is " + status +
                               ": only pending or failed jobs can be cancelled");
    }
    txn.exec_params("UPDATE " + table(schema_) +
                        " SET status = 'cancelled', finished_at = now(), updated_at = now()"
                        " WHERE id = $1 AND status IN ('pending', 'failed')",
                    id);
    txn.commit();
    return "job " + std::to_string(id) + " cancelled (was " + status + ")";
  });
}

}  // namespace pgjobd
