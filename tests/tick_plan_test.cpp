// The misfire policies: which due ticks fire, which are missed, and which are late.
#include "schedule/tick_plan.hpp"

#include <gtest/gtest.h>

namespace pgjobd::schedule {
namespace {

const TickTime kStart = parse_instant("2027-01-01T00:00:00Z", "UTC");
constexpr Seconds kHour{3600};

TickPlan plan(MisfirePolicy policy, Seconds since_last, Seconds grace = kHour,
              Seconds every = Seconds(60)) {
  return plan_ticks(TickCalculator::every(every), policy, grace, kStart, kStart + since_last);
}

TEST(TickPlanTest, NothingDueMeansNoStepAndTheNextTick) {
  TickPlan p = plan(MisfirePolicy::kSkip, Seconds(59));
  EXPECT_TRUE(p.steps.empty());
  EXPECT_EQ(p.missed, 0);
  EXPECT_EQ(p.next_tick, kStart + Seconds(60));
}

TEST(TickPlanTest, AnOnTimeTickFiresUnderEveryPolicy) {
  for (MisfirePolicy policy : {MisfirePolicy::kSkip, MisfirePolicy::kAll, MisfirePolicy::kNone}) {
    TickPlan p = plan(policy, Seconds(64));  // the tick at +60 is 4 s old
    ASSERT_EQ(p.steps.size(), 1u);
    EXPECT_EQ(p.steps[0].tick, kStart + Seconds(60));
    EXPECT_TRUE(p.steps[0].insert_job);
    EXPECT_FALSE(p.steps[0].late);
    EXPECT_EQ(p.missed, 0);
    EXPECT_EQ(p.next_tick, kStart + Seconds(120));
  }
}

TEST(TickPlanTest, SkipFiresTheLatestMissedTickOnceWithinTheGrace) {
  TickPlan p = plan(MisfirePolicy::kSkip, Seconds(190));  // +60, +120, +180 (10 s old)
  ASSERT_EQ(p.steps.size(), 1u);
  EXPECT_EQ(p.steps[0].tick, kStart + Seconds(180));
  EXPECT_TRUE(p.steps[0].insert_job);
  EXPECT_TRUE(p.steps[0].late);
  EXPECT_EQ(p.missed, 2);
  // Beyond the grace nothing fires, and last_tick still moves past every due tick.
  TickPlan beyond = plan(MisfirePolicy::kSkip, Seconds(190), Seconds(9));
  ASSERT_EQ(beyond.steps.size(), 1u);
  EXPECT_FALSE(beyond.steps[0].insert_job);
  EXPECT_EQ(beyond.steps[0].tick, kStart + Seconds(180));
  EXPECT_EQ(beyond.missed, 3);
}

TEST(TickPlanTest, NoneFiresNoLateTick) {
  TickPlan late = plan(MisfirePolicy::kNone, Seconds(190));
  ASSERT_EQ(late.steps.size(), 1u);
  EXPECT_FALSE(late.steps[0].insert_job);
  EXPECT_EQ(late.steps[0].tick, kStart + Seconds(180));
  EXPECT_EQ(late.missed, 3);
  TickPlan current = plan(MisfirePolicy::kNone, Seconds(183));  // +180 is on time
  ASSERT_EQ(current.steps.size(), 1u);
  EXPECT_TRUE(current.steps[0].insert_job);
  EXPECT_EQ(current.missed, 2);
}

TEST(TickPlanTest, AllFiresEachMissedTickOldestFirst) {
  TickPlan p = plan(MisfirePolicy::kAll, Seconds(183));
  ASSERT_EQ(p.steps.size(), 3u);
  EXPECT_EQ(p.steps[0].tick, kStart + Seconds(60));
  EXPECT_TRUE(p.steps[0].late);
  EXPECT_EQ(p.steps[1].tick, kStart + Seconds(120));
  EXPECT_TRUE(p.steps[1].late);
  EXPECT_EQ(p.steps[2].tick, kStart + Seconds(180));
  EXPECT_FALSE(p.steps[2].late);  // on time
  EXPECT_EQ(p.missed, 0);
}

TEST(TickPlanTest, AllFiresAtMostTheLatestHundred) {
  TickPlan p = plan(MisfirePolicy::kAll, Seconds(150 * 60 + 30));
  ASSERT_EQ(p.steps.size(), static_cast<std::size_t>(kMaxCatchUp));
  EXPECT_EQ(p.steps.front().tick, kStart + Seconds(51 * 60));
  EXPECT_EQ(p.steps.back().tick, kStart + Seconds(150 * 60));
  EXPECT_EQ(p.missed, 50);
}

TEST(TickPlanTest, AVeryLongOutageIsBoundedAndEndsAtTheLatestTick) {
  const Seconds outage(2 * kMaxScan + 7);
  TickPlan p = plan(MisfirePolicy::kSkip, outage, kHour, Seconds(1));
  ASSERT_EQ(p.steps.size(), 1u);
  EXPECT_EQ(p.steps[0].tick, kStart + outage);
  EXPECT_TRUE(p.steps[0].insert_job);
  EXPECT_GE(p.missed, kMaxScan);
}

}  // namespace
}  // namespace pgjobd::schedule
