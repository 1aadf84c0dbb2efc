// Fetcher with limits (README "Limits"): while the registry says limits exist it claims
// with claim_limited; a rate limit's hold is awaited until its token is due, not polled
// for in a loop; a concurrency limit's hold is claimed for again as soon as this daemon
// has written a completion (which may have freed the limit's slot). The database is the in-memory
// fake, which applies unkeyed concurrency limits and scripted rate holds.

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <thread>

#include "engine/claim_signal.hpp"
#include "engine/fetcher.hpp"
#include "engine/health.hpp"
#include "engine/worker_pool.hpp"
#include "limits/limit_registry.hpp"
#include "metrics/metrics.hpp"
#include "support/fake_job_store.hpp"
#include "support/job_gate.hpp"
#include "support/wait_until.hpp"

namespace pgjobd {
namespace {

using pgjobd::testing::FakeDatabase;
using pgjobd::testing::FakeJobTable;
using pgjobd::testing::JobGate;
using pgjobd::testing::StoreMethod;
using std::chrono::milliseconds;
using std::chrono::seconds;

LimitDefinition limit_on_gated(const std::string& name, int concurrency) {
  LimitDefinition definition;
  definition.name = name;
  definition.limit.types = {"gated"};
  definition.limit.concurrency = concurrency;
  return definition;
}

class FetcherLimitsTest : public ::testing::Test {
 protected:
  void TearDown() override {
    table_.unblock_all();
    gate_.release_all();
    if (fetcher_) fetcher_->stop();
  }

  // A minute's poll interval: every claim after the first has a cause the test controls.
  // Completions are written to the fake, so a finished job no longer holds its limit.
  void start(int concurrency) {
    WorkerConfig workers;
    workers.concurrency = concurrency;
    completions_ = database_.open_store("completer", StoreUse::kHotPath);
    pool_ = std::make_unique<WorkerPool>(
        workers, [this](const Job& job, const JobStop& stop) { return gate_.execute(job, stop); },
        [this](Completion completion) {
          completions_->complete({completion}, "worker-1", false);
          signal_.completions_written();  // as the completer does after each batch
        },
        [this](int, bool for_fetcher) {
          if (for_fetcher) signal_.slot_freed();
        });
    PollConfig poll;
    poll.min_interval = Millis(60000);
    poll.max_interval = Millis(60000);
    Fetcher::Options options{"worker-1", Millis(30000), poll, {"gated"}};
    options.limits = &registry_;
    fetcher_ =
        std::make_unique<Fetcher>(options, database_.open_store("fetcher", StoreUse::kHotPath),
                                  *pool_, signal_, metrics_, health_);
    pool_->start();
    fetcher_->start();
  }

