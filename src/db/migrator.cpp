// Versioned migrations under an advisory lock, recorded in pgjobd_migrations.

#include "db/migrator.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <pqxx/pqxx>
#include <thread>

#include "db/migrations.hpp"
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

int recorded_version(pqxx::transaction_base& txn, const std::string& schema) {
  const auto exists = txn.exec_params("SELECT to_regclass($1) IS NOT NULL",
                                      quote_identifier(schema) + ".pgjobd_migrations");
  if (!exists[0][0].as<bool>()) return 0;
  const auto row = txn.exec("SELECT coalesce(max(version), 0) FROM " + quote_identifier(schema) +
                            ".pgjobd_migrations");
  return row[0][0].as<int>();
}

}  // namespace

MigrationReport migrate(pqxx::connection_base& conn, const std::string& schema,
                        const std::function<bool()>& stop_requested) {
  // Nearly every start finds the schema current: two reads then, without the lock or the
  // DDL below (a daemon's start made twelve round trips here before its first claim).
  // Another daemon migrating meanwhile can only bring the schema to this same version.
  if (const int current = schema_version(conn, schema); current == latest_schema_version()) {
    return {current, current};
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
  MigrationReport report;
  report.from_version = recorded_version(txn, schema);
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
  txn.commit();
  return report;
}

int schema_version(pqxx::connection_base& conn, const std::string& schema) {
  // Two reads, no transaction around them: a migration committed in between is seen whole
  // by the second (the version recorded), and the first only says whether to ask.
  pqxx::nontransaction txn(conn);
  return recorded_version(txn, schema);
}

std::string schema_problem(pqxx::connection_base& conn, const std::string& schema) {
  return schema_problem(schema_version(conn, schema), schema);
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
