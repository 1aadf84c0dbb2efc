// Live reload of a running engine: concurrency up and down without losing or re-running
// jobs, new handlers, and a rejected reload that keeps the old configuration.

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>

#include "pgjobd/engine.hpp"
#include "support/test_database.hpp"

namespace pgjobd {
namespace {

using testing::TestSchema;
using testing::wait_until;
using namespace std::chrono_literals;

// Counts the handler's concurrency and every job id it ran.
struct Recorder {
  std::atomic<int> running{0};
  std::atomic<int> peak{0};
  std::mutex mutex;
  std::multiset<std::int64_t> ran;

  Handler handler(std::chrono::milliseconds work) {
    return [this, work](const Job& job, std::stop_token) {
      const int now = ++running;
      for (int seen = peak.load(); now > seen && !peak.compare_exchange_weak(seen, now);) {
      }
      std::this_thread::sleep_for(work);  // the job's work, not synchronisation
      {
        std::lock_guard lock(mutex);
        ran.insert(job.id);
      }
      --running;
      return JobResult::done();
    };
  }
  void reset_peak() { peak = running.load(); }
  std::size_t ran_count() {
    std::lock_guard lock(mutex);
    return ran.size();
  }
};

TEST(EngineReload, ConcurrencyGoesUpAndDownWhileJobsRun) {
  TestSchema schema;
  schema.insert_jobs("work", 300);
  Config config = schema.config();
  config.worker.concurrency = 2;
  Recorder recorder;
  Engine engine(config);
  engine.register_handler("work", recorder.handler(20ms));
  engine.start();
  ASSERT_TRUE(wait_until([&] { return recorder.ran_count() >= 10; }, 30s));
  EXPECT_LE(recorder.peak.load(), 2);

  config.worker.concurrency = 8;
  EXPECT_TRUE(engine.reload(config).empty());
  ASSERT_TRUE(wait_until([&] { return engine.busy_workers() >= 6; }, 10s));

  config.worker.concurrency = 1;
  engine.reload(config);
  // Running jobs finish; then no more than one runs at a time.
  ASSERT_TRUE(wait_until([&] { return engine.busy_workers() <= 1; }, 10s));
  recorder.reset_peak();
  const std::size_t ran_before = recorder.ran_count();
  ASSERT_TRUE(wait_until([&] { return recorder.ran_count() >= ran_before + 10; }, 30s));
  EXPECT_LE(recorder.peak.load(), 1);

  config.worker.concurrency = 16;
  engine.reload(config);
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == 300; }, 60s));
  engine.drain();
  EXPECT_EQ(recorder.ran.size(), 300u);
  EXPECT_EQ(std::set<std::int64_t>(recorder.ran.begin(), recorder.ran.end()).size(), 300u);
}

TEST(EngineReload, NewHandlersStartClaimingTheirJobs) {
  TestSchema schema;
  schema.insert_jobs("later", 5);
  Config config = schema.config();
  config.handlers["now"] = HandlerConfig{};  // builtin noop
  config.handlers["now"].builtin = "noop";
  Engine engine(config);
  engine.start();
  // Nothing handles "later" yet.
  EXPECT_FALSE(wait_until([&] { return schema.count("status <> 'pending'") > 0; }, 300ms));
  config.handlers["later"] = config.handlers["now"];
  engine.reload(config);
  EXPECT_TRUE(wait_until([&] { return schema.count("status = 'done'") == 5; }, 10s));
  engine.drain();
}

TEST(EngineReload, RestartOnlySettingsAreReportedNotApplied) {
  TestSchema schema;
  Config config = schema.config();
  config.handlers["x"].builtin = "noop";
  Engine engine(config);
  engine.start();
  Config next = config;
  next.lease.duration = 99s;
  next.database.url += "?application_name=other";
  const auto notes = engine.reload(next);
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_NE(notes[0].find("database.url"), std::string::npos);
  EXPECT_NE(notes[1].find("lease.duration"), std::string::npos);
  engine.drain();
}

TEST(EngineReload, AnInvalidReloadKeepsTheOldConfiguration) {
  TestSchema schema;
  Config config = schema.config();
  config.worker.concurrency = 2;
  Recorder recorder;
  Engine engine(config);
  engine.register_handler("work", recorder.handler(10ms));
  engine.start();
  Config bad = config;
  bad.worker.concurrency = 50;
  bad.handlers["broken"].kind = HandlerConfig::Kind::kBuiltin;
  bad.handlers["broken"].builtin = "no-such-builtin";
  EXPECT_THROW(engine.reload(bad), std::invalid_argument);
  schema.insert_jobs("work", 40);
  engine.wake();
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == 40; }, 30s));
  engine.drain();
  EXPECT_LE(recorder.peak.load(), 2);  // the rejected concurrency of 50 never applied
}

}  // namespace
}  // namespace pgjobd

namespace pgjobd {
namespace {

// database.* needs a restart: until then sql handlers, even ones the reload adds, run
// against the database (and schema) the rest of the running engine uses.
TEST(EngineReload, SqlHandlersKeepTheRunningDatabaseWhenDatabaseSettingsChange) {
  TestSchema schema;
  const std::string side = "\"" + schema.name() + "\".side";
  schema.exec("CREATE TABLE " + side + " (job_id bigint)");
  schema.insert_jobs("rollup", 3);
  Config config = schema.config();
  config.handlers["x"].builtin = "noop";
  Engine engine(config);
  engine.start();

  Config next = config;
  // Unusable as a database: a handler built with it would fail every job.
  next.database.url = "postgresql://nobody:unused-pw@[::1/nowhere";
  next.database.schema = "no_such_schema";
  next.handlers["rollup"].kind = HandlerConfig::Kind::kSql;
  next.handlers["rollup"].builtin.clear();
  next.handlers["rollup"].sql = "INSERT INTO " + side + " (job_id) VALUES ($2)";
  const auto notes = engine.reload(next);
  EXPECT_EQ(notes.size(), 2u);  // database.url and database.schema need a restart
  EXPECT_TRUE(wait_until([&] { return schema.count("status = 'done'") == 3; }, 10s))
      << schema.query(
             "SELECT string_agg(status || ': ' || coalesce(last_error, ''), '; ') FROM "
             "{jobs}");
  EXPECT_EQ(schema.query("SELECT count(DISTINCT job_id) FROM " + side), "3");
  engine.drain();
}

}  // namespace
}  // namespace pgjobd