  FakeDatabase database_;
  FakeJobTable& table_ = database_.table();
  // No sync yet: the registry answers active, the safe default, until the fetcher's own
  // read before its first claim.
  LimitRegistry registry_{std::nullopt, "worker-1"};
  JobGate gate_;
  ClaimSignal signal_;
  Metrics metrics_{{"default"}, {"gated"}};
  Health health_;
  std::unique_ptr<JobStore> completions_;
  std::unique_ptr<WorkerPool> pool_;
  std::unique_ptr<Fetcher> fetcher_;
};

TEST_F(FetcherLimitsTest, ClaimsWithTheLimitedClaimWhileLimitsExist) {
  table_.set_limits({limit_on_gated("partner", 2)});
  table_.add_jobs(5, "gated");
  start(4);
  ASSERT_TRUE(gate_.wait_started(2));
  EXPECT_EQ(table_.calls(StoreMethod::kClaim), 0);
  EXPECT_GE(table_.calls(StoreMethod::kClaimLimited), 1);
  EXPECT_EQ(gate_.running(), 2) << "the fake's limit of 2 was exceeded";
}

// A job held for a thread is a running row, which a concurrency limit counts from its
// claim: claims prefetch under such limits as without any (the fake's limit holds, as the
// running rows count). A keyed one's claim over many partitions takes the limit's lock, not
// one per partition, so it is not cut at 128 of them (sql/functions/pgjobd_claim_limited.sql).
TEST_F(FetcherLimitsTest, ClaimsPrefetchUnderConcurrencyLimitsKeyedOrNot) {
  LimitDefinition keyed = limit_on_gated("per_user", 100);
  keyed.limit.key = "user";
  table_.set_limits({limit_on_gated("partner", 100), keyed});
  table_.add_jobs(400, "gated");
  gate_.release_all();
  start(2);  // worker.prefetch at its default
  ASSERT_TRUE(gate_.wait_finished(400));
  EXPECT_EQ(table_.calls(StoreMethod::kClaim), 0);
  int largest = 0;
  for (const auto& request : table_.claim_requests()) largest = std::max(largest, request.limit);
  EXPECT_GT(largest, 2) << "no claim asked for more than the free threads";
}

// Under a limit over everything it serves a daemon holds no more jobs than the limit: its
// claims beyond would find the limit full of its own jobs and wait for their completions.
// Each says how many jobs it holds, which that limit's claim counts instead of their rows
// (sql/functions/pgjobd_claim_limited.sql, "One limit").
TEST_F(FetcherLimitsTest, UnderALimitOverAllItServesADaemonHoldsNoMoreThanTheLimit) {
  table_.set_limits({limit_on_gated("partner", 10)});
  table_.add_jobs(400, "gated");
  gate_.release_all();
  start(2);  // worker.prefetch at its default
  ASSERT_TRUE(gate_.wait_finished(400));
  int largest = 0;
  for (const auto& request : table_.claim_requests()) {
    largest = std::max(largest, request.limit);
    EXPECT_GE(request.own_running, 0);
    EXPECT_LE(request.own_running + request.limit, 10) << "held beyond the limit";
  }
  EXPECT_GT(largest, 2) << "no claim asked for more than the free threads";
}

// Under one concurrency limit over all it serves the claim may take the plain claim's
// path (ClaimRequest::one_concurrency_limit); beside a second limit it may not (below).
TEST_F(FetcherLimitsTest, UnderOneLimitOverAllItServesTheClaimSaysSo) {
  table_.set_limits({limit_on_gated("partner", 10)});
  table_.add_jobs(40, "gated");
  gate_.release_all();
  start(2);
  ASSERT_TRUE(gate_.wait_finished(40));
  ASSERT_FALSE(table_.claim_requests().empty());
  for (const auto& request : table_.claim_requests()) EXPECT_TRUE(request.one_concurrency_limit);
}

// Under an unkeyed rate limit claims prefetch too, each saying how many of its jobs start
// at once (the free threads): the limited claim marks the others, which the limit's bucket
// counts so that they cannot start above the rate (sql/functions/pgjobd_claim_limited.sql).
TEST_F(FetcherLimitsTest, ClaimsPrefetchUnderARateLimitSayingWhatStartsAtOnce) {
  LimitDefinition rated = limit_on_gated("mail", 0);
  rated.limit.rate = "1000000/s";
  rated.limit.rate_per_second = 1e6;
  table_.set_limits({limit_on_gated("partner", 100), rated});
  table_.add_jobs(400, "gated");
  gate_.release_all();
  start(2);  // worker.prefetch at its default
  ASSERT_TRUE(gate_.wait_finished(400));
  EXPECT_EQ(table_.calls(StoreMethod::kClaim), 0);
  int largest = 0;
  for (const auto& request : table_.claim_requests()) {
    largest = std::max(largest, request.limit);
    EXPECT_GE(request.startable, 0);
    EXPECT_LE(request.startable, std::min(request.limit, 2)) << "more than the free threads";
    EXPECT_FALSE(request.one_concurrency_limit) << "two limits";
  }
  EXPECT_GT(largest, 2) << "no claim asked for more than the free threads";
}

// A keyed rate limit's partitions do not count the jobs held for a thread: no claim asks
// for more than the free threads while one applies.
TEST_F(FetcherLimitsTest, NoPrefetchWhileAKeyedRateLimitApplies) {
  LimitDefinition keyed = limit_on_gated("per_user", 0);
  keyed.limit.key = "user";
  keyed.limit.rate = "1000000/s";
  keyed.limit.rate_per_second = 1e6;
  table_.set_limits({keyed});
  table_.add_jobs(400, "gated");
  gate_.release_all();
  start(2);  // worker.prefetch at its default
  ASSERT_TRUE(gate_.wait_finished(400));
  EXPECT_EQ(table_.calls(StoreMethod::kClaim), 0);
  for (const auto& request : table_.claim_requests()) EXPECT_LE(request.limit, 2);
}

TEST_F(FetcherLimitsTest, ARateHoldIsAwaitedUntilItsTokenNotPolledInALoop) {
  table_.set_limits({limit_on_gated("mail", 0)});
  table_.set_rate_hold("mail", milliseconds(400));
  table_.add_jobs(3, "gated");
  start(4);
  ASSERT_TRUE(table_.wait_calls(StoreMethod::kClaimLimited, 1));
  table_.set_rate_hold("mail", std::nullopt);  // the token the hold announced is due
  ASSERT_TRUE(gate_.wait_started(3, seconds(10)))
      << "the claim waited for its minute-long poll instead of the token";
  const auto times = table_.call_times(StoreMethod::kClaimLimited);
  ASSERT_GE(times.size(), 2u);
  EXPECT_GE(times[1] - times[0], milliseconds(400)) << "claimed again before the token was due";
  EXPECT_EQ(times.size(), 2u) << "claims made while held: a loop";
}

TEST_F(FetcherLimitsTest, AConcurrencyHoldIsClaimedForAgainOnceACompletionIsWritten) {
  table_.set_limits({limit_on_gated("partner", 1)});
  const auto ids = table_.add_jobs(3, "gated");
  start(4);
  ASSERT_TRUE(gate_.wait_started(1));
  EXPECT_EQ(gate_.running(), 1);
  gate_.release(ids[0]);
  // The batch was short and the queue not saturated: only the hold makes the written
  // completion worth a claim before the minute-long poll.
  EXPECT_TRUE(gate_.wait_started(2, seconds(10)));
  EXPECT_EQ(gate_.max_running(), 1);
}

TEST_F(FetcherLimitsTest, NoLimitInTheDatabaseMeansThePlainClaim) {
  // A sync against a table without limits: the registry learns there are none.
  auto store = database_.open_store("maintenance", StoreUse::kOccasional);
  registry_.sync(*store);
  ASSERT_FALSE(registry_.active());
  table_.add_jobs(2, "gated");
  start(4);
  ASSERT_TRUE(gate_.wait_started(2));
  EXPECT_EQ(table_.calls(StoreMethod::kClaimLimited), 0);
  EXPECT_GE(table_.calls(StoreMethod::kClaim), 1);
}

// A daemon without a `limits:` section learns of a limit another daemon adds by a NOTIFY,
// tens of ms later; a claim meanwhile must not take the plain claim's jobs past it
// (LimitsE2E.DaemonWithoutSection... once ran 8 at once under a limit of 2). The plain
// claim finds the limit itself (LimitsExist, as the real statement does): the fetcher
// reads the limits on its own store and claims again at once, limited.
TEST_F(FetcherLimitsTest, ALimitAddedSinceTheLastReadIsFoundByThePlainClaimAndApplied) {
  auto store = database_.open_store("maintenance", StoreUse::kOccasional);
  registry_.sync(*store);
  ASSERT_FALSE(registry_.active());
  start(4);
  ASSERT_TRUE(table_.wait_calls(StoreMethod::kClaim, 1));  // the first claim, plain
  const int loads = table_.calls(StoreMethod::kLoadLimits);
  table_.set_limits({limit_on_gated("partner", 1)});
  table_.add_jobs(3, "gated");
  signal_.wake_for_insert();
  ASSERT_TRUE(gate_.wait_started(1));
  EXPECT_TRUE(registry_.active());
  EXPECT_EQ(registry_.definitions().size(), 1u);
  EXPECT_GT(table_.calls(StoreMethod::kLoadLimits), loads) << "read on the claim's store";
  EXPECT_GE(table_.calls(StoreMethod::kClaimLimited), 1);
  EXPECT_FALSE(gate_.wait_started(2, milliseconds(300))) << "the limit of 1 was exceeded";
  EXPECT_EQ(gate_.max_running(), 1);
}

// The race the retries of DelayedE2E met (one in ten runs waited 4.5 s for the poll): a
// job not yet due when the claim looked comes due before the question that follows it is
// answered. The question must still count it, though its run_at has passed by then. Only
// a limited claim is followed by a question (the plain one answers it itself, from its
// own snapshot, where this cannot happen); a limit on another type makes the claims here
// limited ones.
TEST_F(FetcherLimitsTest, AJobComingDueBetweenTheClaimAndTheQuestionIsClaimedAtOnce) {
  LimitDefinition elsewhere = limit_on_gated("elsewhere", 1);
  elsewhere.limit.types = {"other"};
  table_.set_limits({elsewhere});
  start(4);
  ASSERT_TRUE(table_.wait_calls(StoreMethod::kNextDue, 1));  // nothing to await
  // Far enough ahead that the claim below comes before it even on a stalled machine.
  const auto run_at = FakeJobTable::Clock::now() + milliseconds(300);
  const auto id = table_.add_job_at("gated", run_at);
  table_.block(StoreMethod::kNextDue);
  signal_.wake();  // its INSERT's NOTIFY: a claim, too early for it, then a question
  ASSERT_TRUE(table_.wait_held(StoreMethod::kNextDue));
  EXPECT_EQ(table_.row(id).times_claimed, 0);
  std::this_thread::sleep_until(run_at + milliseconds(20));  // the question is now late
  table_.unblock(StoreMethod::kNextDue);
  ASSERT_TRUE(gate_.wait_started(1));
  // At once, not at the minute-long poll.
  const auto late = table_.row(id).claimed_at - run_at;
  EXPECT_GE(late, FakeJobTable::Clock::duration::zero());
  EXPECT_LT(late, seconds(2));
  EXPECT_EQ(table_.calls(StoreMethod::kClaimLimited), 3);
  EXPECT_EQ(table_.calls(StoreMethod::kClaim), 0);
}

}  // namespace
}  // namespace pgjobd
