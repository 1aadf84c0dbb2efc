// Every loop survives an exception that is not a database error (a bug, a library's own
// exception): the claim, completion, maintenance, LISTEN and schedule loops count it under
// pgjobd_loop_errors_total{loop}, back off and go on, instead of ending the process.

#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <stdexcept>

#include "engine/engine_factory.hpp"
#include "engine/notify_listener.hpp"
#include "metrics/metrics.hpp"
#include "pgjobd/engine.hpp"
#include "schedule/scheduler.hpp"
#include "support/daemon_process.hpp"
#include "support/fake_job_store.hpp"
#include "support/fake_schedule_store.hpp"
#include "support/metrics_text.hpp"
#include "support/wait_until.hpp"

namespace pgjobd {
namespace {

using pgjobd::testing::FakeDatabase;
using pgjobd::testing::FakeScheduleStore;
using pgjobd::testing::FakeScheduleTable;
using pgjobd::testing::FakeStatus;
using pgjobd::testing::metric_value;
using pgjobd::testing::StoreMethod;
using pgjobd::testing::wait_until;
using std::chrono::seconds;

std::optional<double> loop_errors(const std::string& text, const std::string& loop) {
  return metric_value(text, "pgjobd_loop_errors_total", {{"loop", loop}});
}

TEST(LoopErrorsTest, ClaimCompletionAndMaintenanceLoopsSurviveAnExceptionThatIsNoDbError) {
  const auto database = std::make_shared<FakeDatabase>();
  auto& table = database->table();
  table.add_jobs(20, "quick");
  table.throw_next(StoreMethod::kClaim, 2);
  table.throw_next(StoreMethod::kComplete, 2);
  table.throw_next(StoreMethod::kReportDaemon, 1);  // the maintenance loop's first task
  Config config;
  config.metrics.listen = "127.0.0.1:0";
  config.worker.concurrency = 4;
  config.poll.min_interval = Millis(10);
  config.poll.max_interval = Millis(100);
  Engine engine = make_engine(config, database);
  engine.register_handler("quick", [](const Job&, std::stop_token) { return JobResult::done(); });
  engine.start();

  // Claimed and written after both loops threw twice; the maintenance loop went on to its
  // next tasks after its first one threw.
  EXPECT_TRUE(table.wait_until([&] { return table.count(FakeStatus::kDone) == 20; }))
      << table.count(FakeStatus::kDone) << " of 20 done";
  EXPECT_TRUE(table.wait_calls(StoreMethod::kLeadAndRescue, 1));
  EXPECT_TRUE(table.wait_calls(StoreMethod::kQueueStats, 1));
  const std::string text =
      pgjobd::testing::http_get(engine.http_port(), "/metrics").body;  // before the drain
  EXPECT_EQ(loop_errors(text, "claim"), 2) << text;
  EXPECT_EQ(loop_errors(text, "complete"), 2) << text;
  EXPECT_EQ(loop_errors(text, "maintenance"), 1) << text;
  // Not database errors: pgjobd_db_errors_total does not count them.
  EXPECT_EQ(metric_value(text, "pgjobd_db_errors_total", {{"operation", "claim"}}), 0.0) << text;
  engine.drain();
  EXPECT_EQ(engine.unwritten_completions(), 0);
}

TEST(LoopErrorsTest, ListenLoopSurvivesAnExceptionThatIsNoDbError) {
  FakeDatabase database;
  Metrics metrics({"default"}, {});
  std::atomic<int> wakes{0};
  NotifyListener listener(
      database,
      [&](int /*sender_pid*/) {
        // The wake-up on connect: the first one throws, as a bug in a callback would.
        if (++wakes == 1) throw std::runtime_error("a bug in the wake-up");
      },
      [] {}, metrics);
  listener.start();
  // Dropped its session and listened again, after a backoff.
  ASSERT_TRUE(
      database.table().wait_until([&] { return database.table().listen_sessions_opened() == 2; }));
  ASSERT_TRUE(wait_until([&] { return wakes == 2; }, seconds(20)));
  database.notify();
  EXPECT_TRUE(wait_until([&] { return wakes == 3; }, seconds(20)));
  listener.stop();
  EXPECT_EQ(loop_errors(pgjobd::testing::scrape(metrics), "listen"), 1);
}

TEST(LoopErrorsTest, SchedulePassSurvivesAnExceptionThatIsNoDbError) {
  auto table = std::make_shared<FakeScheduleTable>();
  Metrics metrics({"default"}, {});
  const schedule::SchedulerSettings settings{};
  schedule::Scheduler scheduler(std::make_unique<FakeScheduleStore>(table), &metrics, settings);
  ScheduleConfig beat;
  beat.every = Millis(10000);
  beat.type = "ping";
  scheduler.set_yaml(std::map<std::string, ScheduleConfig>{{"beat", beat}});
  table->set_throwing(true);
  const schedule::WallClock::time_point now = schedule::WallClock::now();
  schedule::WallClock::time_point next;
  ASSERT_NO_THROW(next = scheduler.run_once(now));
  EXPECT_EQ(next, now + settings.retry);  // backs off as after a database error
  EXPECT_EQ(loop_errors(pgjobd::testing::scrape(metrics), "schedule"), 1);
  table->set_throwing(false);
  ASSERT_NO_THROW(scheduler.run_once(next));  // the next pass works
  EXPECT_EQ(loop_errors(pgjobd::testing::scrape(metrics), "schedule"), 1);
}

}  // namespace
}  // namespace pgjobd
