// Three real daemons on one table: 10,000 jobs, each run exactly once (no fault here: the
// baseline that SKIP LOCKED claiming never hands one job to two daemons).

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "support/daemon_process.hpp"
#include "support/test_database.hpp"

namespace pgjobd::testing {
namespace {

using Clock = std::chrono::steady_clock;

TEST(FaultsMultiE2E, ThreeDaemonsRunTenThousandJobsEachExactlyOnce) {
  constexpr int kJobs = 10000;
  const std::vector<std::string> names = {"d1", "d2", "d3"};
  TestSchema schema;
  TempDir dir;
  const std::string effects = dir.file("effects");
  // `sh -c SCRIPT NAME`: each line is "<job id> <daemon name>".
  const std::string script = "echo \"$PGJOBD_JOB_ID $0\" >> " + shell_quote(effects);
  schema.insert_jobs("work", kJobs);

  const auto started = Clock::now();
  std::vector<std::unique_ptr<DaemonProcess>> daemons;
  for (const auto& name : names) {
    DaemonYaml yaml(schema.name());
    yaml.set("worker", "{concurrency: 8}")
        .set("lease", "{duration: 3s}")
        .handler("work", "{exec: [/bin/sh, -c, " + yaml_quote(script) + ", " + name + "]}");
    daemons.push_back(std::make_unique<DaemonProcess>(yaml.text()));
  }
  for (auto& daemon : daemons) ASSERT_TRUE(daemon->wait_ready()) << daemon->log();
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == kJobs; }, 120s))
      << schema.count("status = 'done'") << " of " << kJobs << " done";
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();

  std::map<std::int64_t, int> runs;
  std::map<std::string, int> per_daemon;
  for (const std::string& line : read_lines(effects)) {
    std::istringstream words(line);
    std::int64_t id = 0;
    std::string name;
    words >> id >> name;
    ++runs[id];
    ++per_daemon[name];
  }
  std::printf("[ 3 daemons ] %d jobs in %.2f s (%.0f jobs/s): %d by d1, %d by d2, %d by d3\n",
              kJobs, seconds, kJobs / seconds, per_daemon["d1"], per_daemon["d2"],
              per_daemon["d3"]);
  EXPECT_EQ(runs.size(), static_cast<std::size_t>(kJobs)) << "a job without its side effect";
  int duplicates = 0;
  for (const auto& [id, n] : runs) duplicates += n > 1 ? 1 : 0;
  EXPECT_EQ(duplicates, 0) << "jobs that ran more than once without any fault";
  EXPECT_EQ(schema.count("attempts <> 1 OR status <> 'done'"), 0);
  for (const auto& name : names) EXPECT_GT(per_daemon[name], 0) << name << " ran no job";
  for (auto& daemon : daemons) daemon->signal(SIGTERM);
  for (auto& daemon : daemons) EXPECT_EQ(daemon->wait_for_exit(20s), 0);
}

}  // namespace
}  // namespace pgjobd::testing
