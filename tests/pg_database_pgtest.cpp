// PgDatabase against PostgreSQL: the start-up session becomes the claim session.

#include "db/pg_database.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "store/job_store.hpp"
#include "support/claims.hpp"
#include "support/test_database.hpp"
#include "support/wait_until.hpp"

namespace pgjobd {
namespace {

using testing::TestSchema;

using testing::claim_of;
using testing::kLease;

// The backend pid of the one session named `application_name`, or "" when there is none
// ("several" when more than one: the tests below expect at most one).
std::string pid_named(TestSchema& schema, const std::string& application_name) {
  return schema.query(
      "SELECT CASE count(*) WHEN 0 THEN '' WHEN 1 THEN min(pid)::text ELSE 'several' END "
      "FROM pg_stat_activity WHERE application_name = '" +
      application_name + "'");
}

// The schema check's session is kept for the next hot-path store, so the engine's first
// claim waits neither for a backend to start nor for its catalog caches to be filled. A
// store of another use, or a second hot-path store, opens a session of its own.
TEST(PgDatabase, TheNextHotPathStoreTakesOverTheStartUpSession) {
  TestSchema schema;
  schema.exec("INSERT INTO {jobs} (type) VALUES ('a'), ('a')");
  PgDatabase database(schema.config().database);
  database.prepare_schema(false, {});
  const std::string startup = pid_named(schema, "pgjobd startup");
  ASSERT_NE(startup, "") << "prepare_schema closed its session";
  ASSERT_NE(startup, "several");

  const std::string occasional_role = "occasional " + schema.name();
  auto occasional = database.open_store(occasional_role, StoreUse::kOccasional);
  EXPECT_EQ(occasional->claim(claim_of(1)).size(), 1u);
  EXPECT_NE(pid_named(schema, "pgjobd " + occasional_role), startup);

  const std::string claim_role = "claim " + schema.name();
  auto claim_store = database.open_store(claim_role, StoreUse::kHotPath);
  claim_store->connect_ahead();
  EXPECT_EQ(claim_store->claim(claim_of(1)).size(), 1u);
  EXPECT_EQ(pid_named(schema, "pgjobd " + claim_role), startup);
  EXPECT_EQ(pid_named(schema, "pgjobd startup"), "");

  const std::string second_role = "second " + schema.name();
  auto second = database.open_store(second_role, StoreUse::kHotPath);
  EXPECT_TRUE(second->claim(claim_of(1)).empty());
  const std::string second_pid = pid_named(schema, "pgjobd " + second_role);
  EXPECT_NE(second_pid, "");
  EXPECT_NE(second_pid, startup);
}

// A start-up session the server closed before the store used it (a restart, an
// operator's pg_terminate_backend) is replaced, not reported as a failed statement.
TEST(PgDatabase, AStartUpSessionClosedMeanwhileIsReplaced) {
  TestSchema schema;
  schema.exec("INSERT INTO {jobs} (type) VALUES ('a')");
  for (const bool ahead : {true, false}) {
    SCOPED_TRACE(ahead ? "connect_ahead" : "connect at the first statement");
    PgDatabase database(schema.config().database);
    database.prepare_schema(false, {});
    const std::string startup = pid_named(schema, "pgjobd startup");
    ASSERT_NE(startup, "");
    ASSERT_NE(startup, "several");
    schema.query("SELECT pg_terminate_backend(" + startup + ")");
    ASSERT_TRUE(testing::wait_until([&] { return pid_named(schema, "pgjobd startup").empty(); },
                                    std::chrono::seconds(20)));

    const std::string role = std::string(ahead ? "ahead " : "direct ") + schema.name();
    auto store = database.open_store(role, StoreUse::kHotPath);
    if (ahead) store->connect_ahead();
    EXPECT_NO_THROW(store->next_due({"default"}, {"a"}, std::chrono::microseconds(0)));
    const std::string pid = pid_named(schema, "pgjobd " + role);
    EXPECT_NE(pid, "");
    EXPECT_NE(pid, startup);
  }
}

}  // namespace
}  // namespace pgjobd
