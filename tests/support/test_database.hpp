#pragma once
// Test support: a migrated schema of its own per test on the server named by
// PGJOBD_TEST_DATABASE_URL, plus small query helpers and condition waits.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "db/connection.hpp"
#include "pgjobd/config.hpp"
#include "support/wait_until.hpp"  // wait_until, used with the database helpers

namespace pgjobd::testing {

// The server under test; fails the test run loudly when the variable is unset.
std::string test_database_url();
// The same server as another role (the test cluster trusts local connections).
std::string test_database_url_for_role(const std::string& role);
// Database settings for the server at `url`, every other key at its default.
DatabaseConfig database_at(const std::string& url = test_database_url());

class TestSchema {
 public:
  TestSchema();   // creates and migrates a fresh schema
  ~TestSchema();  // drops it
  TestSchema(const TestSchema&) = delete;
  TestSchema& operator=(const TestSchema&) = delete;

  const std::string& name() const { return name_; }
  // "schema"."table", for a table the {jobs} placeholder does not name.
  std::string qualified(const std::string& table) const;
  // A config for this schema: fast polling, metrics off, no handlers.
  Config config() const;

  // Runs SQL (with {jobs} replaced by the quoted table) and returns the first column of
  // the first row as text ("" when there is no row or it is NULL).
  std::string query(const std::string& sql);
  // The first column of every row, as text (NULL as "").
  std::vector<std::string> column(const std::string& sql);
  std::int64_t count(const std::string& where = "true");
  void exec(const std::string& sql);
  // INSERTs `n` jobs of `type` in one statement; extra columns as "col = value" pairs
  // are not needed by the tests: use exec() for special rows.
  void insert_jobs(const std::string& type, int n, const std::string& queue = "default");

 private:
  std::string expand(const std::string& sql) const;
  std::string name_;
  ConnectionPtr conn_;
};

// A LOGIN role named `prefix` and this process's id, with sql/grants.sql's runtime grants on
// `schema`, applied with psql as an operator would; returns its name.
std::string create_runtime_role(TestSchema& schema, const std::string& prefix);

// "jobs by status: done=3, pending=1", for failure messages.
std::string table_summary(TestSchema& schema);

}  // namespace pgjobd::testing
