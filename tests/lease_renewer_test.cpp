// LeaseRenewer: heartbeats cover running jobs and jobs whose completion is still unwritten,
// a lost lease stops its handler, a cancel is learnt at the next heartbeat, a failed
// heartbeat is no renewal, a row another session holds is skipped, and nothing on the
// maintenance loop holds heartbeats up.

#include "engine/lease_renewer.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "engine/maintenance.hpp"
#include "support/metrics_text.hpp"
#include "support/pool_fixture.hpp"
#include "support/wait_until.hpp"

namespace pgjobd {
namespace {

using pgjobd::testing::FakeStatus;
using pgjobd::testing::PoolFixture;
using pgjobd::testing::StoreMethod;
using pgjobd::testing::wait_until;
using std::chrono::seconds;
using Attempts = std::vector<JobAttempt>;

Attempts sorted_attempts(Attempts jobs) {
  std::sort(jobs.begin(), jobs.end());
  return jobs;
}

class LeaseRenewerTest : public PoolFixture {
 protected:
  // A lease of 300 ms: a heartbeat every 100 ms, so a test sees several in well under a
  // second.
  LeaseRenewer& start_renewer() {
    renewer_ = std::make_unique<LeaseRenewer>(
        Millis(300), "worker-1", database_.open_store("heartbeat", StoreUse::kOccasional), *pool_,
        metrics_, health_, [this] { return completer_->queued_jobs(); });
    renewer_->start();
    return *renewer_;
  }

  // The set a heartbeat sends once everything the test did so far is visible: that of
  // the second heartbeat to start after now (the first may have read the pool before).
  Attempts next_heartbeat_set() {
    const int seen = table_.calls(StoreMethod::kHeartbeat);
    EXPECT_TRUE(table_.wait_calls(StoreMethod::kHeartbeat, seen + 2));
    const auto sets = table_.heartbeats();
    return sets.size() > static_cast<std::size_t>(seen + 1) ? sets[seen + 1] : Attempts{};
  }

