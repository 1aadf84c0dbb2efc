// LeaseGuard: a handler whose lease ran out without a renewal is stopped, and not before.

#include "engine/lease_guard.hpp"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

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

  LeaseGuard& start_guard(Millis lease, Millis margin) {
    guard_ = std::make_unique<LeaseGuard>(*pool_, lease, margin);
    guard_->start();
    return *guard_;
  }

  // Renews `jobs` every 20 ms, as heartbeats that keep up would, for `span`.
  void keep_renewing(const std::vector<JobAttempt>& jobs, Millis span) {
    const auto until = Clock::now() + span;
    while (Clock::now() < until) {
      pool_->renewed(jobs, Clock::now());
      std::this_thread::sleep_for(Millis(20));
    }
  }

  JobGate gate_;
  std::unique_ptr<WorkerPool> pool_;
  std::unique_ptr<LeaseGuard> guard_;  // last: stopped before the pool
};

TEST_F(LeaseGuardTest, StopsAHandlerOnceItsLeaseRanOutWithoutRenewal) {
  const auto submitted = Clock::now();
  pool_->submit({gated_job(1)});
  ASSERT_TRUE(gate_.wait_started(1));
  // Lease 400 ms less a 100 ms margin: stopped no earlier than 300 ms after submission
  // (the lease runs from the claim when no renewal came).
  start_guard(Millis(400), Millis(100));

  ASSERT_TRUE(gate_.wait_stopped(1));
  const auto stopped_at = gate_.stop_requested_at(1);
  ASSERT_TRUE(stopped_at.has_value());
  EXPECT_GE(*stopped_at - submitted, Millis(300));
}

// Each job by its own renewals: one whose row another session holds misses the renewals
// the others get, and is stopped alone. The renewals span three leases, so without them
// the kept job would have been stopped too.
TEST_F(LeaseGuardTest, StopsOnlyTheJobWhoseRenewalsStopped) {
  pool_->submit({gated_job(1), gated_job(2)});
  ASSERT_TRUE(gate_.wait_started(2));
  LeaseGuard& guard = start_guard(Millis(300), Millis(0));
  ASSERT_EQ(guard.period(), Millis(50));
  keep_renewing({{1, 1}}, Millis(900));
  EXPECT_TRUE(gate_.stop_requested(2));
  EXPECT_FALSE(gate_.stop_requested(1));
  EXPECT_EQ(pool_->busy(), 1);
}

TEST_F(LeaseGuardTest, PeriodIsATenthOfTheEffectiveLeaseWithinBounds) {
  const auto guard_for = [&](Millis lease, Millis margin) {
    return LeaseGuard(*pool_, lease, margin).period();
  };
  EXPECT_EQ(guard_for(Millis(30000), Millis(2000)), Millis(1000));  // capped at 1 s
  EXPECT_EQ(guard_for(Millis(5000), Millis(500)), Millis(450));
  EXPECT_EQ(guard_for(Millis(100), Millis(0)), Millis(50));  // at least 50 ms
  // A margin above half the lease is cut to half: 2000 ms effective, not 500.
  EXPECT_EQ(guard_for(Millis(4000), Millis(3500)), Millis(200));
}

}  // namespace
}  // namespace pgjobd
