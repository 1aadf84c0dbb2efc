// The SQL behind the CLI's migrate, enqueue, stats, retry, cancel, pause and resume.

#include "db/admin/admin_session.hpp"

#include <pqxx/pqxx>
#include <stdexcept>

#include "db/admin/limit_stats.hpp"
#include "db/db_session.hpp"
#include "db/migrator.hpp"
#include "db/sql_text.hpp"

namespace pgjobd {
namespace {

std::string table(const std::string& schema) { return quote_identifier(schema) + ".jobs"; }

// Qualified: the functions are found whatever the session's search_path.
std::string function(const std::string& schema, const char* name) {
  return quote_identifier(schema) + "." + name;
}

}  // namespace

AdminSession::AdminSession(const DatabaseConfig& config, const std::string& role)
    : schema_(config.schema), session_(std::make_unique<DbSession>(config, role)) {
  // The functions' errors are meant for the operator as they are; without this, libpq
  // appends the PL/pgSQL CONTEXT lines to every message.
  session_->on_open(
      [](pqxx::connection_base& conn) { conn.set_verbosity(pqxx::connection_base::terse); });
  session_->connect("");
}

AdminSession::~AdminSession() = default;

template <typename Fn>
auto AdminSession::run(Fn&& fn) {
  return session_->connect_and_call("", Millis(0), std::forward<Fn>(fn));
}

MigrationReport AdminSession::migrate() {
  return run([&] { return pgjobd::migrate(session_->connection(), schema_); });
}

int AdminSession::schema_version() {
  return run([&] { return pgjobd::schema_version(session_->connection(), schema_); });
}

// The SQL interface's functions (sql/004_sql_interface.up.sql), so the command line
// follows exactly the rules an application's SQL call does.
EnqueueResult AdminSession::enqueue(const EnqueueRequest& request) {
  return run([&] {
    pqxx::work txn(session_->connection());
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
  return run([&] {
    pqxx::read_transaction txn(session_->connection());
    std::vector<StatsRow> rows;
    for (const auto& row : txn.exec("SELECT queue, status, count(*) FROM " + table(schema_) +
                                    " GROUP BY queue, status ORDER BY queue, status")) {
      rows.push_back({row[0].c_str(), row[1].c_str(), row[2].as<std::int64_t>()});
    }
    return rows;
  });
}

std::vector<LimitStatsRow> AdminSession::limit_stats() {
  return run([&] {
    pqxx::read_transaction txn(session_->connection());
    return read_limit_stats(txn, schema_);
  });
}

std::string AdminSession::retry(std::int64_t id) {
  return run([&] {
    pqxx::work txn(session_->connection());
    const auto row = txn.exec_params1("SELECT " + function(schema_, "pgjobd_retry") + "($1)", id);
    txn.commit();
    return "job " + std::to_string(id) + " is pending again (was " + row[0].c_str() + ")";
  });
}

std::string AdminSession::pause_queue(const std::string& queue) {
  return run([&] {
    pqxx::work txn(session_->connection());
    txn.exec_params("SELECT " + function(schema_, "pgjobd_pause_queue") + "($1)", queue);
    txn.commit();
    return "queue " + queue + " paused: no job of it starts until it is resumed";
  });
}

std::string AdminSession::resume_queue(const std::string& queue) {
  return run([&] {
    pqxx::work txn(session_->connection());
    txn.exec_params("SELECT " + function(schema_, "pgjobd_resume_queue") + "($1)", queue);
    txn.commit();
    return "queue " + queue + " resumed";
  });
}

std::string AdminSession::cancel(std::int64_t id, const std::optional<std::string>& reason) {
  return run([&] {
    pqxx::work txn(session_->connection());
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
