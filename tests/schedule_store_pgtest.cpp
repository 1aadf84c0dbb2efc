// ScheduleStore against PostgreSQL: the compare-and-set under many concurrent firers,
// the tick's job, overlap, YAML reconciliation and the SQL functions.
#include "db/pg_schedule_store.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <pqxx/pqxx>
#include <thread>
#include <vector>

#include "support/test_database.hpp"

namespace pgjobd {
namespace {

using std::chrono::seconds;
using testing::TestSchema;

std::string schedules_table(const TestSchema& schema) {
  return "\"" + schema.name() + "\".pgjobd_schedules";
}

std::string fn(const TestSchema& schema, const std::string& name) {
  return "\"" + schema.name() + "\"." + name;
}

ScheduleConfig every_second(const std::string& type = "ping") {
  ScheduleConfig s;
  s.every = Millis(1000);
  s.type = type;
  return s;
}

ScheduleRow row_of(PgScheduleStore& store, const std::string& name) {
  for (const ScheduleRow& row : store.load_schedules()) {
    if (row.name == name) return row;
  }
  ADD_FAILURE() << "no schedule " << name;
  return {};
}

FireRequest request_for(const ScheduleRow& row, TickTime tick) {
  FireRequest request;
  request.name = row.name;
  request.timing = row.timing;
  request.expected_last_tick = row.last_tick;
  request.tick = tick;
  request.next_tick = tick + seconds(1);
  return request;
}

TEST(ScheduleStore, ManyThreadsFiringTheSameTickInsertExactlyOneJob) {
  TestSchema schema;
  PgScheduleStore setup(schema.config().database, "test");
  setup.reconcile({{"beat", every_second()}});
  constexpr int kThreads = 12;
  constexpr int kTicks = 10;
  std::vector<std::unique_ptr<PgScheduleStore>> stores;
  for (int i = 0; i < kThreads; ++i) {
    stores.push_back(std::make_unique<PgScheduleStore>(schema.config().database, "firer"));
    stores.back()->load_schedules();  // connect before the race
  }
  const ScheduleRow first = row_of(setup, "beat");
  for (int t = 1; t <= kTicks; ++t) {
    // Every thread read the same row: each asks to move last_tick from it to the next tick.
    const ScheduleRow row = row_of(setup, "beat");
    const FireRequest request = request_for(row, first.last_tick + seconds(t));
    std::atomic<int> fired{0};
    std::atomic<int> lost{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] {
        while (!go.load()) std::this_thread::yield();
        FireResult result = stores[i]->fire(request);
        (result == FireResult::kFired ? fired : lost).fetch_add(1);
      });
    }
    go = true;
    for (std::thread& thread : threads) thread.join();
    EXPECT_EQ(fired.load(), 1) << "tick " << t;
    EXPECT_EQ(lost.load(), kThreads - 1) << "tick " << t;
  }
  EXPECT_EQ(schema.count("unique_key LIKE 'schedule:beat:%'"), kTicks);
  EXPECT_EQ(schema.query("SELECT count(DISTINCT unique_key) FROM {jobs}"), std::to_string(kTicks));
  // A tick once passed can never be fired again, from any last_tick a caller claims.
  ScheduleRow now = row_of(setup, "beat");
  FireRequest again = request_for(now, now.last_tick);
  EXPECT_EQ(setup.fire(again), FireResult::kLost);
  again.expected_last_tick = first.last_tick;
  again.tick = first.last_tick + seconds(1);
  EXPECT_EQ(setup.fire(again), FireResult::kLost);
  EXPECT_EQ(schema.count(), kTicks);
}

TEST(ScheduleStore, TheTicksJobSaysItsScheduleTickAndLateness) {
  TestSchema schema;
  PgScheduleStore store(schema.config().database, "test");
  ScheduleConfig config = every_second("report");
  config.payload = R"({"kind":"nightly"})";
  config.queue = "reports";
  config.priority = 7;
  config.max_attempts = 2;
  store.reconcile({{"nightly", config}});
  ScheduleRow row = row_of(store, "nightly");
  FireRequest request =
      request_for(row, TickTime(seconds(row.last_tick.time_since_epoch() + seconds(1))));
  request.late = true;
  ASSERT_EQ(store.fire(request), FireResult::kFired);
  std::string tick = schema.query(
      "SELECT to_char(run_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') FROM {jobs}");
  EXPECT_EQ(schema.query("SELECT unique_key FROM {jobs}"), "schedule:nightly:" + tick);
  EXPECT_EQ(schema.query("SELECT payload::text FROM {jobs}"),
            R"({"kind": "nightly", "_schedule": {"late": true, "name": "nightly", "tick": ")" +
                tick + R"("}})");
  EXPECT_EQ(schema.query("SELECT concat_ws(',', type, queue, priority, max_attempts) FROM {jobs}"),
            "report,reports,7,2");
  ScheduleRow after = row_of(store, "nightly");
  EXPECT_EQ(after.last_tick, request.tick);
  EXPECT_EQ(after.next_tick, request.next_tick);
}

