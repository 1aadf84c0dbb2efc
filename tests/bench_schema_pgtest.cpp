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

// A scratch bench schema named after the test's own, and the test's session beside it.
struct BenchScratch {
  testing::TestSchema admin;
  DatabaseConfig db = [this] {
    DatabaseConfig config = admin.config().database;
    config.schema = admin.name() + "_bench";
    return config;
  }();
  BenchSchema schema{db, "noop"};
  std::string jobs = quote_identifier(db.schema) + ".jobs";
};

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
  BenchScratch scratch;
  auto& [admin, db, schema, jobs] = scratch;
  schema.recreate();
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
// and the range is finished once each of them is done. It polls the end while the engine
// works on behind the range: read row by row, 100,000 done jobs beside 10,000,000 pending
// ones took 78 ms a poll (157,000 buffers), which made the backlog's last jobs look 300 ms
// late and took the CPU the engine was timed on. The cheap check sees a job of the range
// running, or still first in claim order, and nothing behind the range.
TEST(BenchSchema, TheFirstDueJobsAreAConsecutiveRangeAheadOfTheBacklog) {
  BenchScratch scratch;
  auto& [admin, db, schema, jobs] = scratch;
  schema.recreate();
  schema.insert_unserved(3);  // due, higher priority, another type: not the bench's
  schema.insert_pending(10);
  const auto [first, last] = schema.first_due_ids(4);  // 8-13 pending behind
  EXPECT_EQ(first, 4);
  EXPECT_EQ(last, 7);
  EXPECT_EQ(schema.first_due_ids(11), (std::pair<std::int64_t, std::int64_t>{0, 0}));
  EXPECT_TRUE(schema.any_unfinished_between(first, last));
  EXPECT_TRUE(schema.first_due_unfinished(first, last));
  admin.exec("UPDATE " + jobs +
             " SET status = 'done', attempts = 1, started_at = now(), finished_at = now() "
             "WHERE id BETWEEN 4 AND 5");
  EXPECT_TRUE(schema.first_due_unfinished(first, last));  // 6 is first in claim order
  admin.exec("UPDATE " + jobs +
             " SET status = 'running', attempts = 1, locked_by = 'w', started_at = now(),"
             " locked_until = now() + interval '1 minute' WHERE id IN (6, 9)");
  EXPECT_TRUE(schema.first_due_unfinished(first, last));  // 7 is first in claim order
  admin.exec("UPDATE " + jobs +
             " SET status = 'done', finished_at = now(), locked_until = NULL WHERE id = 7");
  EXPECT_TRUE(schema.any_unfinished_between(first, last));  // 6 is not done
  EXPECT_FALSE(schema.any_unfinished_between(first, first + 1));
  EXPECT_TRUE(schema.first_due_unfinished(first, last));  // 6 still runs
  admin.exec("UPDATE " + jobs +
             " SET status = 'done', finished_at = now(), locked_until = NULL WHERE id = 6");
  EXPECT_FALSE(schema.first_due_unfinished(first, last));  // 9 runs and 8 waits: behind
  EXPECT_FALSE(schema.any_unfinished_between(first, last));
  schema.drop();
}

// --keep-backlog: a schema kept from an earlier run is reused, its finished jobs gone and
// its pending ones counted for the top-up; none kept reads -1.
TEST(BenchSchema, AKeptBacklogIsReusedWithItsPendingJobs) {
  BenchScratch scratch;
  auto& [admin, db, schema, jobs] = scratch;
  schema.drop();
  EXPECT_EQ(schema.reuse_pending(), -1);
  schema.recreate();
  schema.insert_pending(10);
  schema.insert_finished(4);
  EXPECT_EQ(schema.reuse_pending(), 10);
  EXPECT_EQ(admin.query("SELECT count(*) FROM " + jobs), "10");
  schema.drop();
}

}  // namespace
}  // namespace pgjobd
