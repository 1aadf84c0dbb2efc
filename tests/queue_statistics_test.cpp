// QueueStatistics: a round at the start, only the served queues asked for and shown, a
// reload's new list asked for at once, the paused and blocked gauges.

#include <gtest/gtest.h>

#include "engine/maintenance.hpp"
#include "support/fake_job_store.hpp"
#include "support/maintenance_fixture.hpp"
#include "support/metrics_text.hpp"
#include "support/wait_until.hpp"

namespace pgjobd {
namespace {

using pgjobd::testing::scrape;
using pgjobd::testing::StoreMethod;
using pgjobd::testing::wait_until;
using std::chrono::seconds;
using QueueStatisticsTest = testing::MaintenanceFixture;

TEST_F(QueueStatisticsTest, CollectsQueueStatsAtOnce) {
  run_jobs(2);
  table_.add_job("gated");
  start_maintenance();
  ASSERT_TRUE(table_.wait_calls(StoreMethod::kQueueStats, 1));
  EXPECT_TRUE(wait_until([&] { return health_.problems().empty(); }, seconds(20)));
}

// The statistics ask only for the served queues, and a reload's new list is asked for at
// once (the regular round comes every 30 s: the 20 s wait below would miss it).
TEST_F(QueueStatisticsTest, StatisticsCoverOnlyServedQueuesAndFollowAReload) {
  for (int i = 0; i < 1000; ++i) table_.add_job("gated", "app-queue-" + std::to_string(i));
  table_.add_jobs(3, "gated", "default");
  Maintenance& maintenance = start_maintenance({"default"});
  ASSERT_TRUE(table_.wait_calls(StoreMethod::kQueueStats, 1));
  EXPECT_EQ(table_.stats_queues().at(0), (std::vector<std::string>{"default"}));
  ASSERT_TRUE(wait_until(
      [&] {
        return scrape(metrics_).find(R"(pgjobd_queue_depth{queue="default",status="pending"} 3)") !=
               std::string::npos;
      },
      seconds(20)));
  EXPECT_EQ(scrape(metrics_).find("app-queue-"), std::string::npos);

  // SIGHUP: default is dropped, app-queue-7 served (the engine updates both in this order).
  metrics_.set_served({"app-queue-7"}, {"gated"});
  maintenance.set_queues({"app-queue-7"});
  ASSERT_TRUE(table_.wait_until([&] {
    const auto asked = table_.stats_queues();
    return !asked.empty() && asked.back() == std::vector<std::string>{"app-queue-7"};
  }));
  ASSERT_TRUE(wait_until(
      [&] {
        return scrape(metrics_).find(
                   R"(pgjobd_queue_depth{queue="app-queue-7",status="pending"} 1)") !=
               std::string::npos;
      },
      seconds(20)));
  const std::string text = scrape(metrics_);
  EXPECT_EQ(text.find(R"(queue="default",status)"), std::string::npos) << text;
  EXPECT_EQ(text.find("app-queue-8"), std::string::npos);
}

// A store that returns queues it was not asked for (or a round that asked before a reload)
// adds no series.
TEST_F(QueueStatisticsTest, StatisticsOfQueuesNotServedAddNoSeries) {
  table_.set_queue_stats({{"rogue", "pending", 5, 60}, {"default", "pending", 2, 30}});
  start_maintenance({"default"});
  ASSERT_TRUE(wait_until(
      [&] {
        return scrape(metrics_).find(R"(pgjobd_oldest_due_job_age_seconds{queue="default"} 30)") !=
               std::string::npos;
      },
      seconds(20)));
  EXPECT_EQ(scrape(metrics_).find("rogue"), std::string::npos);
}

// The statistics round also reports which served queues are paused: 1 for those, 0 for the
// others, nothing for a queue not served (here "rogue", which the fake reports paused).
TEST_F(QueueStatisticsTest, StatisticsRoundSetsThePausedGauge) {
  metrics_.set_served({"default", "mail"}, {"gated"});
  table_.set_paused_queues({"mail", "rogue"});
  start_maintenance({"default", "mail"});
  ASSERT_TRUE(wait_until(
      [&] {
        return scrape(metrics_).find(R"(pgjobd_queue_paused{queue="mail"} 1)") != std::string::npos;
      },
      seconds(20)));
  const std::string text = scrape(metrics_);
  EXPECT_NE(text.find(R"(pgjobd_queue_paused{queue="default"} 0)"), std::string::npos) << text;
  EXPECT_EQ(text.find("rogue"), std::string::npos) << text;
  EXPECT_GE(table_.calls(StoreMethod::kPausedQueues), 1);
}

// Blocked jobs (waiting for their parents) go to pgjobd_queue_blocked, 0 for a served queue
// without any, and never into the depth (they cannot be claimed) nor the oldest due age.
TEST_F(QueueStatisticsTest, BlockedJobsSetTheBlockedGaugeOnly) {
  metrics_.set_served({"default", "mail"}, {"gated"});
  table_.set_queue_stats({{"mail", "blocked", 7, 0}, {"rogue", "blocked", 5, 0}});
  start_maintenance({"default", "mail"});
  ASSERT_TRUE(wait_until(
      [&] {
        return scrape(metrics_).find(R"(pgjobd_queue_blocked{queue="mail"} 7)") !=
               std::string::npos;
      },
      seconds(20)));
  const std::string text = scrape(metrics_);
  EXPECT_NE(text.find(R"(pgjobd_queue_blocked{queue="default"} 0)"), std::string::npos) << text;
  EXPECT_EQ(text.find(R"(status="blocked")"), std::string::npos) << text;
  EXPECT_EQ(text.find("rogue"), std::string::npos) << text;
}

}  // namespace
}  // namespace pgjobd
