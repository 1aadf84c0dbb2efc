// BenchSchema against PostgreSQL: the scratch schema's life cycle, a role that may not
// CHECKPOINT (the benchmark then runs on, reporting checkpointed: false), and an end-of-run
// check that does not read the rows no burn-down takes.

#include "db/bench/bench_schema.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include "db/sql_text.hpp"
#include "support/test_database.hpp"
#include "support/wait_until.hpp"

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

// any_unfinished runs inside the timing, polled at the end of every burn-down, when the
// statistics still count the burnt-down jobs as pending. Planned on them, a plain EXISTS
// took a sequential scan and read every unserved row (25-60 ms per check with 200,000 of
// them). Told by the index's scan counter.
TEST(BenchSchema, TheEndOfRunCheckReadsTheServedTypeThroughItsIndex) {
  testing::TestSchema admin;
  DatabaseConfig db = admin.config().database;
  db.schema = admin.name() + "_bench";
  BenchSchema schema(db, "noop");
  schema.recreate();
  const std::string jobs = quote_identifier(db.schema) + ".jobs";
  admin.exec("ALTER TABLE " + jobs + " SET (autovacuum_enabled = false)");
  schema.insert_unserved(20000);
  schema.insert_pending(5000);
  schema.settle();
  // The burn-down, by primary key (ids 20,001 on): no scan the counters below count.
  admin.exec("SET enable_seqscan = off");
  admin.exec("UPDATE " + jobs + " SET status = 'done', finished_at = now() WHERE id > 20000");
  // Reported by the check's session when it goes idle (within about 10 s). The plain EXISTS
  // read no index here: a sequential scan.
  const std::string index_scans = "SELECT idx_scan FROM pg_stat_user_indexes WHERE schemaname = '" +
                                  db.schema + "' AND indexrelname = 'jobs_claim_type_idx'";
  const std::string before = admin.query(index_scans);
  EXPECT_FALSE(schema.any_unfinished());
  EXPECT_TRUE(
      testing::wait_until([&] { return std::stol(admin.query(index_scans)) > std::stol(before); },
                          std::chrono::seconds(15)))
      << "the check did not read jobs_claim_type_idx";
  schema.drop();
}

// The backlog phase times the first n jobs in claim order, whatever is pending behind them:
// their ids are a consecutive range (insert_pending numbers them so), ahead of the rest,
// and the range is finished once each of them is done.
TEST(BenchSchema, TheFirstDueJobsAreAConsecutiveRangeAheadOfTheBacklog) {
  testing::TestSchema admin;
  DatabaseConfig db = admin.config().database;
  db.schema = admin.name() + "_bench";
  BenchSchema schema(db, "noop");
  schema.recreate();
  schema.insert_unserved(3);  // due, higher priority, another type: not the bench's
  schema.insert_pending(10);
  const auto [first, last] = schema.first_due_ids(4);
  EXPECT_EQ(first, 4);
  EXPECT_EQ(last, 7);
  EXPECT_EQ(schema.first_due_ids(11), (std::pair<std::int64_t, std::int64_t>{0, 0}));
  EXPECT_TRUE(schema.any_unfinished_between(first, last));
  admin.exec("UPDATE " + quote_identifier(db.schema) +
             ".jobs SET status = 'done', attempts = 1, started_at = now(), finished_at = now() "
             "WHERE id BETWEEN 4 AND 6");
  EXPECT_TRUE(schema.any_unfinished_between(first, last));  // 7 is not done
  EXPECT_FALSE(schema.any_unfinished_between(first, last - 1));
  schema.drop();
}

}  // namespace
}  // namespace pgjobd
