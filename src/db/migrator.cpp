// Versioned migrations, then the functions, under an advisory lock, recorded in
// pgjobd_migrations.

#include "db/migrator.hpp"

#include <spdlog/spdlog.h>

#include <cctype>
#include <chrono>
#include <map>
#include <pqxx/pqxx>
#include <stdexcept>
#include <string_view>
#include <thread>

#include "db/migrations.hpp"
#include "db/pooled_functions.hpp"
#include "db/sql_text.hpp"

namespace pgjobd {
namespace {

// Arbitrary constant namespacing pgjobd's advisory locks (the second key is the schema).
constexpr int kMigrationLockClass = 0x706a6d;  // "pjm"

// How often a migration waiting for the lock asks for it again, and when it says so.
constexpr std::chrono::milliseconds kLockRetry{100};
constexpr std::chrono::seconds kLockWaitLogged{1};

// Takes the migration lock, asking again every kLockRetry while another session holds it
// (a blocking wait could not be left for a stop request). False when stopped first.
bool take_migration_lock(pqxx::transaction_base& txn, const std::string& schema,
                         const std::function<bool()>& stop_requested) {
  const auto started = std::chrono::steady_clock::now();
  bool said = false;
  while (!txn.exec_params("SELECT pg_try_advisory_xact_lock($1, hashtext($2))", kMigrationLockClass,
                          schema)[0][0]
              .as<bool>()) {
    if (stop_requested && stop_requested()) return false;
    const auto waited = std::chrono::steady_clock::now() - started;
    if (!said && waited >= kLockWaitLogged) {
      said = true;
      const auto holders = txn.exec_params(
          "SELECT coalesce(string_agg(pid::text, ', ' ORDER BY pid), 'unknown') FROM pg_locks "
          "WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND classid = $1::int::oid "
          "AND objid = hashtext($2)::oid",
          kMigrationLockClass, schema);
      spdlog::warn(
          "waiting for the migration lock of schema {}, held by pid {} (another pgjobd "
          "migrating it, or a session holding that advisory lock)",
          quote_identifier(schema), holders[0][0].c_str());
    }
    std::this_thread::sleep_for(kLockRetry);
  }
  if (said) {
    spdlog::info("took the migration lock of schema {} after {:.1f}s", quote_identifier(schema),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }
  return true;
}

// What pgjobd_migrations says: the newest version (0 when none) and the digest of the
// functions applied with it (empty when none was recorded).
struct Recorded {
  int version = 0;
  std::string functions_digest;
};

Recorded recorded(pqxx::transaction_base& txn, const std::string& schema) {
  const auto exists = txn.exec_params("SELECT to_regclass($1) IS NOT NULL",
                                      quote_identifier(schema) + ".pgjobd_migrations");
  if (!exists[0][0].as<bool>()) return {};
  // The digest column exists from schema v14 on; read through to_jsonb, an older row has
  // none (NULL) instead of failing the read.
  const auto row =
      txn.exec("SELECT m.version, to_jsonb(m) ->> 'functions_digest' FROM " +
               quote_identifier(schema) + ".pgjobd_migrations m ORDER BY m.version DESC LIMIT 1");
  if (row.empty()) return {};
  return {row[0][0].as<int>(), row[0][1].is_null() ? "" : row[0][1].c_str()};
}

Recorded read_recorded(pqxx::connection_base& conn, const std::string& schema) {
  // Two reads, no transaction around them: a migration committed in between is seen whole
  // by the second, and the first only says whether to ask.
  pqxx::nontransaction txn(conn);
  return recorded(txn, schema);
}

bool functions_current(const Recorded& state) {
  return state.version == latest_schema_version() && state.functions_digest == applied_digest();
}

// Fills in a function file's @name@ placeholders in one pass (a value put in is never
// scanned again). An @name@ without a value is a mistake in the file.
std::string expand_placeholders(std::string_view sql,
                                const std::map<std::string, std::string, std::less<>>& values,
                                std::string_view file) {
  std::string out;
  out.reserve(sql.size() + sql.size() / 8);
  std::size_t pos = 0;
  while (pos < sql.size()) {
    const std::size_t at = sql.find('@', pos);
    if (at == std::string_view::npos) break;
    std::size_t end = at + 1;
    while (end < sql.size() &&
           (std::islower(static_cast<unsigned char>(sql[end])) != 0 || sql[end] == '_')) {
      ++end;
    }
    if (end == at + 1 || end == sql.size() || sql[end] != '@') {
      out.append(sql, pos, end - pos);  // an @ of SQL ('@daily', @>), not a placeholder
      pos = end;
      continue;
    }
    const std::string_view name = sql.substr(at + 1, end - at - 1);
    const auto value = values.find(name);
    if (value == values.end()) {
      throw std::logic_error("sql/functions/" + std::string(file) + ".sql: unknown placeholder @" +
                             std::string(name) + "@");
    }
    out.append(sql, pos, at - pos);
    out += value->second;
    pos = end + 1;
  }
  out.append(sql, pos);
  return out;
}

// Creates or replaces every function and trigger of sql/functions/, in file-name order,
// with the schema's names spelled in: SECURITY DEFINER functions name their tables
// qualified, as they must not resolve names through the caller's search_path.
// CREATE OR REPLACE keeps each function's grants.
void apply_functions(pqxx::transaction_base& txn, const std::string& schema) {
  const auto names = txn.exec_params(
      "SELECT quote_ident($1), quote_literal($1), "
      "quote_literal(pg_get_serial_sequence(format('%I.jobs', $1), 'id'))",
      schema)[0];
  const std::map<std::string, std::string, std::less<>> values{
      {"schema", names[0].c_str()},       // the schema as an identifier: @schema@.jobs
      {"schema_name", names[1].c_str()},  // its name as a literal: NOTIFY payloads, lock keys
      {"jobs_id_seq", names[2].c_str()},  // the jobs id sequence as a literal
  };
  for (const FunctionFile& file : function_files()) {
    txn.exec(expand_placeholders(file.sql, values, file.name));
  }
}

}  // namespace

std::string applied_digest() {
  return std::string(functions_digest()) + "+" + pooled_functions_digest();
}

MigrationReport migrate(pqxx::connection_base& conn, const std::string& schema,
                        const std::function<bool()>& stop_requested) {
  // Nearly every start finds the schema current, with this binary's functions: two reads
  // then, without the lock or the DDL below (a daemon's start made twelve round trips here
  // before its first claim). Another daemon migrating meanwhile can only bring the schema to
  // this same version, or give it the functions of another binary of this version, which
  // must serve this one too (sql/functions/README.md).
  if (const Recorded state = read_recorded(conn, schema); functions_current(state)) {
    return {state.version, state.version};
  }
  const std::string quoted = quote_identifier(schema);
  pqxx::work txn(conn);
  if (!take_migration_lock(txn, schema, stop_requested)) {
    MigrationReport stopped;
    stopped.stopped = true;
    return stopped;  // the transaction rolls back: nothing was written
  }
  txn.exec("CREATE SCHEMA IF NOT EXISTS " + quoted);
  txn.exec("CREATE TABLE IF NOT EXISTS " + quoted +
           ".pgjobd_migrations (version int PRIMARY KEY, name text NOT NULL,"
           " applied_at timestamptz NOT NULL DEFAULT now())");
  const Recorded before = recorded(txn, schema);
  MigrationReport report;
  report.from_version = before.version;
  report.to_version = report.from_version;
  if (report.from_version > latest_schema_version()) {
    throw std::runtime_error("schema " + quoted + " is at version " +
                             std::to_string(report.from_version) + ", newer than this pgjobd (" +
                             std::to_string(latest_schema_version()) + "): upgrade pgjobd");
  }
  // Migrations name objects unqualified, so they are created in the schema. pg_catalog is
  // left out on purpose: PostgreSQL then searches it first, so a function or operator
  // planted in the schema (now(), pg_notify, <>) can never stand in for a built-in. SET
  // LOCAL confines this to the transaction.
  txn.exec("SET LOCAL search_path TO " + quoted);
  for (const Migration& migration : migrations()) {
    if (migration.version <= report.from_version) continue;
    spdlog::info("applying migration {:03}_{} to schema {}", migration.version, migration.name,
                 quoted);
    txn.exec(migration.up_sql);
    txn.exec_params("INSERT INTO pgjobd_migrations (version, name) VALUES ($1, $2)",
                    migration.version, std::string(migration.name));
    report.to_version = migration.version;
  }
  // The functions after the tables they use. Applied again when another binary of this
  // version applied its own since (or none was recorded); else another session did it
  // while this one waited for the lock.
  if (report.to_version != before.version || before.functions_digest != applied_digest()) {
    spdlog::info("applying the functions to schema {}", quoted);
    apply_functions(txn, schema);
    // Another version's binaries cannot run against this one: their statements' functions go.
    apply_pooled_functions(txn, schema, report.to_version != before.version);
    txn.exec_params("UPDATE pgjobd_migrations SET functions_digest = $1 WHERE version = $2",
                    applied_digest(), report.to_version);
  }
  txn.commit();
  return report;
}

int schema_version(pqxx::connection_base& conn, const std::string& schema) {
  const Recorded state = read_recorded(conn, schema);
  if (state.version == latest_schema_version() && !functions_current(state)) {
    spdlog::warn(
        "schema {} is at version {} with the functions of another pgjobd of that version: "
        "`pgjobd migrate` applies this one's",
        quote_identifier(schema), state.version);
  }
  return state.version;
}

std::string schema_problem(pqxx::connection_base& conn, const std::string& schema) {
  return schema_problem(read_recorded(conn, schema).version, schema);
}

std::string schema_problem(int version, const std::string& schema) {
  const int latest = latest_schema_version();
  if (version == latest) return {};
  if (version == 0) {
    return "schema " + quote_identifier(schema) +
           " has no pgjobd tables: run `pgjobd migrate -c FILE` (or set "
           "database.migrate_on_start: true)";
  }
  if (version < latest) {
    return "schema " + quote_identifier(schema) + " is at version " + std::to_string(version) +
           ", this pgjobd needs " + std::to_string(latest) +
           ": run `pgjobd migrate -c FILE` (or set database.migrate_on_start: true)";
  }
  return "schema " + quote_identifier(schema) + " is at version " + std::to_string(version) +
         ", newer than this pgjobd (" + std::to_string(latest) + "): upgrade pgjobd";
}

}  // namespace pgjobd
