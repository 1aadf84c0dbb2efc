// TestSchema and helpers.

#include "support/test_database.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <pqxx/pqxx>
#include <thread>

#include "db/migrator.hpp"
#include "db/sql_text.hpp"
#include "support/build_paths.hpp"

namespace pgjobd::testing {

std::string test_database_url() {
  const char* url = std::getenv("PGJOBD_TEST_DATABASE_URL");
  if (url == nullptr || *url == '\0') {
    ADD_FAILURE() << "PGJOBD_TEST_DATABASE_URL is not set: run the tests with scripts/test.sh";
    std::abort();
  }
  return url;
}

std::string test_database_url_for_role(const std::string& role) {
  const std::string url = test_database_url();
  const auto user_at = url.find("://") + 3;
  return url.substr(0, user_at) + role + url.substr(url.find('@', user_at));
}

DatabaseConfig database_at(const std::string& url) {
  DatabaseConfig config;
  config.url = url;
  return config;
}

namespace {
DatabaseConfig database_config(const std::string& schema) {
  DatabaseConfig db = database_at();
  db.schema = schema;
  return db;
}
}  // namespace

TestSchema::TestSchema() {
  static std::atomic<int> counter{0};
  name_ = "t_" + std::to_string(getpid()) + "_" + std::to_string(counter++);
  conn_ = open_connection(database_config(name_), "test");
  {
    pqxx::work txn(*conn_);
    txn.exec("DROP SCHEMA IF EXISTS " + quote_identifier(name_) + " CASCADE");
    txn.commit();
  }
  migrate(*conn_, name_);
}

TestSchema::~TestSchema() {
  try {
    pqxx::work txn(*conn_);
    txn.exec("DROP SCHEMA IF EXISTS " + quote_identifier(name_) + " CASCADE");
    txn.commit();
  } catch (const std::exception&) {
    // The server may be down in a fault test; the next run drops a leftover schema anyway.
  }
}

Config TestSchema::config() const {
  Config config;
  config.database = database_config(name_);
  config.poll.min_interval = Millis(10);
  config.poll.max_interval = Millis(200);
  config.metrics.listen = "";
  config.shutdown.timeout = Millis(5000);
  config.retry.base = Millis(10);
  config.retry.max_delay = Millis(100);
  config.retry.jitter = 0;
  return config;
}

std::string TestSchema::expand(const std::string& sql) const {
  std::string text = sql;
  const std::string table = quote_identifier(name_) + ".jobs";
  for (auto pos = text.find("{jobs}"); pos != std::string::npos; pos = text.find("{jobs}", pos)) {
    text.replace(pos, 6, table);
  }
  return text;
}

std::string TestSchema::qualified(const std::string& table) const {
  return quote_identifier(name_) + "." + table;
}

std::string TestSchema::query(const std::string& sql) {
  pqxx::nontransaction txn(*conn_);
  const auto rows = txn.exec(expand(sql));
  if (rows.empty() || rows[0][0].is_null()) return "";
  return rows[0][0].c_str();
}

std::vector<std::string> TestSchema::column(const std::string& sql) {
  pqxx::nontransaction txn(*conn_);
  std::vector<std::string> values;
  for (const auto& row : txn.exec(expand(sql))) values.emplace_back(row[0].c_str());
  return values;
}

std::int64_t TestSchema::count(const std::string& where) {
  return std::stoll(query("SELECT count(*) FROM {jobs} WHERE " + where));
}

void TestSchema::exec(const std::string& sql) {
  pqxx::nontransaction txn(*conn_);
  txn.exec(expand(sql));
}

void TestSchema::insert_jobs(const std::string& type, int n, const std::string& queue) {
  pqxx::nontransaction txn(*conn_);
  txn.exec_params(expand("INSERT INTO {jobs} (type, queue, payload) "
                         "SELECT $1, $2, jsonb_build_object('n', g) FROM generate_series(1, $3) g"),
                  type, queue, n);
}

std::string table_summary(TestSchema& schema) {
  return "jobs by status: " +
         schema.query(
             "SELECT string_agg(status || '=' || n, ', ' ORDER BY status) FROM "
             "(SELECT status, count(*) n FROM {jobs} GROUP BY status) s");
}

std::string create_runtime_role(TestSchema& schema, const std::string& prefix) {
  const std::string role = prefix + std::to_string(getpid());
  schema.exec("DROP ROLE IF EXISTS " + quote_identifier(role));
  schema.exec("CREATE ROLE " + quote_identifier(role) + " LOGIN");
  const std::string command = "psql -q -X '" + test_database_url() +
                              "' -v schema=" + schema.name() + " -v runtime_role=" + role + " -f " +
                              source_path("sql/grants.sql");
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  return role;
}

}  // namespace pgjobd::testing
