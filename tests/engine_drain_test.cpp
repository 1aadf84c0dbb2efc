// The drain sequence through make_engine over the fake database: running jobs finish and
// their completions are written before the drain returns; after shutdown.timeout the
// jobs still running are stopped and released; nothing is claimed once the drain began.

#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <map>

#include "engine/engine_factory.hpp"
#include "pgjobd/engine.hpp"
#include "support/fake_job_store.hpp"
#include "support/job_gate.hpp"

namespace pgjobd {
namespace {

using pgjobd::testing::FakeDatabase;
using pgjobd::testing::FakeJobTable;
using pgjobd::testing::FakeStatus;
using pgjobd::testing::JobGate;
using pgjobd::testing::StoreMethod;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

Config drain_config(int concurrency, Millis shutdown_timeout) {
  Config config;
  config.metrics.listen = "";  // no HTTP endpoint
  config.worker.concurrency = concurrency;
  config.poll.min_interval = Millis(50);
  config.poll.max_interval = Millis(1000);
  config.shutdown.timeout = shutdown_timeout;
  return config;
}

class EngineDrainTest : public ::testing::Test {
 protected:
  void TearDown() override {
    table_.unblock_all();
    gate_.release_all();
    if (engine_) engine_->drain();
  }

  Engine& start_engine(const Config& config) {
    engine_.emplace(make_engine(config, database_));
    engine_->register_handler(
        "gated", [this](const Job& job, std::stop_token stop) { return gate_.run(job, stop); });
    engine_->start();
    // The LISTEN session is up: the listener is part of what drain() stops.
    EXPECT_TRUE(table_.wait_until([&] { return table_.listen_sessions_opened() >= 1; }));
    return *engine_;
  }