TEST(ScheduleStore, OverlapSkipInsertsNoJobWhileTheLastIsLive) {
  TestSchema schema;
  PgScheduleStore store(schema.config().database, "test");
  ScheduleConfig config = every_second();
  config.overlap = "skip";
  store.reconcile({{"s", config}});
  ScheduleRow row = row_of(store, "s");
  ASSERT_EQ(store.fire(request_for(row, row.last_tick + seconds(1))), FireResult::kFired);
  row = row_of(store, "s");
  EXPECT_EQ(store.fire(request_for(row, row.last_tick + seconds(1))), FireResult::kSkippedOverlap);
  EXPECT_EQ(schema.count(), 1);
  schema.exec("UPDATE {jobs} SET status = 'done', finished_at = now()");
  row = row_of(store, "s");
  EXPECT_EQ(store.fire(request_for(row, row.last_tick + seconds(1))), FireResult::kFired);
  EXPECT_EQ(schema.count(), 2);
  // A missed tick moves last_tick without a job.
  row = row_of(store, "s");
  FireRequest missed = request_for(row, row.last_tick + seconds(5));
  missed.insert_job = false;
  EXPECT_EQ(store.fire(missed), FireResult::kAdvanced);
  EXPECT_EQ(schema.count(), 2);
  EXPECT_EQ(row_of(store, "s").last_tick, missed.tick);
}

TEST(ScheduleStore, AChangedTimingOrAPausedScheduleRefusesTheFire) {
  TestSchema schema;
  PgScheduleStore store(schema.config().database, "test");
  store.reconcile({{"s", every_second()}});
  ScheduleRow row = row_of(store, "s");
  FireRequest stale = request_for(row, row.last_tick + seconds(1));
  stale.timing.every_seconds = 2;
  EXPECT_EQ(store.fire(stale), FireResult::kLost);
  schema.exec("SELECT " + fn(schema, "pgjobd_schedule_pause") + "('s')");
  EXPECT_EQ(store.fire(request_for(row, row.last_tick + seconds(1))), FireResult::kLost);
  EXPECT_EQ(schema.count(), 0);
}

// An operator's open transaction around pgjobd_schedule_pause('s') holds s's row: a fire
// of s answers kHeld at once and the store names the holder's pid; a reconciliation that
// must change s gives up after kReconcileLockWait; a fire of t is untouched. Once the
// transaction rolls back, s fires. The holder's session is ended by the server after 8 s
// idle in its transaction, so a fire that waits for it returns then (and fails the bound).
TEST(ScheduleStore, ARowAnotherSessionHoldsIsNeverWaitedFor) {
  TestSchema schema;
  PgScheduleStore store(schema.config().database, "test");
  store.reconcile({{"s", every_second()}, {"t", every_second()}});
  const ScheduleRow s = row_of(store, "s");
  const ScheduleRow t = row_of(store, "t");
  auto operator_session = open_connection(schema.config().database, "test");
  pqxx::work held(*operator_session);
  held.exec("SET LOCAL idle_in_transaction_session_timeout = '8s'");
  const int holder = held.exec("SELECT pg_backend_pid()")[0][0].as<int>();
  held.exec("SELECT " + fn(schema, "pgjobd_schedule_pause") + "('s')");

  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(store.fire(request_for(s, s.last_tick + seconds(1))), FireResult::kHeld);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(1));
  EXPECT_EQ(store.row_holder("s"), holder);
  EXPECT_EQ(store.row_holder("t"), std::nullopt);
  EXPECT_EQ(store.fire(request_for(t, t.last_tick + seconds(1))), FireResult::kFired);
  ScheduleConfig changed = every_second("pong");
  const auto reconcile_started = std::chrono::steady_clock::now();
  try {
    store.reconcile({{"s", changed}, {"t", every_second()}});
    ADD_FAILURE() << "the reconciliation changed a held row";
  } catch (const DbError& e) {
    EXPECT_EQ(e.sqlstate(), ScheduleStore::kLockNotAvailable) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - reconcile_started, std::chrono::seconds(4));

  held.abort();
  EXPECT_EQ(store.fire(request_for(s, s.last_tick + seconds(1))), FireResult::kFired);
  EXPECT_EQ(schema.count(), 2);
}

