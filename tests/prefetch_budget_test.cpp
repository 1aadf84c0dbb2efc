// PrefetchBudget: the jobs finished in the last horizon, capped by worker.prefetch and by
// the payloads of the last claim.

#include "engine/prefetch_budget.hpp"

#include <gtest/gtest.h>

namespace pgjobd {
namespace {

using std::chrono::milliseconds;
using Clock = PrefetchBudget::Clock;

class PrefetchBudgetTest : public ::testing::Test {
 protected:
  // The budget's buckets are aligned to multiples of the horizon: start on an edge.
  Clock::time_point start_ = Clock::time_point{} + 100 * PrefetchBudget::kHorizon;
  Clock::time_point now_ = start_;
  PrefetchBudget budget_{1000, [this] { return now_; }};

  void at(milliseconds since_start) { now_ = start_ + since_start; }
  // Jobs that ran for `each` and finish now.
  void finish(int jobs, std::chrono::microseconds each = std::chrono::microseconds(100)) {
    for (int i = 0; i < jobs; ++i) budget_.finished(now_ - each, now_);
  }
};

TEST_F(PrefetchBudgetTest, NothingBeforeAnyJobFinished) { EXPECT_EQ(budget_.budget(), 0); }

TEST_F(PrefetchBudgetTest, FollowsTheJobsFinishedInTheLastHorizon) {
  at(milliseconds(10));
  finish(40);
  at(milliseconds(20));
  EXPECT_EQ(budget_.budget(), 40);
  // Half of the horizon into the next bucket, the one before counts for half.
  at(milliseconds(60));
  finish(10);
  at(milliseconds(75));
  EXPECT_EQ(budget_.budget(), 10 + 20);
  // A bucket with no finish: what came before fades out, then nothing is left.
  at(milliseconds(125));
  EXPECT_EQ(budget_.budget(), 5);
  at(milliseconds(150));
  EXPECT_EQ(budget_.budget(), 0);
  at(milliseconds(1000));
  EXPECT_EQ(budget_.budget(), 0);
  // Finishes after a gap start from nothing.
  finish(3);
  at(milliseconds(1001));
  EXPECT_EQ(budget_.budget(), 3);
}

TEST_F(PrefetchBudgetTest, AJobFinishedJustBeforeABucketEdgeStillCounts) {
  at(milliseconds(49));
  finish(1);
  at(milliseconds(51));
  EXPECT_EQ(budget_.budget(), 1);
}

// Workers read their finish time before the pool's lock: a finish from before a bucket's
// edge may be counted after one from past it. It counts in the newer bucket, and neither
// is lost.
TEST_F(PrefetchBudgetTest, AFinishReportedOutOfOrderAcrossAnEdgeKeepsTheCounts) {
  at(milliseconds(30));
  finish(20);
  at(milliseconds(51));
  finish(10);
  budget_.finished(start_ + milliseconds(49) - std::chrono::microseconds(100),
                   start_ + milliseconds(49));
  at(milliseconds(52));
  // 20 in the bucket before (which the horizon still almost wholly covers), 11 in this one.
  EXPECT_EQ(budget_.budget(), 11 + 19);
}

TEST_F(PrefetchBudgetTest, JobsFinishedAtASlowPaceGetAlmostNone) {
  // Short jobs, but few of them: one every 16 ms.
  for (int ms = 0; ms < 1000; ms += 16) {
    at(milliseconds(ms));
    finish(1);
  }
  at(milliseconds(1000));
  EXPECT_LE(budget_.budget(), 4);
}

// 64 workers that started 200 ms jobs together finish them together: 64 finishes within a
// horizon, yet a held job would wait a whole job's time. Jobs longer than kShortJob get no
// prefetch, however many finish at once.
TEST_F(PrefetchBudgetTest, LongJobsGetNoneEvenWhenManyFinishTogether) {
  finish(64, milliseconds(200));
  EXPECT_EQ(budget_.budget(), 0);
  // The average moves with the job mix: a run of short jobs brings the budget back.
  for (int i = 0; i < 100; ++i) finish(1);
  EXPECT_GT(budget_.budget(), 0);
  for (int i = 0; i < 100; ++i) finish(1, milliseconds(50));
  EXPECT_EQ(budget_.budget(), 0);
}

TEST_F(PrefetchBudgetTest, NeverAboveItsMaximumAndZeroTurnsItOff) {
  finish(5000);
  EXPECT_EQ(budget_.budget(), 1000);
  budget_.set_max(0);
  EXPECT_EQ(budget_.budget(), 0);
  budget_.set_max(7);
  EXPECT_EQ(budget_.budget(), 7);
}

TEST_F(PrefetchBudgetTest, LargePayloadsKeepTheHeldBytesNearTheirBound) {
  finish(5000);
  budget_.claimed(4 * 1024 * 1024);  // the largest payload the last claim brought
  EXPECT_EQ(budget_.budget(),
            static_cast<int>(PrefetchBudget::kHeldPayloadBytes / (4 * 1024 * 1024)));
  budget_.claimed(PrefetchBudget::kHeldPayloadBytes + 1);  // one payload alone is over it
  EXPECT_EQ(budget_.budget(), 0);
  budget_.claimed(100);
  EXPECT_EQ(budget_.budget(), 1000);
}

}  // namespace
}  // namespace pgjobd
