// Metrics: the series that reach the Prometheus text format, checked line by line.
#include "metrics/metrics.hpp"

#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <string>
#include <thread>
#include <vector>

namespace pgjobd {
namespace {

std::string scrape(const Metrics& metrics) {
  return prometheus::TextSerializer().Serialize(metrics.registry()->Collect());
}

// True when `text` holds `line` as a whole line.
bool has_line(const std::string& text, const std::string& line) {
  return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

TEST(MetricsTest, CountsJobsByQueueTypeAndOutcome) {
  Metrics metrics({"default"}, {"a", "b"});
  metrics.job_finished("default", "a", Outcome::kDone, 0.002);
  metrics.job_finished("default", "a", Outcome::kDone, 0.2);
  metrics.job_finished("default", "b", Outcome::kDead, 3);
  const std::string text = scrape(metrics);
  EXPECT_TRUE(has_line(text, R"(pgjobd_jobs_total{outcome="done",queue="default",type="a"} 2)"))
      << text;
  EXPECT_TRUE(has_line(text, R"(pgjobd_jobs_total{outcome="dead",queue="default",type="b"} 1)"));
  // Children are pre-created: an outcome that never happened still shows as 0.
  EXPECT_TRUE(
      has_line(text, R"(pgjobd_jobs_total{outcome="released",queue="default",type="b"} 0)"));
  EXPECT_TRUE(has_line(
      text,
      R"(pgjobd_job_duration_seconds_bucket{outcome="done",queue="default",type="a",le="0.0025"} 1)"));
  EXPECT_TRUE(has_line(
      text,
      R"(pgjobd_job_duration_seconds_bucket{outcome="done",queue="default",type="a",le="60"} 2)"));
  EXPECT_TRUE(has_line(
      text, R"(pgjobd_job_duration_seconds_count{outcome="done",queue="default",type="a"} 2)"));
}

TEST(MetricsTest, UnknownLabelValuesAreAddedLazily) {
  Metrics metrics({"default"}, {"a"});
  metrics.job_finished("mail", "send", Outcome::kRetry, 1);
  metrics.job_finished("mail", "send", Outcome::kRetry, 1);
  metrics.job_finished("default", "other", Outcome::kDone, 1);
  metrics.job_started("mail", 0.5);
  metrics.db_error("fetch");
  metrics.db_error("fetch");
  metrics.db_error("complete");
  const std::string text = scrape(metrics);
  EXPECT_TRUE(has_line(text, R"(pgjobd_jobs_total{outcome="retry",queue="mail",type="send"} 2)"))
      << text;
  EXPECT_TRUE(
      has_line(text, R"(pgjobd_jobs_total{outcome="done",queue="default",type="other"} 1)"));
  EXPECT_TRUE(has_line(text, R"(pgjobd_queue_wait_seconds_count{queue="mail"} 1)"));
  EXPECT_TRUE(has_line(text, R"(pgjobd_queue_wait_seconds_bucket{queue="mail",le="0.1"} 0)"));
  EXPECT_TRUE(has_line(text, R"(pgjobd_queue_wait_seconds_bucket{queue="mail",le="1"} 1)"));
  EXPECT_TRUE(has_line(text, R"(pgjobd_db_errors_total{operation="fetch"} 2)"));
  EXPECT_TRUE(has_line(text, R"(pgjobd_db_errors_total{operation="complete"} 1)"));
}

TEST(MetricsTest, QueueDepthReplacesPreviousValues) {
  Metrics metrics({"default"}, {"a"});
  metrics.set_queue_depth({{"default", "pending", 5}, {"mail", "failed", 2}});
  std::string text = scrape(metrics);
  EXPECT_TRUE(has_line(text, R"(pgjobd_queue_depth{queue="default",status="pending"} 5)")) << text;
  EXPECT_TRUE(has_line(text, R"(pgjobd_queue_depth{queue="mail",status="failed"} 2)"));

  metrics.set_queue_depth({{"default", "running", 1}});
  text = scrape(metrics);
  EXPECT_TRUE(has_line(text, R"(pgjobd_queue_depth{queue="default",status="pending"} 0)")) << text;
  EXPECT_TRUE(has_line(text, R"(pgjobd_queue_depth{queue="mail",status="failed"} 0)"));
  EXPECT_TRUE(has_line(text, R"(pgjobd_queue_depth{queue="default",status="running"} 1)"));
}

TEST(MetricsTest, OldestDueAgeZeroesMissingQueues) {
  Metrics metrics({"default", "mail"}, {"a"});
  std::string text = scrape(metrics);
  EXPECT_TRUE(has_line(text, R"(pgjobd_oldest_due_job_age_seconds{queue="mail"} 0)")) << text;
  metrics.set_oldest_due_age({{"default", 12.5}, {"mail", 3}});
  metrics.set_oldest_due_age({{"default", 7}});
  text = scrape(metrics);
  EXPECT_TRUE(has_line(text, R"(pgjobd_oldest_due_job_age_seconds{queue="default"} 7)")) << text;
  EXPECT_TRUE(has_line(text, R"(pgjobd_oldest_due_job_age_seconds{queue="mail"} 0)"));
}

TEST(MetricsTest, ScalarsAndBuildInfo) {
  Metrics metrics({"default"}, {"a"});
  metrics.set_workers_busy(3);
  metrics.set_workers_max(16);
  metrics.retried();
  metrics.retried();
  metrics.rescued(4);
  metrics.stale_write(1);
  metrics.fetch_batch(3);
  metrics.fetch_batch(16);
  metrics.set_poll_interval(0.25);
  const std::string text = scrape(metrics);
  EXPECT_TRUE(has_line(text, "pgjobd_workers_busy 3")) << text;
  EXPECT_TRUE(has_line(text, "pgjobd_workers_max 16"));
  EXPECT_TRUE(has_line(text, "pgjobd_retries_total 2"));
  EXPECT_TRUE(has_line(text, "pgjobd_rescued_total 4"));
  EXPECT_TRUE(has_line(text, "pgjobd_stale_writes_total 1"));
  EXPECT_TRUE(has_line(text, R"(pgjobd_fetch_batch_size_bucket{le="2"} 0)"));
  EXPECT_TRUE(has_line(text, R"(pgjobd_fetch_batch_size_bucket{le="4"} 1)"));
  EXPECT_TRUE(has_line(text, R"(pgjobd_fetch_batch_size_bucket{le="1024"} 2)"));
  EXPECT_TRUE(has_line(text, "pgjobd_fetch_batch_size_sum 19"));
  EXPECT_TRUE(has_line(text, "pgjobd_poll_interval_seconds 0.25"));
  EXPECT_TRUE(has_line(text, R"(pgjobd_build_info{version="0.1.0"} 1)"));
}

TEST(MetricsTest, EveryFamilyHasHelpText) {
  Metrics metrics({"default"}, {"a"});
  metrics.db_error("fetch");
  metrics.set_queue_depth({{"default", "pending", 1}});
  const std::string text = scrape(metrics);
  for (const char* name :
       {"pgjobd_jobs_total", "pgjobd_job_duration_seconds", "pgjobd_queue_wait_seconds",
        "pgjobd_queue_depth", "pgjobd_oldest_due_job_age_seconds", "pgjobd_workers_busy",
        "pgjobd_workers_max", "pgjobd_retries_total", "pgjobd_rescued_total",
        "pgjobd_stale_writes_total", "pgjobd_completions_dropped_total", "pgjobd_fetch_batch_size",
        "pgjobd_poll_interval_seconds", "pgjobd_db_errors_total", "pgjobd_build_info"}) {
    EXPECT_NE(text.find(std::string("# HELP ") + name + " "), std::string::npos) << name;
  }
}

TEST(MetricsTest, ConcurrentJobFinishedSumsCorrectly) {
  Metrics metrics({"default"}, {"a"});
  constexpr int kThreads = 4;
  constexpr int kPerThread = 10000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&metrics, t] {
      for (int i = 0; i < kPerThread; ++i) {
        metrics.job_finished("default", "a", Outcome::kDone, 0.001);
        // Half the threads also race on creating the same lazily added series.
        if (t % 2 == 0) metrics.job_finished("late", "b", Outcome::kRetry, 0.001);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  const std::string text = scrape(metrics);
  EXPECT_TRUE(has_line(text, R"(pgjobd_jobs_total{outcome="done",queue="default",type="a"} 40000)"))
      << text;
  EXPECT_TRUE(has_line(text, R"(pgjobd_jobs_total{outcome="retry",queue="late",type="b"} 20000)"));
}

}  // namespace
}  // namespace pgjobd
