// BenchSchema against PostgreSQL: the scratch schema's life cycle, and a role that may not
// CHECKPOINT (the benchmark then runs on, reporting checkpointed: false).

#include "db/bench/bench_schema.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include "db/sql_text.hpp"
#include "support/test_database.hpp"

namespace pgjobd {
namespace {

TEST(BenchSchema, LifeCycleUnderARoleThatMayNotCheckpoint) {
  testing::TestSchema admin;  // a superuser session, for the role's set-up
  const std::string role = quote_identifier("pgjobd_bench_" + std::to_string(getpid()));
  admin.exec("DROP ROLE IF EXISTS " + role);
  admin.exec("CREATE ROLE " + role + " LOGIN");
  admin.exec("DO $$ BEGIN EXECUTE format('GRANT CREATE ON DATABASE %I TO " + role +
             "', current_database()); END $$");
  {
    DatabaseConfig db;
    db.url = testing::test_database_url_for_role(role.substr(1, role.size() - 2));
    db.schema = admin.name() + "_bench";
    BenchSchema schema(db, "noop");
    schema.recreate();
    schema.set_notify_trigger(false);
    schema.insert_pending(10);
    schema.insert_finished(5);
    EXPECT_TRUE(schema.any_unfinished());
    EXPECT_FALSE(schema.settle());  // refused, not thrown
    EXPECT_FALSE(schema.settle());  // and not tried again
    schema.truncate();
    EXPECT_FALSE(schema.any_unfinished());
    EXPECT_GT(schema.insert_one(), 0);
    EXPECT_TRUE(schema.any_unfinished());
    schema.drop();
  }
  admin.exec("DROP OWNED BY " + role);
  admin.exec("DROP ROLE " + role);
}

}  // namespace
}  // namespace pgjobd
