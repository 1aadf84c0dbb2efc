// The daemon works under a runtime role with the grants of sql/grants.sql and no DDL rights.

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <pqxx/pqxx>

#include "db/sql_text.hpp"
#include "pgjobd/engine.hpp"
#include "support/test_database.hpp"

namespace pgjobd {
namespace {

using namespace std::chrono_literals;

// The test URL with another user name (the test cluster trusts local connections).
std::string url_for_role(const std::string& url, const std::string& role) {
  const auto scheme_end = url.find("://") + 3;
  const auto at = url.find('@', scheme_end);
  return url.substr(0, scheme_end) + role + url.substr(at);
}

TEST(LeastPrivilege, RuntimeRoleWithoutDdlRightsRunsJobs) {
  testing::TestSchema schema;
  const std::string role = "pgjobd_rt_" + std::to_string(getpid());
  schema.exec("DROP ROLE IF EXISTS " + quote_identifier(role));
  schema.exec("CREATE ROLE " + quote_identifier(role) + " LOGIN");
  // Apply the shipped grants file with psql, exactly as an operator would.
  const std::string command = "psql -q -X '" + testing::test_database_url() +
                              "' -v schema=" + schema.name() + " -v runtime_role=" + role + " -f " +
                              PGJOBD_SOURCE_DIR "/sql/grants.sql";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;

  Config config = schema.config();
  config.database.url = url_for_role(testing::test_database_url(), role);
  {
    // The role can enqueue but not change the schema.
    DatabaseConfig db = config.database;
    auto conn = open_connection(db, "test");
    pqxx::nontransaction txn(*conn);
    const std::string table = quote_identifier(schema.name()) + ".jobs";
    txn.exec("INSERT INTO " + table + " (type) SELECT 'work' FROM generate_series(1, 20)");
    EXPECT_THROW(txn.exec("ALTER TABLE " + table + " ADD COLUMN x int"),
                 pqxx::insufficient_privilege);
    EXPECT_THROW(txn.exec("CREATE TABLE " + quote_identifier(schema.name()) + ".nope (x int)"),
                 pqxx::insufficient_privilege);
  }
  std::atomic<int> ran{0};
  {
    Engine engine(config);
    engine.register_handler("work", [&](const Job&, std::stop_token) {
      ++ran;
      return JobResult::done();
    });
    engine.start();
    EXPECT_TRUE(testing::wait_until([&] { return schema.count("status = 'done'") == 20; }, 30s));
    engine.drain();
  }
  EXPECT_EQ(ran.load(), 20);
  schema.exec("DROP OWNED BY " + quote_identifier(role));
  schema.exec("DROP ROLE " + quote_identifier(role));
}

}  // namespace
}  // namespace pgjobd
