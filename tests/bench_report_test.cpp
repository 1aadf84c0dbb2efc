// The bench report's JSON and table: rounding, skipped phases, the checkpoint flag.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "bench/bench.hpp"

namespace pgjobd {
namespace {

BenchReport sample_report() {
  BenchReport r;
  r.jobs = 1000;
  r.concurrency = 8;
  r.throughput_jobs_per_s = 23517.6;
  r.ceiling_jobs_per_s = 23657.2;
  r.ratio = 0.99412;
  r.latency_p50_ms = 1.6400000000000001;
  r.latency_p99_ms = 3.2349;
  r.latency_p95_ms = 2.37;
  return r;
}

TEST(BenchReport, JsonValuesAreRoundedToTheirDecimalText) {
  const auto json = bench_report_json(sample_report());
  EXPECT_NE(json.find("\"p50\": 1.64,"), std::string::npos) << json;
  EXPECT_NE(json.find("\"p99\": 3.23\n"), std::string::npos) << json;
  const auto report = nlohmann::json::parse(json);
  EXPECT_EQ(report["throughput_jobs_per_s"].get<double>(), 23518.0);
  EXPECT_EQ(report["ratio"].get<double>(), 0.994);
}

TEST(BenchReport, SkippedPhasesAreNullAndTheCheckpointFlagIsShown) {
  BenchReport r = sample_report();
  r.latency_p50_ms.reset();
  const auto report = nlohmann::json::parse(bench_report_json(r));
  EXPECT_TRUE(report["latency_ms"]["p50"].is_null());
  EXPECT_TRUE(report["finished_rows"].is_null());
  EXPECT_TRUE(report["finished_rows_ratio"].is_null());
  EXPECT_EQ(report["checkpointed"], false);
  const std::string table = bench_report_table(r);
  EXPECT_NE(table.find("finished_rows_ratio"), std::string::npos) << table;
  EXPECT_NE(table.find("(skipped)"), std::string::npos) << table;
  EXPECT_NE(table.find("timed phases may overlap a checkpoint"), std::string::npos) << table;
}

TEST(BenchReport, FinishedRowsRatioIsReportedWhenMeasured) {
  BenchReport r = sample_report();
  r.finished_rows = 5000000;
  r.throughput_with_finished_rows_jobs_per_s = 21000.4;
  r.finished_rows_ratio = 0.89297;
  r.checkpointed = true;
  const auto report = nlohmann::json::parse(bench_report_json(r));
  EXPECT_EQ(report["finished_rows"], 5000000);
  EXPECT_EQ(report["throughput_with_finished_rows_jobs_per_s"].get<double>(), 21000.0);
  EXPECT_EQ(report["finished_rows_ratio"].get<double>(), 0.893);
  EXPECT_EQ(report["checkpointed"], true);
}

TEST(BenchReport, BacklogRatioIsReportedWhenMeasured) {
  BenchReport r = sample_report();
  EXPECT_TRUE(nlohmann::json::parse(bench_report_json(r))["backlog_ratio"].is_null());
  r.pending_rows = 10000000;
  r.backlog_jobs_per_s = 30000.4;
  r.small_backlog_jobs_per_s = 35000.6;
  r.backlog_ratio = 0.85714;
  r.backlog_ratio_min = 0.8;
  r.backlog_ratio_max = 0.9;
  const auto report = nlohmann::json::parse(bench_report_json(r));
  EXPECT_EQ(report["pending_rows"], 10000000);
  EXPECT_EQ(report["backlog_jobs_per_s"].get<double>(), 30000.0);
  EXPECT_EQ(report["small_backlog_jobs_per_s"].get<double>(), 35001.0);
  EXPECT_EQ(report["backlog_ratio"].get<double>(), 0.857);
  EXPECT_EQ(report["backlog_ratio_min"].get<double>(), 0.8);
  EXPECT_EQ(report["backlog_ratio_max"].get<double>(), 0.9);
  EXPECT_NE(bench_report_table(r).find("backlog_ratio"), std::string::npos);
  EXPECT_TRUE(report["backlog_cpu_ratio"].is_null());  // the cluster not on this machine
}

TEST(BenchReport, BacklogCpuPerJobIsReportedWhenMeasured) {
  BenchReport r = sample_report();
  r.pending_rows = 10000000;
  r.backlog_cpu_ms_per_job = 0.019412;
  r.small_backlog_cpu_ms_per_job = 0.018349;
  r.backlog_cpu_ratio = 0.94526;
  const auto report = nlohmann::json::parse(bench_report_json(r));
  EXPECT_EQ(report["backlog_cpu_ms_per_job"].get<double>(), 0.0194);
  EXPECT_EQ(report["small_backlog_cpu_ms_per_job"].get<double>(), 0.0183);
  EXPECT_EQ(report["backlog_cpu_ratio"].get<double>(), 0.945);
  EXPECT_NE(bench_report_table(r).find("backlog_cpu_ratio"), std::string::npos);
}

}  // namespace
}  // namespace pgjobd
