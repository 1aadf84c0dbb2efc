// Leadership: the leadership is handed over on stop (by a leader only), the rescue keeps
// its pace while a limit holds due jobs back, the leader deletes expired daemon rows.

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "engine/maintenance.hpp"
#include "limits/limit_registry.hpp"
#include "support/fake_job_store.hpp"
#include "support/maintenance_fixture.hpp"
#include "support/wait_until.hpp"

namespace pgjobd {
namespace {

using pgjobd::testing::StoreMethod;
using std::chrono::seconds;
using LeadershipTest = testing::MaintenanceFixture;

TEST_F(LeadershipTest, LeaderResignsOnStop) {
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
TEST_F(LeadershipTest, DueJobsHeldBackByALimitKeepTheRescueAtTheBusyInterval) {
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

TEST_F(LeadershipTest, NonLeaderDoesNotResign) {
  table_.set_leader(false);
  Maintenance& maintenance = start_maintenance();
  ASSERT_TRUE(table_.wait_calls(StoreMethod::kLeadAndRescue, 1));
  maintenance.stop();
  EXPECT_TRUE(table_.resigned().empty());
  EXPECT_EQ(table_.calls(StoreMethod::kResign), 0);
}

TEST_F(LeadershipTest, LeaderDeletesExpiredDaemonRows) {
  table_.set_leader(true);
  table_.add_daemon({"gone:1:dead", "gone", 1, "0.1", 4, 0, Millis(1000)}, seconds(3600));
  table_.add_daemon({"alive:2:beef", "alive", 2, "0.1", 4, 0, seconds(3600)});
  start_maintenance();
  ASSERT_TRUE(table_.wait_until([&] { return !table_.daemons().contains("gone:1:dead"); }));
  EXPECT_TRUE(table_.daemons().contains("alive:2:beef"));
  EXPECT_TRUE(table_.daemons().contains("worker-1"));
}

}  // namespace
}  // namespace pgjobd
