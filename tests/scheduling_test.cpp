// runtime/scheduling (worker.scheduling: batch): a thread that enters SCHED_BATCH passes it
// to the threads it starts, and the programs of exec jobs it starts get the policy it had
// before.

#include "runtime/scheduling.hpp"

#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "handlers/exec_handler.hpp"

namespace pgjobd {
namespace {

// Field 41 of /proc/self/stat, the policy, as the program itself sees it (exec, so that the
// process read is the one the handler started).
JobResult program_policy() {
  HandlerConfig config;
  config.kind = HandlerConfig::Kind::kExec;
  config.exec_argv = {"/bin/sh", "-c", "exec cut -d' ' -f41 /proc/self/stat"};
  Job job;
  job.id = 1;
  job.type = "policy";
  job.payload = "{}";
  return make_exec_handler(config, {}, 1024)(job, {});
}

TEST(SchedulingTest, ABatchThreadStartsBatchThreadsAndProgramsUnderThePolicyItHadBefore) {
  // In a thread of its own: the test's other threads keep their policy.
  std::thread([] {
    const SchedulingPolicy before = current_scheduling_policy();
    ASSERT_NE(before.policy, SCHED_BATCH) << "the test runs under SCHED_BATCH already";
    ASSERT_EQ(enter_batch_scheduling(), "");
    EXPECT_EQ(current_scheduling_policy().policy, SCHED_BATCH);

    int started = -1;
    std::thread([&] { started = current_scheduling_policy().policy; }).join();
    EXPECT_EQ(started, SCHED_BATCH);

    ASSERT_TRUE(programs_scheduling_policy().has_value());
    EXPECT_EQ(programs_scheduling_policy()->policy, before.policy);
    const JobResult result = program_policy();
    ASSERT_EQ(result.outcome, Outcome::kDone) << result.error;
    EXPECT_EQ(result.result, std::to_string(before.policy) + "\n");
  }).join();
}

}  // namespace
}  // namespace pgjobd
