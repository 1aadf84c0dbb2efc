// LeaseGuard: a handler whose lease ran out without a renewal is stopped, and not before.

#include "engine/lease_guard.hpp"

#include <gtest/gtest.h>

#include <atomic>

#include "engine/worker_pool.hpp"
#include "support/job_gate.hpp"
#include "support/wait_until.hpp"

namespace pgjobd {
namespace {

using pgjobd::testing::JobGate;
using pgjobd::testing::wait_until;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

Job gated_job(std::int64_t id) {
  Job job;
  job.id = id;
  job.queue = "default";
  job.type = "gated";
  return job;
}

class LeaseGuardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WorkerConfig workers;
    workers.concurrency = 2;
    pool_ = std::make_unique<WorkerPool>(
        workers, [this](const Job& job, const JobStop& stop) { return gate_.execute(job, stop); },
        [](Completion) {}, [](int, bool) {});
    pool_->start();
  }
  void TearDown() override {
    if (guard_) guard_->stop();
    gate_.release_all();
  }

  // The guard reads the last renewal through this; each read is one pass of its loop.
  LeaseGuard& start_guard(Millis lease, Millis margin, std::function<Clock::time_point()> renewal) {
    guard_ = std::make_unique<LeaseGuard>(
        *pool_,
        [this, renewal = std::move(renewal)] {
          ++passes_;
          return renewal();
        },
        lease, margin);
    guard_->start();
    return *guard_;
  }

  JobGate gate_;
  std::atomic<int> passes_{0};
  std::unique_ptr<WorkerPool> pool_;
  std::unique_ptr<LeaseGuard> guard_;  // last: stopped before the pool
};

TEST_F(LeaseGuardTest, StopsAHandlerOnceItsLeaseRanOutWithoutRenewal) {
  const auto long_ago = Clock::now() - std::chrono::hours(1);  // heartbeats stopped reaching
  const auto submitted = Clock::now();
  pool_->submit({gated_job(1)});
  ASSERT_TRUE(gate_.wait_started(1));
  // Lease 400 ms less a 100 ms margin: stopped no earlier than 300 ms after submission
  // (the lease runs from the claim, however old the last renewal).
  start_guard(Millis(400), Millis(100), [long_ago] { return long_ago; });

  ASSERT_TRUE(gate_.wait_stopped(1));
  const auto stopped_at = gate_.stop_requested_at(1);
  ASSERT_TRUE(stopped_at.has_value());
  EXPECT_GE(*stopped_at - submitted, Millis(300));
}

TEST_F(LeaseGuardTest, DoesNotStopWhileRenewalsKeepUp) {
  pool_->submit({gated_job(1)});
  ASSERT_TRUE(gate_.wait_started(1));
  // Each renewal read is "just now". The lease is long enough that a loaded machine
  // pausing the guard between reading it and checking the pool cannot expire it.
  LeaseGuard& guard = start_guard(Millis(300), Millis(0), [] { return Clock::now(); });
  ASSERT_EQ(guard.period(), Millis(50));
  // Each pass waits a period first, so eight passes span more than a lease: without the
  // renewals the job would have been stopped by then.
  ASSERT_TRUE(wait_until([&] { return passes_ >= 8; }, seconds(20)));
  EXPECT_FALSE(gate_.stop_requested(1));
  EXPECT_EQ(pool_->busy(), 1);
}

TEST_F(LeaseGuardTest, PeriodIsATenthOfTheEffectiveLeaseWithinBounds) {
  const auto guard_for = [&](Millis lease, Millis margin) {
    return LeaseGuard(
               *pool_, [] { return Clock::now(); }, lease, margin)
        .period();
  };
  EXPECT_EQ(guard_for(Millis(30000), Millis(2000)), Millis(1000));  // capped at 1 s
  EXPECT_EQ(guard_for(Millis(5000), Millis(500)), Millis(450));
  EXPECT_EQ(guard_for(Millis(100), Millis(0)), Millis(50));  // at least 50 ms
  // A margin above half the lease is cut to half: 2000 ms effective, not 500.
  EXPECT_EQ(guard_for(Millis(4000), Millis(3500)), Millis(200));
}

}  // namespace
}  // namespace pgjobd
