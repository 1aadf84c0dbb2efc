// DaemonRegistry: the dashboard's daemons table stays fresh while the daemon runs and
// loses its row on a clean stop.

#include <gtest/gtest.h>

#include <unistd.h>

#include "engine/maintenance.hpp"
#include "support/fake_job_store.hpp"
#include "support/maintenance_fixture.hpp"
#include "support/wait_until.hpp"

namespace pgjobd {
namespace {

using pgjobd::testing::StoreMethod;
using Attempts = std::vector<JobAttempt>;
using DaemonRegistryTest = testing::MaintenanceFixture;

// The dashboard's daemons table: a row from the start, refreshed with the busy count at
// each heartbeat interval, gone on a clean stop; the leader deletes other daemons' expired
// rows.
TEST_F(DaemonRegistryTest, KeepsItsDaemonRowFreshAndRemovesItOnStop) {
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

}  // namespace
}  // namespace pgjobd
