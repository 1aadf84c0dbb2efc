// Printing a BenchReport as JSON or as an aligned table.

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>

#include "bench/bench.hpp"

namespace pgjobd {
namespace {

template <typename T>
nlohmann::json optional_json(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

// Rounded through its decimal text, so that the JSON shows 1.64 and not the nearest
// binary multiple of 0.01 (1.6400000000000001).
double round_to(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return std::strtod(text, nullptr);
}

nlohmann::json optional_rounded(const std::optional<double>& value, int decimals) {
  return value ? nlohmann::json(round_to(*value, decimals)) : nlohmann::json(nullptr);
}

}  // namespace

std::string bench_report_json(const BenchReport& r) {
  nlohmann::json out = {
      {"jobs", r.jobs},
      {"concurrency", r.concurrency},
      {"enqueue_jobs_per_s", round_to(r.enqueue_jobs_per_s, 0)},
      {"enqueue_no_trigger_jobs_per_s", round_to(r.enqueue_no_trigger_jobs_per_s, 0)},
      {"throughput_jobs_per_s", round_to(r.throughput_jobs_per_s, 0)},
      {"ceiling_jobs_per_s", round_to(r.ceiling_jobs_per_s, 0)},
      {"ratio", round_to(r.ratio, 3)},
      {"latency_ms",
       {{"p50", optional_rounded(r.latency_p50_ms, 2)},
        {"p95", optional_rounded(r.latency_p95_ms, 2)},
        {"p99", optional_rounded(r.latency_p99_ms, 2)}}},
      {"latency_from_send_ms",
       {{"p50", optional_rounded(r.latency_from_send_p50_ms, 2)},
        {"p95", optional_rounded(r.latency_from_send_p95_ms, 2)},
        {"p99", optional_rounded(r.latency_from_send_p99_ms, 2)}}},
      {"cpu_s_per_10k_jobs", round_to(r.cpu_s_per_10k_jobs, 3)},
      {"peak_rss_mb", round_to(r.peak_rss_mb, 1)},
      {"queries_per_job", round_to(r.queries_per_job, 3)},
      {"idle_queries_per_s", optional_rounded(r.idle_queries_per_s, 3)},
      {"idle_cpu_percent", optional_rounded(r.idle_cpu_percent, 3)},
      {"finished_rows", optional_json(r.finished_rows)},
      {"throughput_with_finished_rows_jobs_per_s",
       optional_rounded(r.throughput_with_finished_rows_jobs_per_s, 0)},
      {"finished_rows_ratio", optional_rounded(r.finished_rows_ratio, 3)},
      {"unclaimable_rows", optional_json(r.unclaimable_rows)},
      {"unclaimable_ratio_prefetch", optional_rounded(r.unclaimable_ratio_prefetch, 3)},
      {"unclaimable_ratio_no_prefetch", optional_rounded(r.unclaimable_ratio_no_prefetch, 3)},
      {"paused_rows_ratio_prefetch", optional_rounded(r.paused_rows_ratio_prefetch, 3)},
      {"paused_rows_ratio_no_prefetch", optional_rounded(r.paused_rows_ratio_no_prefetch, 3)},
      {"pending_rows", optional_json(r.pending_rows)},
      {"backlog_jobs_per_s", optional_rounded(r.backlog_jobs_per_s, 0)},
      {"small_backlog_jobs_per_s", optional_rounded(r.small_backlog_jobs_per_s, 0)},
      {"backlog_ratio", optional_rounded(r.backlog_ratio, 3)},
      {"backlog_ratio_min", optional_rounded(r.backlog_ratio_min, 3)},
      {"backlog_ratio_max", optional_rounded(r.backlog_ratio_max, 3)},
      {"backlog_cpu_ms_per_job", optional_rounded(r.backlog_cpu_ms_per_job, 4)},
      {"small_backlog_cpu_ms_per_job", optional_rounded(r.small_backlog_cpu_ms_per_job, 4)},
      {"backlog_cpu_ratio", optional_rounded(r.backlog_cpu_ratio, 3)},
      {"checkpointed", r.checkpointed},
      {"workflows",
       {{"fan_out_children_jobs_per_s", optional_rounded(r.fan_out_children_jobs_per_s, 0)},
        {"independent_jobs_per_s", optional_rounded(r.independent_jobs_per_s, 0)},
        {"fan_out_ratio", optional_rounded(r.fan_out_ratio, 3)},
        {"fan_in_start_ms",
         {{"p50", optional_rounded(r.fan_in_start_p50_ms, 2)},
          {"p99", optional_rounded(r.fan_in_start_p99_ms, 2)},
          {"max", optional_rounded(r.fan_in_start_max_ms, 2)}}},
        {"chain_links_per_s", optional_rounded(r.chain_links_per_s, 0)}}},
  };
  return out.dump(2);
}

std::string bench_report_table(const BenchReport& r) {
  std::string out;
  char line[160];
  const auto row = [&](const char* name, const std::string& value) {
    std::snprintf(line, sizeof line, "%-42s %s\n", name, value.c_str());
    out += line;
  };
  const auto num = [](double v, const char* fmt = "%.1f") {
    char buf[64];
    std::snprintf(buf, sizeof buf, fmt, v);
    return std::string(buf);
  };
  const auto opt = [&](const std::optional<double>& v, const char* fmt = "%.2f") {
    return v ? num(*v, fmt) : std::string("(skipped)");
  };
  row("jobs", std::to_string(r.jobs));
  row("concurrency", std::to_string(r.concurrency));
  row("enqueue_jobs_per_s", num(r.enqueue_jobs_per_s, "%.0f"));
  row("enqueue_no_trigger_jobs_per_s", num(r.enqueue_no_trigger_jobs_per_s, "%.0f"));
  row("throughput_jobs_per_s", num(r.throughput_jobs_per_s, "%.0f"));
  row("ceiling_jobs_per_s", num(r.ceiling_jobs_per_s, "%.0f"));
  row("ratio", num(r.ratio, "%.3f"));
  row("latency_ms p50", opt(r.latency_p50_ms));
  row("latency_ms p95", opt(r.latency_p95_ms));
  row("latency_ms p99", opt(r.latency_p99_ms));
  row("latency_from_send_ms p50", opt(r.latency_from_send_p50_ms));
  row("latency_from_send_ms p95", opt(r.latency_from_send_p95_ms));
  row("latency_from_send_ms p99", opt(r.latency_from_send_p99_ms));
  row("cpu_s_per_10k_jobs", num(r.cpu_s_per_10k_jobs, "%.3f"));
  row("peak_rss_mb", num(r.peak_rss_mb));
  row("queries_per_job", num(r.queries_per_job, "%.3f"));
  row("idle_queries_per_s", opt(r.idle_queries_per_s, "%.3f"));
  row("idle_cpu_percent", opt(r.idle_cpu_percent, "%.3f"));
  row("finished_rows", r.finished_rows ? std::to_string(*r.finished_rows) : "(skipped)");
  row("throughput_with_finished_rows_jobs_per_s",
      opt(r.throughput_with_finished_rows_jobs_per_s, "%.0f"));
  row("finished_rows_ratio", opt(r.finished_rows_ratio, "%.3f"));
  row("unclaimable_rows", r.unclaimable_rows ? std::to_string(*r.unclaimable_rows) : "(skipped)");
  row("unclaimable_ratio_prefetch", opt(r.unclaimable_ratio_prefetch, "%.3f"));
  row("unclaimable_ratio_no_prefetch", opt(r.unclaimable_ratio_no_prefetch, "%.3f"));
  row("paused_rows_ratio_prefetch", opt(r.paused_rows_ratio_prefetch, "%.3f"));
  row("paused_rows_ratio_no_prefetch", opt(r.paused_rows_ratio_no_prefetch, "%.3f"));
  row("pending_rows", r.pending_rows ? std::to_string(*r.pending_rows) : "(skipped)");
  row("backlog_jobs_per_s", opt(r.backlog_jobs_per_s, "%.0f"));
  row("small_backlog_jobs_per_s", opt(r.small_backlog_jobs_per_s, "%.0f"));
  row("backlog_ratio", opt(r.backlog_ratio, "%.3f"));
  row("backlog_ratio_min", opt(r.backlog_ratio_min, "%.3f"));
  row("backlog_ratio_max", opt(r.backlog_ratio_max, "%.3f"));
  row("backlog_cpu_ms_per_job", opt(r.backlog_cpu_ms_per_job, "%.4f"));
  row("small_backlog_cpu_ms_per_job", opt(r.small_backlog_cpu_ms_per_job, "%.4f"));
  row("backlog_cpu_ratio", opt(r.backlog_cpu_ratio, "%.3f"));
  row("checkpointed", r.checkpointed ? "yes" : "no (timed phases may overlap a checkpoint)");
  row("fan_out_children_jobs_per_s", opt(r.fan_out_children_jobs_per_s, "%.0f"));
  row("independent_jobs_per_s", opt(r.independent_jobs_per_s, "%.0f"));
  row("fan_out_ratio", opt(r.fan_out_ratio, "%.3f"));
  row("fan_in_start_ms p50", opt(r.fan_in_start_p50_ms));
  row("fan_in_start_ms p99", opt(r.fan_in_start_p99_ms));
  row("fan_in_start_ms max", opt(r.fan_in_start_max_ms));
  row("chain_links_per_s", opt(r.chain_links_per_s, "%.0f"));
  return out;
}

}  // namespace pgjobd