  std::unique_ptr<LeaseRenewer> renewer_;  // last: stopped before the pool
};

TEST_F(LeaseRenewerTest, HeartbeatsRunningJobsAndJobsWhoseCompletionIsPending) {
  const Attempts jobs = run_jobs(3);
  table_.block(StoreMethod::kComplete);  // the database holds up the completer
  gate_.release(jobs[2].id);
  ASSERT_TRUE(table_.wait_held(StoreMethod::kComplete));
  ASSERT_TRUE(wait_until([&] { return pool_->running().size() == 2; }, seconds(20)));

  start_renewer();
  // Job 3 has left the pool but its "done" is not written: if its lease lapsed, the
  // rescuer would run it again.
  EXPECT_EQ(next_heartbeat_set(), sorted_attempts(jobs));
  for (const auto& job : jobs) EXPECT_FALSE(gate_.stop_requested(job.id)) << job.id;

  table_.unblock(StoreMethod::kComplete);
  ASSERT_TRUE(table_.wait_until([&] { return table_.count(FakeStatus::kDone) == 1; }));
  ASSERT_TRUE(wait_until([&] { return completer_->queued_jobs().empty(); }, seconds(20)));
  EXPECT_EQ(next_heartbeat_set(), sorted_attempts({jobs[0], jobs[1]}));
}

TEST_F(LeaseRenewerTest, StopsTheHandlerWhoseLeaseWasLostAndOnlyThatOne) {
  const Attempts jobs = run_jobs(2);
  LeaseRenewer& renewer = start_renewer();
  ASSERT_TRUE(table_.wait_calls(StoreMethod::kHeartbeat, 1));

  table_.take_over(jobs[1].id);  // rescued and claimed elsewhere: the heartbeat drops it
  ASSERT_TRUE(gate_.wait_stopped(jobs[1].id));
  EXPECT_FALSE(gate_.stop_requested(jobs[0].id));
  // Once job 2 has left the pool and its (stale) release is written, heartbeats carry job 1
  // alone, and never stop it.
  ASSERT_TRUE(
      wait_until([&] { return pool_->running().size() == 1 && completer_->queued_jobs().empty(); },
                 seconds(20)));
  EXPECT_EQ(next_heartbeat_set(), (Attempts{jobs[0]}));
  EXPECT_FALSE(gate_.stop_requested(jobs[0].id));
  renewer.stop();
}

// Without any notification (LISTEN off, or the NOTIFY lost), the next heartbeat learns of
// a cancel request and stops that handler, once; the job ends cancelled, not released.
TEST_F(LeaseRenewerTest, HeartbeatStopsTheHandlerOfACancelledJobAndOnlyThatOne) {
  const Attempts jobs = run_jobs(2);
  LeaseRenewer& renewer = start_renewer();
  ASSERT_TRUE(table_.wait_calls(StoreMethod::kHeartbeat, 1));

  EXPECT_EQ(table_.request_cancel(jobs[0].id), "running");
  ASSERT_TRUE(gate_.wait_stopped(jobs[0].id));
  EXPECT_FALSE(gate_.stop_requested(jobs[1].id));
  ASSERT_TRUE(
      table_.wait_until([&] { return table_.row(jobs[0].id).status == FakeStatus::kCancelled; }));
  const auto completions = table_.completions();
  ASSERT_EQ(completions.size(), 1U);
  EXPECT_EQ(completions[0].outcome, Outcome::kCancelled);
  // Heartbeats go on for the other job and never stop it.
  const int seen = table_.calls(StoreMethod::kHeartbeat);
  ASSERT_TRUE(table_.wait_calls(StoreMethod::kHeartbeat, seen + 2));
  EXPECT_FALSE(gate_.stop_requested(jobs[1].id));
  EXPECT_EQ(table_.row(jobs[1].id).status, FakeStatus::kRunning);
  renewer.stop();
}

// A handler that returned a failure before the cancel reached it: the completion reads the
// cancel request, so the job ends cancelled and is never retried. One that succeeded
// stays done.
TEST_F(LeaseRenewerTest, ACancelWinsOverAFailureButNotOverDone) {
  auto store = database_.open_store("test", StoreUse::kOccasional);
  const std::int64_t failing = table_.add_job("gated");
  const std::int64_t succeeding = table_.add_job("gated");
  const auto jobs = store->claim({{{"default", 2}}, {"gated"}, 2, "worker-1", Millis(300)});
  ASSERT_EQ(jobs.size(), 2U);
  EXPECT_EQ(table_.request_cancel(failing), "running");
  EXPECT_EQ(table_.request_cancel(succeeding), "running");
  store->complete({{{failing, 1}, Outcome::kRetry, "boom", Millis(10)},
                   {{succeeding, 1}, Outcome::kDone, {}, Millis(0)}},
                  "worker-1", false);
  EXPECT_EQ(table_.row(failing).status, FakeStatus::kCancelled);
  EXPECT_EQ(table_.row(succeeding).status, FakeStatus::kDone);
  // Cancelling a finished job changes nothing.
  EXPECT_EQ(table_.request_cancel(succeeding), "done");
}

// A heartbeat that never reached the database renews nothing: the job's lease runs out and
// LeaseGuard stops it. Once heartbeats go through again, jobs are renewed.
TEST_F(LeaseRenewerTest, FailedHeartbeatIsNoRenewal) {
  const Attempts jobs = run_jobs(1);
  table_.fail_next(StoreMethod::kHeartbeat, 1000);
  start_renewer();
  ASSERT_TRUE(table_.wait_calls(StoreMethod::kHeartbeat, 2));
  EXPECT_NE(health_.problems().find("heartbeat"), std::string::npos) << health_.problems();
  // Its lease runs out by its claim time alone: heartbeats every 100 ms that counted would
  // keep it from ever doing so.
  EXPECT_TRUE(wait_until([&] { return pool_->stop_expired(Millis(300)) == jobs; }, seconds(20)));

  table_.fail_next(StoreMethod::kHeartbeat, 0);
  const Attempts more = run_jobs(1);
  EXPECT_TRUE(wait_until([&] { return health_.problems().empty(); }, seconds(20)));
  // Ten heartbeats later (a second), the new job was renewed within far less than that.
  const int seen = table_.calls(StoreMethod::kHeartbeat);
  ASSERT_TRUE(table_.wait_calls(StoreMethod::kHeartbeat, seen + 10));
  EXPECT_TRUE(pool_->stop_expired(Millis(800)).empty());
  EXPECT_FALSE(gate_.stop_requested(more[0].id));
}

// An application holds one running job's row: the heartbeat skips it (not renewed, still
// ours), renews the others, and never stops any. It is said once in the log and the metric.
TEST_F(LeaseRenewerTest, ARowAnotherSessionHoldsIsNotRenewedAndNotLost) {
  const Attempts jobs = run_jobs(2);
  table_.hold_row(jobs[0].id);
  LeaseRenewer& renewer = start_renewer();
  ASSERT_TRUE(table_.wait_calls(StoreMethod::kHeartbeat, 3));
  EXPECT_FALSE(gate_.stop_requested(jobs[0].id));
  EXPECT_FALSE(gate_.stop_requested(jobs[1].id));
  // Job 2's renewals keep its lease; job 1 has had none since its claim.
  const auto expired = pool_->stop_expired(Millis(250));
  EXPECT_EQ(expired, (Attempts{jobs[0]}));
  const std::string text = testing::scrape(metrics_);
  EXPECT_NE(text.find("pgjobd_lease_renewals_held_total 1\n"), std::string::npos) << text;
  renewer.stop();
}

// Heartbeats do not wait for the maintenance loop: with its rescue stuck on the database
// (a prune of millions of rows, a lock), leases are still renewed.
TEST_F(LeaseRenewerTest, HeartbeatsGoOnWhileTheMaintenanceLoopIsStuck) {
  const Attempts jobs = run_jobs(1);
  table_.block(StoreMethod::kLeadAndRescue);
  Config config;
  config.lease.duration = Millis(300);
  Maintenance maintenance(config, "worker-1", database_, *pool_, metrics_, health_, nullptr);
  maintenance.start();
  ASSERT_TRUE(table_.wait_held(StoreMethod::kLeadAndRescue));
  start_renewer();
  const int seen = table_.calls(StoreMethod::kHeartbeat);
  EXPECT_TRUE(table_.wait_calls(StoreMethod::kHeartbeat, seen + 3));
  EXPECT_FALSE(gate_.stop_requested(jobs[0].id));
  table_.unblock(StoreMethod::kLeadAndRescue);
  maintenance.stop();
}
}  // namespace
}  // namespace pgjobd
