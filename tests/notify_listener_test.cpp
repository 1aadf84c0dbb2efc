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
using pgjobd::testing::FakeStatus;
using pgjobd::testing::JobGate;
using pgjobd::testing::StoreMethod;
using pgjobd::testing::wait_until;
using std::chrono::seconds;

TEST(NotifyListenerTest, WakesOnConnectAndOncePerNotification) {
  FakeDatabase database;
  Metrics metrics({"default"}, {});
  std::atomic<int> wakes{0};
  std::atomic<int> cancels{0};
  NotifyListener listener(
      database, [&](int /*sender_pid*/) { ++wakes; }, [&] { ++cancels; }, metrics);
  listener.start();
  ASSERT_TRUE(
      database.table().wait_until([&] { return database.table().listen_sessions_opened() == 1; }));
  // On connect, both: what was sent before was lost.
  ASSERT_TRUE(wait_until([&] { return wakes == 1 && cancels == 1; }, seconds(20)));

  database.notify();
  ASSERT_TRUE(wait_until([&] { return wakes == 2; }, seconds(20)));
  database.notify();
  database.notify(NotifyChannel::kCancel);
  database.notify();
  ASSERT_TRUE(wait_until([&] { return wakes == 4 && cancels == 2; }, seconds(20)));

  EXPECT_TRUE(
      database.table().wait_until([&] { return database.table().notifications_delivered() == 4; }));
  listener.stop();
  EXPECT_EQ(database.table().listen_sessions_closed(), 1);
  database.notify();  // nobody listens any more
  database.notify(NotifyChannel::kCancel);
  EXPECT_EQ(wakes, 4);
  EXPECT_EQ(cancels, 2);
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

// pgjobd_cancel's NOTIFY makes the daemon heartbeat at once, and the heartbeat's answer
// stops the handler: long before the next heartbeat (the lease here is an hour, so the
// next one is 20 minutes away). The job ends cancelled, not released or retried.
TEST(EngineNotifyTest, ACancelNotifyStopsTheRunningJobBeforeTheNextHeartbeat) {
  auto database = std::make_shared<FakeDatabase>();
  FakeJobTable& table = database->table();
  JobGate gate;
  Config config;
  config.metrics.listen = "";
  config.worker.concurrency = 2;
  config.lease.duration = Millis(3600000);
  Engine engine = make_engine(config, database);
  engine.register_handler(
      "gated", [&](const Job& job, std::stop_token stop) { return gate.run(job, stop); });
  const std::int64_t cancelled = table.add_job("gated");
  const std::int64_t other = table.add_job("gated");
  engine.start();
  ASSERT_TRUE(gate.wait_started(2));
  const int heartbeats_before = table.calls(StoreMethod::kHeartbeat);

  EXPECT_EQ(table.request_cancel(cancelled), "running");
  database->notify(NotifyChannel::kCancel);
  ASSERT_TRUE(gate.wait_stopped(cancelled));
  EXPECT_TRUE(
      table.wait_until([&] { return table.row(cancelled).status == FakeStatus::kCancelled; }));
  EXPECT_GT(table.calls(StoreMethod::kHeartbeat), heartbeats_before);
  EXPECT_FALSE(gate.stop_requested(other));  // only the cancelled job

  gate.release(other);
  EXPECT_TRUE(table.wait_until([&] { return table.row(other).status == FakeStatus::kDone; }));
  gate.release_all();
  engine.drain();
  EXPECT_EQ(table.row(cancelled).status, FakeStatus::kCancelled);
  EXPECT_EQ(table.row(cancelled).times_claimed, 1);  // never run again
}

}  // namespace
}  // namespace pgjobd