  const std::shared_ptr<FakeDatabase> database_ = std::make_shared<FakeDatabase>();
  FakeJobTable& table_ = database_->table();
  JobGate gate_;
  std::optional<Engine> engine_;  // last: drained before the gate goes away
};

TEST_F(EngineDrainTest, RunningJobsFinishAndTheirCompletionsAreWrittenBeforeDrainReturns) {
  const auto ids = table_.add_jobs(2, "gated");
  Engine& engine = start_engine(drain_config(2, Millis(30000)));
  ASSERT_TRUE(gate_.wait_started(2));

  table_.block(StoreMethod::kComplete);  // the database will hold up the final writes
  auto drained = std::async(std::launch::async, [&] { engine.drain(); });
  // The listener closes first: the drain has begun.
  ASSERT_TRUE(table_.wait_until([&] { return table_.listen_sessions_closed() >= 1; }));
  EXPECT_EQ(drained.wait_for(seconds(0)), std::future_status::timeout);

  gate_.release_all();  // the jobs finish well within shutdown.timeout
  ASSERT_TRUE(table_.wait_held(StoreMethod::kComplete));
  // Their completions wait for the database, and so does the drain.
  EXPECT_EQ(drained.wait_for(seconds(0)), std::future_status::timeout);
  table_.unblock(StoreMethod::kComplete);
  ASSERT_EQ(drained.wait_for(seconds(30)), std::future_status::ready);
  drained.get();

  EXPECT_TRUE(gate_.stopped().empty());  // none was cut short
  for (const auto id : ids) {
    EXPECT_EQ(table_.row(id).status, FakeStatus::kDone) << "job " << id;
  }
  const auto written = table_.completions();
  ASSERT_EQ(written.size(), 2u);
  for (const auto& completion : written) EXPECT_EQ(completion.outcome, Outcome::kDone);
  EXPECT_EQ(engine.unwritten_completions(), 0);
}

// The database stays away past the drain's flush deadline: the drain gives up, and says
// how many completions it could not write, so the daemon does not exit 0 over them.
TEST_F(EngineDrainTest, CompletionsUnwrittenAtTheFlushDeadlineAreCounted) {
  const auto ids = table_.add_jobs(2, "gated");
  Config config = drain_config(2, Millis(30000));
  config.lease.duration = Millis(1000);  // the flush deadline: min(lease, 10 s)
  Engine& engine = start_engine(config);
  ASSERT_TRUE(gate_.wait_started(2));
  EXPECT_EQ(engine.unwritten_completions(), 0);

  table_.fail_next(StoreMethod::kComplete, 1000000);  // down until after the deadline
  gate_.release_all();
  ASSERT_TRUE(table_.wait_calls(StoreMethod::kComplete, 1));
  engine.drain();

  EXPECT_EQ(engine.unwritten_completions(), 2);
  EXPECT_TRUE(table_.completions().empty());
  for (const auto id : ids) {
    EXPECT_EQ(table_.row(id).status, FakeStatus::kRunning) << "job " << id;  // for the rescuer
  }
  table_.fail_next(StoreMethod::kComplete, 0);
}

TEST_F(EngineDrainTest, AfterTheTimeoutJobsAreStoppedAndReleasedAndNothingNewIsClaimed) {
  const std::int64_t running = table_.add_job("gated");
  const auto waiting = table_.add_jobs(2, "gated");
  Engine& engine = start_engine(drain_config(1, Millis(200)));
  ASSERT_TRUE(gate_.wait_started(1));
  ASSERT_EQ(gate_.started()[0], running);
  // New work announced while the pool is full: nothing to claim it with.
  database_->notify();
  engine.wake();

  const auto drain_started = Clock::now();
  engine.drain();

  // Stopped only once shutdown.timeout had passed, and released (attempt not counted).
  ASSERT_EQ(gate_.stopped(), (std::set<std::int64_t>{running}));
  const auto stopped_at = gate_.stop_requested_at(running);
  ASSERT_TRUE(stopped_at.has_value());
  EXPECT_GE(*stopped_at - drain_started, milliseconds(200));
  const auto released = table_.row(running);
  EXPECT_EQ(released.status, FakeStatus::kPending);
  EXPECT_EQ(released.job.attempt, 0);
  EXPECT_EQ(released.times_claimed, 1);
  const auto written = table_.completions();
  ASSERT_EQ(written.size(), 1u);
  EXPECT_EQ(written[0].outcome, Outcome::kReleased);

  // Its slot freed after the drain began (at the stop request): the fetcher was already
  // stopped, so the waiting jobs were never claimed.
  for (const auto id : waiting) EXPECT_EQ(table_.row(id).times_claimed, 0) << "job " << id;
  // One claim: the limited one while the engine has not read the (empty) limits yet.
  EXPECT_EQ(table_.calls(StoreMethod::kClaim) + table_.calls(StoreMethod::kClaimLimited), 1);
}

// worker.prefetch: jobs claimed beyond the threads and not started when the drain begins go
// back to the queue at once (attempt not counted), for the other daemons, instead of
// being run during the drain; the job on the thread finishes.
TEST_F(EngineDrainTest, HeldJobsNotStartedAreReleasedAtOnceWithoutRunning) {
  // Quick jobs first: finished at pace, they give the next claim a prefetch budget.
  const auto quick = table_.add_jobs(30, "gated");
  for (const auto id : quick) gate_.release(id);
  const std::int64_t running = table_.add_job("gated");
  const std::int64_t held = table_.add_job("gated");
  Config config = drain_config(1, Millis(30000));
  Engine& engine = start_engine(config);
  ASSERT_TRUE(gate_.wait_started(31));
  ASSERT_EQ(gate_.started().back(), running);
  // The claim that took the running job took the next one too, beyond the one thread.
  ASSERT_TRUE(table_.wait_until([&] { return table_.row(held).status == FakeStatus::kRunning; }))
      << "the job after it was not claimed with it";

  auto drained = std::async(std::launch::async, [&] { engine.drain(); });
  ASSERT_TRUE(table_.wait_until([&] { return table_.row(held).status == FakeStatus::kPending; }))
      << "the held job was not released when the drain began";
  EXPECT_EQ(drained.wait_for(seconds(0)), std::future_status::timeout);  // the other runs on
  gate_.release(running);
  ASSERT_EQ(drained.wait_for(seconds(30)), std::future_status::ready);
  drained.get();

  const auto started = gate_.started();
  EXPECT_EQ(std::count(started.begin(), started.end(), held), 0) << "the held job was run";
  EXPECT_EQ(table_.row(held).job.attempt, 0);  // the claim's attempt undone
  EXPECT_EQ(table_.row(held).times_claimed, 1);
  EXPECT_EQ(table_.row(running).status, FakeStatus::kDone);
  EXPECT_EQ(engine.unwritten_completions(), 0);
}

// A daemon without a `limits:` section reads the limits on its claim session before its
// first claim, not only in the maintenance loop on another connection: with none defined,
// its first claim is already the plain one. (Daemons started together made limited
// claims until that loop's read, which came back empty under contention: bench/README.)
TEST_F(EngineDrainTest, TheClaimSessionReadsTheLimitsBeforeItsFirstClaim) {
  table_.block_role(StoreMethod::kLoadLimits, "maintenance");
  table_.add_jobs(3, "gated");
  start_engine(drain_config(1, Millis(30000)));
  ASSERT_TRUE(gate_.wait_started(1));
  EXPECT_EQ(table_.calls(StoreMethod::kClaimLimited), 0) << "a limited claim with no limit";
  EXPECT_GE(table_.calls(StoreMethod::kClaim), 1);
  EXPECT_TRUE(table_.wait_held(StoreMethod::kLoadLimits)) << "the maintenance loop's read";
}

// ... and with a limit defined, its first claim is the limited one.
TEST_F(EngineDrainTest, ALimitFoundBeforeTheFirstClaimAppliesToIt) {
  LimitConfig one;
  one.types = {"gated"};
  one.concurrency = 1;
  table_.set_limits({{"one", one, "another-daemon"}});
  table_.block_role(StoreMethod::kLoadLimits, "maintenance");
  table_.add_jobs(3, "gated");
  start_engine(drain_config(1, Millis(30000)));
  ASSERT_TRUE(gate_.wait_started(1));
  EXPECT_EQ(table_.calls(StoreMethod::kClaim), 0) << "a plain claim while a limit exists";
  EXPECT_GE(table_.calls(StoreMethod::kClaimLimited), 1);
}

// Until a read of the limits succeeds a daemon assumes some apply, and so claims no more
// than its free workers (README "Limits"). When the claim session's read failed, the
// maintenance loop's is the first: when it finds none, a claim loop waiting for its one
// busy worker looks again and takes the next job beyond it (worker.prefetch) without
// waiting for the worker.
TEST_F(EngineDrainTest, TheFirstReadOfTheLimitsFindingNoneLetsAWaitingClaimLoopPrefetch) {
  // The maintenance loop's read waits before it could take the failure: the claim
  // session's read fails.
  table_.block_role(StoreMethod::kLoadLimits, "maintenance");
  table_.fail_next(StoreMethod::kLoadLimits, 1);
  // Quick jobs first: finished at pace, they give the next claim a prefetch budget.
  const auto quick = table_.add_jobs(30, "gated");
  for (const auto id : quick) gate_.release(id);
  const std::int64_t running = table_.add_job("gated");
  const std::int64_t held = table_.add_job("gated");
  start_engine(drain_config(1, Millis(30000)));
  ASSERT_TRUE(gate_.wait_started(31));
  ASSERT_EQ(gate_.started().back(), running);
  for (const ClaimRequest& request : table_.claim_requests()) {
    ASSERT_EQ(request.limit, 1) << "a claim beyond the one worker before the limits were read";
  }
  EXPECT_EQ(table_.row(held).status, FakeStatus::kPending);

  table_.unblock(StoreMethod::kLoadLimits);  // the read finds no limit
  EXPECT_TRUE(table_.wait_until([&] { return table_.row(held).status == FakeStatus::kRunning; }))
      << "the claim loop was not told that the limits were lifted";
  EXPECT_EQ(gate_.started().back(), running) << "held for the worker, not run beside it";
}

TEST_F(EngineDrainTest, LeadershipIsHandedOverAndTheEngineOpensAStorePerPart) {
  Engine& engine = start_engine(drain_config(1, Millis(30000)));
  ASSERT_TRUE(table_.wait_calls(StoreMethod::kLeadAndRescue, 1));
  engine.drain();
  EXPECT_EQ(table_.resigned(), (std::vector<std::string>{engine.worker_id()}));
  auto roles = table_.opened_roles();
  std::sort(roles.begin(), roles.end());
  EXPECT_EQ(roles, (std::vector<std::string>{"completer", "fetcher", "finished notifier",
                                             "heartbeat", "maintenance", "retention"}));
  // Only the claim's and the completions' sessions pin their plans (StatementSet).
  EXPECT_EQ(table_.opened_uses(),
            (std::map<std::string, StoreUse>{{"completer", StoreUse::kHotPath},
                                             {"fetcher", StoreUse::kHotPath},
                                             {"finished notifier", StoreUse::kOccasional},
                                             {"heartbeat", StoreUse::kOccasional},
                                             {"maintenance", StoreUse::kOccasional},
                                             {"retention", StoreUse::kOccasional}}));
  engine.drain();  // safe twice
}

}  // namespace
}  // namespace pgjobd
