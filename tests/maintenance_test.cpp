// Maintenance: the leadership is handed over on stop, the rescue keeps its pace, the
// statistics follow the served queues, the daemons table stays fresh. (Heartbeats are
// LeaseRenewer's: lease_renewer_test.cpp.)

#include "engine/maintenance.hpp"
#include "support/metrics_text.hpp"

#include <gtest/gtest.h>

#include <prometheus/collectable.h>
#include <prometheus/text_serializer.h>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "engine/completer.hpp"
#include "engine/health.hpp"
#include "engine/worker_pool.hpp"
#include "limits/limit_registry.hpp"
#include "metrics/metrics.hpp"
#include "support/fake_job_store.hpp"
#include "support/job_gate.hpp"
#include "support/pool_fixture.hpp"
#include "support/wait_until.hpp"

namespace pgjobd {
namespace {

using pgjobd::testing::FakeDatabase;
using pgjobd::testing::FakeJobTable;
using pgjobd::testing::FakeStatus;
using pgjobd::testing::JobGate;
using pgjobd::testing::PoolFixture;
using pgjobd::testing::StoreMethod;
using pgjobd::testing::wait_until;
using std::chrono::seconds;
using Attempts = std::vector<JobAttempt>;

class MaintenanceTest : public PoolFixture {
 protected:
  // A lease of 300 ms: a pass every 100 ms, so a test sees several in well under a second;
  // nothing here depends on how long the lease actually is.
  Maintenance& start_maintenance(const std::vector<std::string>& queues = {"default"},
                                 LimitRegistry* limits = nullptr) {
    Config config;
    config.lease.duration = Millis(300);
    config.worker.queues.clear();
    for (const auto& queue : queues) config.worker.queues[queue];
    maintenance_ = std::make_unique<Maintenance>(
        config, "worker-1", database_.open_store("maintenance", StoreUse::kOccasional), *pool_,
        metrics_, health_);
    if (limits != nullptr) maintenance_->set_limits(limits);
    maintenance_->start();
    return *maintenance_;
  }

