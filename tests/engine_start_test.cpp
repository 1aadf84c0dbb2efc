// The start-up order through make_engine over the fake database: the first claim goes
// before the pool's threads and the parts with sessions of their own (maintenance,
// listener, scheduler) start, which wait for it no longer than the head start.

#include <gtest/gtest.h>

#include <filesystem>
#include <future>
#include <iterator>

#include "engine/engine_factory.hpp"
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
using std::chrono::milliseconds;
using std::chrono::seconds;

Config start_config(int concurrency) {
  Config config;
  config.metrics.listen = "";  // no HTTP endpoint
  config.worker.concurrency = concurrency;
  return config;
}

// This process's threads now.
long threads_now() {
  const std::filesystem::directory_iterator tasks("/proc/self/task");
  return std::distance(begin(tasks), end(tasks));
}

class EngineStartTest : public ::testing::Test {
 protected:
  void TearDown() override {
    table_.unblock_all();
    gate_.release_all();
    if (started_.valid()) started_.wait();
    if (engine_) engine_->drain();
  }

  // start() runs on its own thread: it waits for the first claim, which a test holds.
  void start_engine(Millis head_start, int concurrency = 2) {
    EngineTimings timings;
    timings.first_claim_head_start = head_start;
    engine_.emplace(make_engine(start_config(concurrency), database_, timings));
    engine_->register_handler(
        "gated", [this](const Job& job, std::stop_token stop) { return gate_.run(job, stop); });
    started_ = std::async(std::launch::async, [this] { engine_->start(); });
  }

  // Calls made by the maintenance loop at its start (it reports the daemon, then elects).
  int maintenance_calls() const {
    return table_.calls(StoreMethod::kReportDaemon) + table_.calls(StoreMethod::kLeadAndRescue) +
           table_.calls(StoreMethod::kHeartbeat);
  }

  const std::shared_ptr<FakeDatabase> database_ = std::make_shared<FakeDatabase>();
  FakeJobTable& table_ = database_->table();
  JobGate gate_;
  std::optional<Engine> engine_;  // drained before the gate goes away
  std::future<void> started_;
};

// On a two-core machine three backends starting beside the first claim's made it 10-15 ms
// later (bench/README, "Start-up, fifth round"): those sessions open after it.
TEST_F(EngineStartTest, TheFirstClaimGoesBeforeTheOtherSessionsOpen) {
  const auto id = table_.add_jobs(1, "gated").front();
  table_.block(StoreMethod::kClaim);
  start_engine(Millis(60000));  // a head start no test run reaches
  ASSERT_TRUE(table_.wait_held(StoreMethod::kClaim));
  EXPECT_EQ(started_.wait_for(milliseconds(0)), std::future_status::timeout);
  EXPECT_EQ(table_.listen_sessions_opened(), 0);
  EXPECT_EQ(maintenance_calls(), 0);

  table_.unblock(StoreMethod::kClaim);
  ASSERT_EQ(started_.wait_for(seconds(20)), std::future_status::ready);
  started_.get();
  ASSERT_TRUE(gate_.wait_started(1));
  EXPECT_EQ(table_.row(id).status, FakeStatus::kRunning);
  EXPECT_TRUE(table_.wait_until([&] { return table_.listen_sessions_opened() == 1; }));
  EXPECT_TRUE(table_.wait_until([&] { return maintenance_calls() > 0; }));
}

// The pool's threads are made after the first claim too: 64 of them made beside it took
// CPU from it and from its backend (bench/README, "Start-up, sixth round"). The jobs it
// claimed wait for the first of them.
TEST_F(EngineStartTest, ThePoolsThreadsAreMadeAfterTheFirstClaim) {
  constexpr int kWorkers = 48;  // more than the engine's other threads
  const auto id = table_.add_jobs(1, "gated").front();
  const long before = threads_now();
  table_.block(StoreMethod::kClaim);
  start_engine(Millis(60000), kWorkers);
  ASSERT_TRUE(table_.wait_held(StoreMethod::kClaim));
  // Absence, watched for a while: made before the claim, the threads appear within it (a
  // few ms each) and the wait ends early.
  EXPECT_FALSE(
      testing::wait_until([&] { return threads_now() - before >= kWorkers; }, milliseconds(500)))
      << "pool threads made before the first claim";

  table_.unblock(StoreMethod::kClaim);
  ASSERT_EQ(started_.wait_for(seconds(20)), std::future_status::ready);
  started_.get();
  EXPECT_GE(threads_now() - before, kWorkers);
  ASSERT_TRUE(gate_.wait_started(1));
  EXPECT_EQ(table_.row(id).status, FakeStatus::kRunning);
}

// A first claim that hangs (a database that accepted the session, then stalled) holds
// the other parts back for the head start only: the maintenance and the listener run
// while it still hangs.
TEST_F(EngineStartTest, AFirstClaimThatHangsHoldsTheOthersBackForTheHeadStartOnly) {
  table_.block(StoreMethod::kClaim);
  start_engine(Millis(50));
  ASSERT_EQ(started_.wait_for(seconds(20)), std::future_status::ready);
  started_.get();
  EXPECT_TRUE(table_.wait_until([&] { return table_.listen_sessions_opened() == 1; }));
  EXPECT_TRUE(table_.wait_until([&] { return maintenance_calls() > 0; }));
  EXPECT_EQ(table_.held(StoreMethod::kClaim), 1);  // the first claim hangs all along
}

}  // namespace
}  // namespace pgjobd
