// The SQL behind the CLI's migrate, enqueue, stats, retry, cancel, pause and resume.

#include "db/admin/admin_session.hpp"

#include <pqxx/pqxx>
#include <stdexcept>

#include "db/connection.hpp"
#include "db/admin/limit_stats.hpp"
#include "db/migrator.hpp"
#include "db/pqxx_errors.hpp"
#include "db/sql_text.hpp"

namespace pgjobd {
namespace {

std::string table(const std::string& schema) { return quote_identifier(schema) + ".jobs"; }

// Qualified: the functions are found whatever the session's search_path.
std::string function(const std::string& schema, const char* name) {
  return quote_identifier(schema) + "." + name;
}

}  // namespace

struct AdminSession::Connection {
  ConnectionPtr conn;
};

AdminSession::AdminSession(const DatabaseConfig& config, const std::string& role)
    : schema_(config.schema), conn_(translating_db_errors([&] {
        auto conn = open_connection(config, role);
        // The functions' errors are meant for the operator as they are; without this,
        // libpq appends the PL/pgSQL CONTEXT lines to every message.
        conn->set_verbosity(pqxx::connection_base::terse);
        return std::make_unique<Connection>(Connection{std::move(conn)});
      })) {}

AdminSession::~AdminSession() = default;

MigrationReport AdminSession::migrate() {
  return translating_db_errors([&] { return pgjobd::migrate(*conn_->conn, schema_); });
}

int AdminSession::schema_version() {
  return translating_db_errors([&] { return pgjobd::schema_version(*conn_->conn, schema_); });
}

// The SQL interface's functions (sql/004_sql_interface.up.sql), so the command line
// follows exactly the rules an application's SQL call does.
EnqueueResult AdminSession::enqueue(const EnqueueRequest& request) {
  return translating_db_errors([&] {
    pqxx::work txn(*conn_->conn);
    const char* run_at = request.run_at ? request.run_at->c_str() : nullptr;
    const char* unique_key = request.unique_key ? request.unique_key->c_str() : nullptr;
    const auto row =
        txn.exec_params1("SELECT e.id, e.inserted FROM " + function(schema_, "pgjobd_enqueue_ex") +
                             "(type => $1, payload => $2::jsonb, queue => $3, priority => $4,"
                             " run_at => coalesce($5::timestamptz, now()), max_attempts => $6,"
                             " unique_key => $7) AS e",
                         request.type, request.payload, request.queue, request.priority, run_at,
                         request.max_attempts, unique_key);
    EnqueueResult result;
    result.id = row[0].as<std::int64_t>();
    result.created = row[1].as<bool>();
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

std::vector<LimitStatsRow> AdminSession::limit_stats() {
  return translating_db_errors([&] {
    pqxx::read_transaction txn(*conn_->conn);
    return read_limit_stats(txn, schema_);
  });
}

std::string AdminSession::retry(std::int64_t id) {
  return translating_db_errors([&] {
    pqxx::work txn(*conn_->conn);
    const auto row = txn.exec_params1("SELECT " + function(schema_, "pgjobd_retry") + "($1)", id);
    txn.commit();
    return "job " + std::to_string(id) + " is pending again (was " + row[0].c_str() + ")";
  });
}

std::string AdminSession::pause_queue(const std::string& queue) {
  return translating_db_errors([&] {
    pqxx::work txn(*conn_->conn);
    txn.exec_params("SELECT " + function(schema_, "pgjobd_pause_queue") + "($1)", queue);
    txn.commit();
    return "queue " + queue + " paused: no job of it starts until it is resumed";
  });
}

std::string AdminSession::resume_queue(const std::string& queue) {
  return translating_db_errors([&] {
    pqxx::work txn(*conn_->conn);
    txn.exec_params("SELECT " + function(schema_, "pgjobd_resume_queue") + "($1)", queue);
    txn.commit();
    return "queue " + queue + " resumed";
  });
}

std::string AdminSession::cancel(std::int64_t id, const std::optional<std::string>& reason) {
  return translating_db_errors([&] {
    pqxx::work txn(*conn_->conn);
    const char* reason_text = reason ? reason->c_str() : nullptr;  // nullptr: SQL NULL
    const auto row = txn.exec_params1("SELECT " + function(schema_, "pgjobd_cancel") + "($1, $2)",
                                      id, reason_text);
    txn.commit();
    const std::string left = row[0].c_str();
    const std::string job = "job " + std::to_string(id);
    if (left == "running") {
      return job +
             " is running: its daemon was asked to stop it; it ends cancelled (or done, if it "
             "finished first)";
    }
    if (left != "cancelled") {
      throw std::runtime_error(job + " is " + left + ": a finished job cannot be cancelled");
    }
    return job + " cancelled";
  });
}

}  // namespace pgjobd
