// `pgjobd bench` smoke run: a small N, every field of the report present. (Speed goals
// are measured by the benchmark itself, never asserted in tests.)

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/build_paths.hpp"
#include "support/test_database.hpp"

namespace pgjobd {
namespace {

std::string run_and_capture(const std::string& command, int& status) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  std::array<char, 4096> buf;
  while (std::fgets(buf.data(), buf.size(), pipe) != nullptr) out += buf.data();
  status = pclose(pipe);
  return out;
}

TEST(BenchSmoke, ReportsEveryField) {
  const std::string config_path = "/tmp/pgjobd-bench-smoke-" + std::to_string(getpid()) + ".yaml";
  {
    std::ofstream config(config_path);
    config << "database: {url: \"" << testing::test_database_url() << "\"}\n"
           << "poll: {min_interval: 10ms, max_interval: 100ms}\n"
           << "handlers: {x: {builtin: noop}}\n";
  }
  const std::string schema = "bench_smoke_" + std::to_string(getpid());
  int status = -1;
  const std::string out = run_and_capture(
      testing::pgjobd_binary() + " bench -c " + config_path + " --schema " + schema +
          " --jobs 2000 --concurrency 8 --latency-jobs 20 --latency-rate 200 --idle-seconds 1"
          " --finished-rows 5000 --pending-rows 5000 --backlog-passes 1 --json 2>/dev/null",
      status);
  std::remove(config_path.c_str());
  ASSERT_EQ(status, 0) << out;
  const auto report = nlohmann::json::parse(out);
  for (const char* field :
       {"enqueue_jobs_per_s", "enqueue_no_trigger_jobs_per_s", "throughput_jobs_per_s",
        "ceiling_jobs_per_s", "ratio", "cpu_s_per_10k_jobs", "peak_rss_mb", "queries_per_job",
        "idle_queries_per_s", "idle_cpu_percent", "throughput_with_finished_rows_jobs_per_s",
        "finished_rows_ratio", "backlog_jobs_per_s", "small_backlog_jobs_per_s", "backlog_ratio",
        "backlog_ratio_min", "backlog_ratio_max"}) {
    ASSERT_TRUE(report.contains(field)) << field;
    ASSERT_TRUE(report[field].is_number()) << field << ": " << report[field];
    EXPECT_GE(report[field].get<double>(), 0.0) << field;
  }
  EXPECT_GT(report["throughput_jobs_per_s"].get<double>(), 0.0);
  EXPECT_GT(report["ratio"].get<double>(), 0.0);
  EXPECT_EQ(report["jobs"], 2000);
  EXPECT_EQ(report["finished_rows"], 5000);
  EXPECT_EQ(report["pending_rows"], 5000);
  EXPECT_GT(report["backlog_ratio"].get<double>(), 0.0);
  EXPECT_TRUE(report["checkpointed"].is_boolean()) << report["checkpointed"];
  for (const char* p : {"p50", "p95", "p99"}) {
    ASSERT_TRUE(report["latency_ms"][p].is_number()) << p;
    ASSERT_TRUE(report["latency_from_send_ms"][p].is_number()) << p;
    // Sending comes before the commit: measured from it, no pick-up can be quicker.
    EXPECT_GE(report["latency_from_send_ms"][p].get<double>(),
              report["latency_ms"][p].get<double>())
        << p;
  }
  EXPECT_LE(report["latency_ms"]["p50"].get<double>(), report["latency_ms"]["p99"].get<double>());
}

}  // namespace
}  // namespace pgjobd
