// The dependency repair runs on the leader, on the retention loop, a few seconds after the
// start and then every minute; a follower never calls it (retention_test.cpp).

#include <gtest/gtest.h>

#include "engine/dependency_repair.hpp"
#include "engine/maintenance.hpp"
#include "support/fake_job_store.hpp"
#include "support/maintenance_fixture.hpp"

namespace pgjobd {
namespace {

using pgjobd::testing::StoreMethod;
using std::chrono::seconds;
using DependencyRepairTest = testing::MaintenanceFixture;

TEST_F(DependencyRepairTest, TheLeaderRepairsOnceItIsDue) {
  start_maintenance();
  ASSERT_TRUE(table_.wait_calls(StoreMethod::kRepairDependencies, 1,
                                DependencyRepair::kFirstRepairAfter + seconds(20)));
  EXPECT_EQ(table_.calls(StoreMethod::kRepairDependencies), 1)
      << "a pass that found nothing waits kInterval";
}

}  // namespace
}  // namespace pgjobd
