// Maintenance: which services share a session. Retention, the longest work, has one of its
// own: the leadership, the rescue and the daemons table go on while a prune hangs.

#include "engine/maintenance.hpp"

#include <gtest/gtest.h>

#include "support/fake_job_store.hpp"
#include "support/maintenance_fixture.hpp"

namespace pgjobd {
namespace {

using pgjobd::testing::StoreMethod;
using std::chrono::seconds;
using MaintenanceTest = testing::MaintenanceFixture;

TEST_F(MaintenanceTest, TheRescueAndTheDaemonRowGoOnWhileAPruneHangs) {
  table_.set_leader(true);
  table_.set_prune_backlog(Retention::kPruneSlice * 10);
  table_.block_role(StoreMethod::kPrune, Maintenance::kRetentionRole);
  run_jobs(1);  // a busy daemon rescues every 200 ms, and its row changes
  start_maintenance();
  // The first pass comes kFirstPruneAfter after the start, on the leader.
  ASSERT_TRUE(table_.wait_held(StoreMethod::kPrune, 1, seconds(30)));
  const int rescues = table_.calls(StoreMethod::kLeadAndRescue);
  const int reports = table_.daemons().at("worker-1").reports;
  gate_.release_all();  // the busy count changes: the next report is sent
  EXPECT_TRUE(table_.wait_calls(StoreMethod::kLeadAndRescue, rescues + 3));
  EXPECT_TRUE(table_.wait_until([&] { return table_.daemons().at("worker-1").reports > reports; }));
  EXPECT_EQ(table_.held(StoreMethod::kPrune), 1);  // still hanging all along
  table_.unblock(StoreMethod::kPrune);
  maintenance_->stop();
  EXPECT_EQ(table_.resigned(), (std::vector<std::string>{"worker-1"}));
}

}  // namespace
}  // namespace pgjobd