  std::unique_ptr<Maintenance> maintenance_;  // last: stopped before the pool
};

TEST_F(MaintenanceTest, LeaderResignsOnStop) {
  table_.set_leader(true);
  Maintenance& maintenance = start_maintenance();
  ASSERT_TRUE(table_.wait_calls(StoreMethod::kLeadAndRescue, 1));
  EXPECT_TRUE(table_.resigned().empty());
  maintenance.stop();
  EXPECT_EQ(table_.resigned(), (std::vector<std::string>{"worker-1"}));
  maintenance.stop();  // safe twice, resigns once
  EXPECT_EQ(table_.resigned().size(), 1u);
}

// With nothing running, a daemon rescues every 5 s; one whose claims a limit holds back is
// not idle (another daemon, perhaps dead, may hold the places): it rescues at the busy
// interval (here 200 ms), so five passes take about a second, not 20 s.
TEST_F(MaintenanceTest, DueJobsHeldBackByALimitKeepTheRescueAtTheBusyInterval) {
  LimitRegistry limits(std::nullopt, "worker-1");
  std::atomic<bool> holding{true};
  std::thread fetcher([&] {
    while (holding) {
      limits.count_hold();  // as the fetcher does for each held claim
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  start_maintenance({"default"}, &limits);
  EXPECT_TRUE(table_.wait_calls(StoreMethod::kLeadAndRescue, 5, seconds(4)))
      << table_.calls(StoreMethod::kLeadAndRescue) << " passes";
  holding = false;
  fetcher.join();
  maintenance_->stop();  // before `limits`, which its thread reads, goes away
}

TEST_F(MaintenanceTest, NonLeaderDoesNotResign) {
  table_.set_leader(false);
  Maintenance& maintenance = start_maintenance();
  ASSERT_TRUE(table_.wait_calls(StoreMethod::kLeadAndRescue, 1));
  maintenance.stop();
  EXPECT_TRUE(table_.resigned().empty());
  EXPECT_EQ(table_.calls(StoreMethod::kResign), 0);
}

TEST_F(MaintenanceTest, CollectsQueueStatsAtOnce) {
  run_jobs(2);
  table_.add_job("gated");
  start_maintenance();
  ASSERT_TRUE(table_.wait_calls(StoreMethod::kQueueStats, 1));
  EXPECT_TRUE(wait_until([&] { return health_.problems().empty(); }, seconds(20)));
}

using testing::scrape;

// The statistics ask only for the served queues, and a reload's new list is asked for at
// once (the regular round comes every 30 s: the 20 s wait below would miss it).
TEST_F(MaintenanceTest, StatisticsCoverOnlyServedQueuesAndFollowAReload) {
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
TEST_F(MaintenanceTest, StatisticsOfQueuesNotServedAddNoSeries) {
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
TEST_F(MaintenanceTest, StatisticsRoundSetsThePausedGauge) {
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

// The dashboard's daemons table: a row from the start, refreshed with the busy count at
// each heartbeat interval, gone on a clean stop; the leader deletes other daemons' expired
// rows.
TEST_F(MaintenanceTest, KeepsItsDaemonRowFreshAndRemovesItOnStop) {
  table_.set_leader(false);
  const Attempts jobs = run_jobs(2);
  Maintenance& maintenance = start_maintenance();
  ASSERT_TRUE(table_.wait_until([&] {
    const auto rows = table_.daemons();
    return rows.contains("worker-1") && rows.at("worker-1").reports >= 2;
  }));
  const DaemonReport report = table_.daemons().at("worker-1").report;
  EXPECT_EQ(report.id, "worker-1");
  EXPECT_FALSE(report.host.empty());
  EXPECT_EQ(report.pid, getpid());
  EXPECT_FALSE(report.version.empty());
  EXPECT_EQ(report.busy, 2);
  EXPECT_EQ(report.ttl, Millis(900));  // 3 × the 300 ms lease
  gate_.release(jobs[0].id);           // one job ends: the next report says so
  EXPECT_TRUE(table_.wait_until([&] { return table_.daemons().at("worker-1").report.busy == 1; }));
  maintenance.stop();
  EXPECT_FALSE(table_.daemons().contains("worker-1"));
  EXPECT_EQ(table_.calls(StoreMethod::kExpireDaemons), 0);  // not the leader
}

TEST_F(MaintenanceTest, LeaderDeletesExpiredDaemonRows) {
  table_.set_leader(true);
  table_.add_daemon({"gone:1:dead", "gone", 1, "0.1", 4, 0, Millis(1000)}, seconds(3600));
  table_.add_daemon({"alive:2:beef", "alive", 2, "0.1", 4, 0, seconds(3600)});
  start_maintenance();
  ASSERT_TRUE(table_.wait_until([&] { return !table_.daemons().contains("gone:1:dead"); }));
  EXPECT_TRUE(table_.daemons().contains("alive:2:beef"));
  EXPECT_TRUE(table_.daemons().contains("worker-1"));
}

// A retention backlog (rows expired all at once: a daemon down for a day, a lowered
// retention.done) is deleted in passes of at most kPrunePassBudget with kPrunePause between
// them, so the loop's other duties (here the rescue) run while it is worked off; the next
// pass follows soon, not kPruneInterval later, until a slice comes back short.
TEST_F(MaintenanceTest, PruneStopsEachPassAtItsBudgetAndContinuesSoonUntilTheBacklogIsGone) {
  constexpr Millis kSlice(40);
  constexpr int kSlices = 30;
  table_.set_prune_backlog(kSlices * Maintenance::kPruneSlice, kSlice);
  run_jobs(1);  // a busy daemon rescues every 200 ms
  start_maintenance();
  ASSERT_TRUE(table_.wait_until([&] { return table_.prune_backlog() == 0; }, seconds(40)));
  // The slice that finds nothing left ends the backlog.
  ASSERT_TRUE(table_.wait_calls(StoreMethod::kPrune, kSlices + 1));
  const auto times = table_.call_times(StoreMethod::kPrune);
  ASSERT_EQ(times.size(), static_cast<std::size_t>(kSlices + 1));

  // Passes: slices start back to back within one (kSlice apart), and at least kSlice +
  // kPrunePause apart across a pause. A slow machine only splits passes further.
  std::vector<int> passes{1};
  for (std::size_t i = 1; i < times.size(); ++i) {
    if (times[i] - times[i - 1] >= kSlice + Maintenance::kPrunePause / 2) {
      passes.push_back(1);
    } else {
      ++passes.back();
    }
  }
  const int most_per_pass =
      static_cast<int>((Maintenance::kPrunePassBudget + kSlice - Millis(1)) / kSlice);
  for (const int slices : passes) EXPECT_LE(slices, most_per_pass) << passes.size() << " passes";
  EXPECT_GE(passes.size(), static_cast<std::size_t>(kSlices / most_per_pass));
  // Soon: the whole backlog within seconds, where one pass per kPruneInterval would take
  // ten minutes.
  EXPECT_LT(times.back() - times.front(), seconds(20));

  const auto first = times.front();
  const auto last = times.back();
  int rescues_during = 0;
  for (const auto& at : table_.call_times(StoreMethod::kLeadAndRescue)) {
    if (at > first && at < last) ++rescues_during;
  }
  EXPECT_GE(rescues_during, 2);

  // Back to the normal interval once nothing is left.
  EXPECT_FALSE(table_.wait_until([&] { return table_.calls(StoreMethod::kPrune) > kSlices + 1; },
                                 std::chrono::milliseconds(1500)));
}

double maintenance_test_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto in_seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return in_seconds(usage.ru_utime) + in_seconds(usage.ru_stime);
}

// Retention is due 5 s after the start and then every kPruneInterval, whether or not this
// daemon leads: a follower that left it due woke at once, again and again (a core's worth
// of CPU on every follower from its sixth second on).
TEST_F(MaintenanceTest, AFollowerWaitsForItsNextDutyOnceRetentionIsDue) {
  table_.set_leader(false);
  start_maintenance();
  // The third leadership pass of an idle daemon comes about 5.2 s after its start.
  ASSERT_TRUE(table_.wait_calls(StoreMethod::kLeadAndRescue, 3, seconds(30)));
  const double before = maintenance_test_cpu_seconds();
  std::this_thread::sleep_for(seconds(2));  // a measurement window, not a condition
  const double used = maintenance_test_cpu_seconds() - before;
  // Idle, it sends a heartbeat and a report every 100 ms: milliseconds of CPU.
  EXPECT_LT(used, 0.25) << "CPU seconds in a 2 s window";
  EXPECT_EQ(table_.calls(StoreMethod::kPrune), 0);
}

}  // namespace
}  // namespace pgjobd
