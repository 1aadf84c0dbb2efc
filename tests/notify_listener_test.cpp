// NotifyListener over the fake database: a wake-up on connect (notifications sent before
// were lost) and one per NOTIFY; stop closes the session. And the engine claims at once
// on a NOTIFY, long before its next poll.

#include "engine/notify_listener.hpp"

#include <gtest/gtest.h>

#include <atomic>

#include "engine/engine_factory.hpp"
#include "metrics/metrics.hpp"
#include "pgjobd/engine.hpp"
#include "support/fake_job_store.hpp"
#include "support/job_gate.hpp"
#include "support/wait_until.hpp"

namespace pgjobd {
namespace {

using pgjobd::testing::FakeDatabase;
using pgjobd::testing::FakeJobTable;
using pgjobd::testing::JobGate;
using pgjobd::testing::StoreMethod;
using pgjobd::testing::wait_until;
using std::chrono::seconds;

TEST(NotifyListenerTest, WakesOnConnectAndOncePerNotification) {
  FakeDatabase database;
  Metrics metrics({"default"}, {});
  std::atomic<int> wakes{0};
  NotifyListener listener(
      database, [&] { ++wakes; }, metrics);
  listener.start();
  ASSERT_TRUE(
      database.table().wait_until([&] { return database.table().listen_sessions_opened() == 1; }));
  ASSERT_TRUE(wait_until([&] { return wakes == 1; }, seconds(20)));  // on connect

  database.notify();
  ASSERT_TRUE(wait_until([&] { return wakes == 2; }, seconds(20)));
  database.notify();
  database.notify();
  ASSERT_TRUE(wait_until([&] { return wakes == 4; }, seconds(20)));

  EXPECT_TRUE(
      database.table().wait_until([&] { return database.table().notifications_delivered() == 3; }));
  listener.stop();
  EXPECT_EQ(database.table().listen_sessions_closed(), 1);
  database.notify();  // nobody listens any more
  EXPECT_EQ(wakes, 4);
}

TEST(EngineNotifyTest, ANotifyMakesTheEngineClaimBeforeItsNextPoll) {
  auto database = std::make_shared<FakeDatabase>();
  FakeJobTable& table = database->table();
  JobGate gate;
  Config config;
  config.metrics.listen = "";
  config.worker.concurrency = 2;
  config.poll.min_interval = config.poll.max_interval = Millis(600000);  // ten minutes
  Engine engine = make_engine(config, database);
  engine.register_handler(
      "gated", [&](const Job& job, std::stop_token stop) { return gate.run(job, stop); });
  engine.start();
  // A first NOTIFY, delivered, shows the listener connected and past its wake-up on
  // connect; the claims these wake-ups cause find nothing, and the next poll is ten
  // minutes away.
  ASSERT_TRUE(table.wait_until([&] { return table.listen_sessions_opened() == 1; }));
  database->notify();
  ASSERT_TRUE(table.wait_until([&] { return table.notifications_delivered() == 1; }));

  const std::int64_t id = table.add_job("gated");
  database->notify();
  ASSERT_TRUE(gate.wait_started(1));
  EXPECT_EQ(gate.started()[0], id);
  EXPECT_TRUE(table.wait_until([&] { return table.notifications_delivered() == 2; }));
  gate.release_all();
  engine.drain();
}

}  // namespace
}  // namespace pgjobd
