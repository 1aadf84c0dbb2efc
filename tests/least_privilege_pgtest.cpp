// The daemon works under a runtime role with the grants of sql/grants.sql and no DDL rights.

#include <gtest/gtest.h>

#include <atomic>
#include <pqxx/pqxx>

#include "db/sql_text.hpp"
#include "db/ui/pg_ui_store.hpp"
#include "pgjobd/engine.hpp"
#include "support/test_database.hpp"

namespace pgjobd {
namespace {

using namespace std::chrono_literals;

TEST(LeastPrivilege, RuntimeRoleWithoutDdlRightsRunsJobs) {
  testing::TestSchema schema;
  const std::string role = testing::create_runtime_role(schema, "pgjobd_rt_");

  Config config = schema.config();
  config.database.url = testing::test_database_url_for_role(role);
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
    // The dashboard's daemons table: the runtime role keeps its row. Awaited: the
    // maintenance loop that writes it starts after the first claim (Engine::Impl::start),
    // and 20 jobs can be done before its first report.
    EXPECT_TRUE(testing::wait_until(
        [&] {
          return schema.query("SELECT count(*) FROM " + quote_identifier(schema.name()) +
                              ".pgjobd_daemons") == "1";
        },
        30s));
    engine.drain();
  }
  EXPECT_EQ(ran.load(), 20);
  EXPECT_EQ(
      schema.query("SELECT count(*) FROM " + quote_identifier(schema.name()) + ".pgjobd_daemons"),
      "0");
  {
    // The dashboard, as the daemon serves it: reads, every action and its audit row.
    PgUiStore store(config.database);
    EXPECT_EQ(store.overview().queues.size(), 1u);
    EXPECT_EQ(store.jobs({}).jobs.size(), 20u);
    EXPECT_TRUE(store.job(1, true));
    const std::string schedule = quote_identifier(schema.name()) + ".pgjobd_schedule_upsert";
    schema.exec("SELECT " + schedule + "(name => 'beat', type => 'work', every => '1 h')");
    const ui::Actor actor{"alice", "127.0.0.1"};
    EXPECT_EQ(store.pause_queue("default", actor).changed, 1);
    EXPECT_EQ(store.resume_queue("default", actor).changed, 1);
    EXPECT_EQ(store.pause_schedule("beat", actor).changed, 1);
    EXPECT_EQ(store.resume_schedule("beat", actor).changed, 1);
    EXPECT_EQ(store.retry({1}, actor).unchanged, 1);
    EXPECT_EQ(store.cancel({1}, "", actor).unchanged, 1);
    EXPECT_EQ(store.audit(10).size(), 6u);
  }
  schema.exec("DROP OWNED BY " + quote_identifier(role));
  schema.exec("DROP ROLE " + quote_identifier(role));
}

}  // namespace
}  // namespace pgjobd