TEST(ScheduleStore, ReconcileAddsChangesRemovesAndNeverTouchesSqlSchedules) {
  TestSchema schema;
  PgScheduleStore store(schema.config().database, "test");
  schema.exec("SELECT " + fn(schema, "pgjobd_schedule_upsert") +
              "(name => 'app', type => 'x', cron => '0 3 * * *', timezone => 'Europe/Berlin')");
  ScheduleConfig cron;
  cron.cron = "30 2 * * *";
  cron.timezone = "Europe/Berlin";
  cron.type = "report";
  ReconcileReport first = store.reconcile({{"a", every_second()}, {"b", cron}, {"app", cron}});
  EXPECT_EQ(first.added, 2);
  EXPECT_EQ(first.changed, 0);
  EXPECT_EQ(first.held_by_sql, std::vector<std::string>{"app"});
  EXPECT_EQ(row_of(store, "app").timing.cron, "0 3 * * *");
  EXPECT_EQ(row_of(store, "app").source, "sql");

  ReconcileReport same = store.reconcile({{"a", every_second()}, {"b", cron}});
  EXPECT_EQ(same.added + same.changed + same.removed, 0);

  // A changed job field keeps last_tick; a changed timing moves it to now (no backfill).
  schema.exec("UPDATE " + schedules_table(schema) +
              " SET last_tick = last_tick - interval '1 hour'");
  const TickTime b_before = row_of(store, "b").last_tick;
  const TickTime a_before = row_of(store, "a").last_tick;
  cron.type = "report2";
  ScheduleConfig every2 = every_second();
  every2.every = Millis(2000);
  ReconcileReport changed = store.reconcile({{"a", every2}, {"b", cron}});
  EXPECT_EQ(changed.changed, 2);
  EXPECT_EQ(row_of(store, "b").last_tick, b_before);
  EXPECT_EQ(row_of(store, "b").type, "report2");
  EXPECT_GE(row_of(store, "a").last_tick, a_before + seconds(3500));
  EXPECT_EQ(row_of(store, "a").timing.every_seconds, 2);

  ReconcileReport removed = store.reconcile({{"b", cron}});
  EXPECT_EQ(removed.removed, 1);
  std::vector<std::string> names;
  for (const ScheduleRow& row : store.load_schedules()) names.push_back(row.name);
  EXPECT_EQ(names, (std::vector<std::string>{"app", "b"}));
  EXPECT_EQ(store.reconcile({}).removed, 1);
  EXPECT_EQ(store.load_schedules().size(), 1u);  // the SQL one stays
}

TEST(ScheduleStore, SqlFunctionsCheckTheirArgumentsAndLeaveYamlSchedulesAlone) {
  TestSchema schema;
  PgScheduleStore store(schema.config().database, "test");
  store.reconcile({{"y", every_second()}});
  const std::string upsert = "SELECT " + fn(schema, "pgjobd_schedule_upsert");
  auto error_of = [&](const std::string& sql) {
    try {
      schema.exec(sql);
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(error_of(upsert + "(name => 'y', type => 't', every => '5 seconds')")
                .find("schedule y is defined in the YAML config; change it there"),
            std::string::npos);
  EXPECT_NE(error_of("SELECT " + fn(schema, "pgjobd_schedule_delete") + "('y')")
                .find("schedule y is defined in the YAML config; remove it there"),
            std::string::npos);
  EXPECT_NE(
      error_of(upsert + "(name => 'n', type => 't')").find("give exactly one of cron and every"),
      std::string::npos);
  EXPECT_NE(
      error_of(upsert + "(name => 'n', type => 't', cron => '* *')").find("cron must be 5 fields"),
      std::string::npos);
  EXPECT_NE(error_of(upsert + "(name => 'n', type => 't', every => '1.5 seconds')")
                .find("every must be whole seconds"),
            std::string::npos);
  EXPECT_NE(error_of(upsert + "(name => 'n', type => 't', cron => '@daily', timezone => 'Mars/X')")
                .find("unknown timezone 'Mars/X'"),
            std::string::npos);
  EXPECT_NE(error_of(upsert + "(name => 'bad name', type => 't', cron => '@daily')")
                .find("name must be 1..100 letters"),
            std::string::npos);
  EXPECT_NE(error_of("SELECT " + fn(schema, "pgjobd_schedule_pause") + "('nope')")
                .find("no schedule 'nope'"),
            std::string::npos);

  schema.exec(upsert + "(name => 'n', type => 't', every => '1 minute', misfire => 'all')");
  ScheduleRow n = row_of(store, "n");
  EXPECT_EQ(n.timing.every_seconds, 60);
  EXPECT_EQ(n.misfire, MisfirePolicy::kAll);
  EXPECT_EQ(n.source, "sql");
  // Pausing a YAML schedule is allowed, and a reconciliation keeps it paused.
  schema.exec("SELECT " + fn(schema, "pgjobd_schedule_pause") + "('y')");
  store.reconcile({{"y", every_second()}});
  EXPECT_TRUE(row_of(store, "y").paused);
  // Resuming never fires the ticks missed while paused.
  schema.exec("UPDATE " + schedules_table(schema) +
              " SET last_tick = now() - interval '1 day' WHERE name = 'y'");
  schema.exec("SELECT " + fn(schema, "pgjobd_schedule_resume") + "('y')");
  EXPECT_EQ(schema.query("SELECT last_tick > now() - interval '1 minute' FROM " +
                         schedules_table(schema) + " WHERE name = 'y'"),
            "t");
  EXPECT_EQ(schema.query("SELECT " + fn(schema, "pgjobd_schedule_delete") + "('n')"), "t");
  EXPECT_EQ(schema.query("SELECT " + fn(schema, "pgjobd_schedule_delete") + "('n')"), "f");
}

}  // namespace
}  // namespace pgjobd
