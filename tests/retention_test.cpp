// Retention: a backlog is deleted in budgeted passes, soon one after the other, beside the
// rescue; a follower does not spin once retention is due.

#include <gtest/gtest.h>

#include <sys/resource.h>

#include <thread>

#include "engine/maintenance.hpp"
#include "support/fake_job_store.hpp"
#include "support/maintenance_fixture.hpp"
#include "support/wait_until.hpp"

namespace pgjobd {
namespace {

using pgjobd::testing::StoreMethod;
using std::chrono::seconds;
using RetentionTest = testing::MaintenanceFixture;

double retention_test_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto in_seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return in_seconds(usage.ru_utime) + in_seconds(usage.ru_stime);
}

// A retention backlog (rows expired all at once: a daemon down for a day, a lowered
// retention.done) is deleted in passes of at most kPrunePassBudget with kPrunePause between
// them, so the other duties (here the rescue, on the maintenance session) and the claims go
// on while it is worked off; the next pass follows soon, not kPruneInterval later, until a
// slice comes back short.
TEST_F(RetentionTest, PruneStopsEachPassAtItsBudgetAndContinuesSoonUntilTheBacklogIsGone) {
  constexpr Millis kSlice(40);
  constexpr int kSlices = 30;
  table_.set_prune_backlog(kSlices * Retention::kPruneSlice, kSlice);
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
    if (times[i] - times[i - 1] >= kSlice + Retention::kPrunePause / 2) {
      passes.push_back(1);
    } else {
      ++passes.back();
    }
  }
  const int most_per_pass =
      static_cast<int>((Retention::kPrunePassBudget + kSlice - Millis(1)) / kSlice);
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

// Retention is due 5 s after the start and then every kPruneInterval, whether or not this
// daemon leads: a follower that left it due woke at once, again and again (a core's worth
// of CPU on every follower from its sixth second on).
TEST_F(RetentionTest, AFollowerWaitsForItsNextDutyOnceRetentionIsDue) {
  table_.set_leader(false);
  start_maintenance();
  // The third leadership pass of an idle daemon comes about 5.2 s after its start.
  ASSERT_TRUE(table_.wait_calls(StoreMethod::kLeadAndRescue, 3, seconds(30)));
  const double before = retention_test_cpu_seconds();
  std::this_thread::sleep_for(seconds(2));  // a measurement window, not a condition
  const double used = retention_test_cpu_seconds() - before;
  // Idle, it sends a heartbeat and a report every 100 ms: milliseconds of CPU.
  EXPECT_LT(used, 0.25) << "CPU seconds in a 2 s window";
  EXPECT_EQ(table_.calls(StoreMethod::kPrune), 0);
  EXPECT_EQ(table_.calls(StoreMethod::kRepairDependencies), 0);  // the leader's too
}

}  // namespace
}  // namespace pgjobd
