// The hot-path statements' functions, which keep their plans behind a transaction pooler
// (db/pooled_functions.hpp): made by the migrator for every statement kept, under the
// pinned session's planner settings, and called by a hot-path store behind a pooler, which
// sends the statement itself when a function is missing.

#include "db/pooled_functions.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "db/pg_job_store.hpp"
#include "db/sql_text.hpp"
#include "db/statement_set.hpp"
#include "db/statements.hpp"
#include "store/db_error.hpp"
#include "support/claims.hpp"
#include "support/hostile_load.hpp"
#include "support/log_capture.hpp"
#include "support/test_database.hpp"

namespace pgjobd {
namespace {

using testing::kLease;
using testing::TestSchema;

std::string function_named(TestSchema& schema, const std::string& name, const std::string& what) {
  return schema.query("SELECT " + what + " FROM pg_proc WHERE pronamespace = " +
                      "to_regnamespace(" + testing::sql_quote(quote_identifier(schema.name())) +
                      ") AND proname = " + testing::sql_quote(name));
}

const PooledFunction& claim_function() {
  for (const PooledFunction& function : pooled_functions()) {
    if (std::string(function.statement) == stmt::kClaim) return function;
  }
  throw std::logic_error("no function for the claim");
}

TEST(PooledFunctions, EachKeptStatementHasOneThatRunsItUnderThePinnedSettings) {
  TestSchema schema;
  std::string pinned;
  for (const auto& [setting, value] : kPinnedSettings) {
    pinned += (pinned.empty() ? "" : ",") + std::string(setting) + "=" + value;
  }
  const std::vector<stmt::Statement> statements =
      stmt::job_statements(quote_identifier(schema.name()));
  std::set<std::string> names;
  ASSERT_GE(pooled_functions().size(), 5u);
  for (const PooledFunction& function : pooled_functions()) {
    names.insert(function.name);
    EXPECT_LE(function.name.size(), 63u) << function.name;  // PostgreSQL's longest name
    EXPECT_EQ(function_named(schema, function.name, "array_to_string(proconfig, ',')"), pinned)
        << function.name;
    const std::string& sql = stmt::statement_named(statements, function.statement).sql;
    EXPECT_EQ(
        function_named(schema, function.name,
                       "strpos(prosrc, " + testing::sql_quote(sql) + ") > 0 AND NOT prosecdef"),
        "t")
        << function.name << " does not run its statement as the caller";
  }
  EXPECT_EQ(names.size(), pooled_functions().size());
}

// Behind a pooler a hot-path store calls the claim's function; without the pooler it
// prepares the statement. With the function gone it sends the statement, and says so.
TEST(PooledFunctions, APooledStoreCallsThemAndSendsTheStatementWhenOneIsMissing) {
  TestSchema schema;
  schema.insert_jobs("a", 3);
  const std::string function = quote_identifier(schema.name()) + "." + claim_function().name;
  const std::string signature =
      function_named(schema, claim_function().name, "pg_get_function_arguments(oid)");
  const std::string result =
      function_named(schema, claim_function().name, "pg_get_function_result(oid)");
  DatabaseConfig pooled = schema.config().database;
  pooled.pooler = "transaction";
  PgJobStore store(pooled, "test", StoreUse::kHotPath);
  ASSERT_EQ(store.claim({{{"default", 1}}, {"a"}, 1, "w", kLease}).size(), 1u);

  schema.exec("CREATE OR REPLACE FUNCTION " + function + "(" + signature + ") RETURNS " + result +
              " LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION 'the claim''s function ran'; END$$");
  try {
    store.claim({{{"default", 1}}, {"a"}, 1, "w", kLease});
    ADD_FAILURE() << "the pooled store did not call the claim's function";
  } catch (const DbError& e) {
    EXPECT_NE(std::string(e.what()).find("the claim's function ran"), std::string::npos)
        << e.what();
  }
  PgJobStore direct(schema.config().database, "test", StoreUse::kHotPath);
  EXPECT_EQ(direct.claim({{{"default", 1}}, {"a"}, 1, "w", kLease}).size(), 1u);

  schema.exec("DROP FUNCTION " + function + "(" + signature + ")");
  testing::LogCapture log;
  EXPECT_EQ(store.claim({{{"default", 1}}, {"a"}, 1, "w", kLease}).size(), 1u);
  EXPECT_TRUE(log.contains("1 of the " + std::to_string(pooled_functions().size()) +
                           " hot-path statements are planned at each execution"))
      << log.all();
  EXPECT_EQ(schema.count("status = 'running'"), 3);
}

}  // namespace
}  // namespace pgjobd
