// Metrics: the series that reach the Prometheus text format, checked line by line.
#include "metrics/metrics.hpp"
#include "support/metrics_text.hpp"

#include <gtest/gtest.h>
#include <prometheus/collectable.h>
#include <prometheus/text_serializer.h>

#include <set>
#include <string>
#include <thread>
#include <vector>

namespace pgjobd {
namespace {

using testing::scrape;

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

// A queue or type the configuration never named (a job the store should not have
// returned, an operation nobody documented) lands in one "(other)" series: an application
// that invents names cannot grow /metrics.
TEST(MetricsTest, LabelValuesNeverConfiguredFoldIntoOther) {
  Metrics metrics({"default"}, {"a"});
  metrics.job_finished("mail", "send", Outcome::kRetry, 1);
  metrics.job_finished("mail", "send", Outcome::kRetry, 1);
  metrics.job_finished("default", "other", Outcome::kDone, 1);
  metrics.job_started("mail", 0.5);
  metrics.db_error("fetch");
  metrics.db_error("fetch");
  metrics.db_error("complete");
  const std::string text = scrape(metrics);
  EXPECT_TRUE(
      has_line(text, R"m(pgjobd_jobs_total{outcome="retry",queue="(other)",type="(other)"} 2)m"))
      << text;
  EXPECT_TRUE(
      has_line(text, R"m(pgjobd_jobs_total{outcome="done",queue="default",type="(other)"} 1)m"));
  EXPECT_TRUE(has_line(text, R"m(pgjobd_queue_wait_seconds_count{queue="(other)"} 1)m"));
  EXPECT_TRUE(has_line(text, R"m(pgjobd_queue_wait_seconds_bucket{queue="(other)",le="0.1"} 0)m"));
  EXPECT_TRUE(has_line(text, R"m(pgjobd_queue_wait_seconds_bucket{queue="(other)",le="1"} 1)m"));
  EXPECT_TRUE(has_line(text, R"m(pgjobd_db_errors_total{operation="(other)"} 2)m"));
  EXPECT_TRUE(has_line(text, R"(pgjobd_db_errors_total{operation="complete"} 1)"));
  for (const char* name : {"\"mail\"", "\"send\"", "\"other\"", "\"fetch\""}) {
    EXPECT_EQ(text.find(name), std::string::npos) << name << "\n" << text;
  }
}

// The number of samples of `family` in `text` (histogram families: of its _count series).
int series_count(const std::string& text, const std::string& family) {
  int n = 0;
  for (std::size_t at = text.find("\n" + family + "{"); at != std::string::npos;
       at = text.find("\n" + family + "{", at + 1)) {
    ++n;
  }
  return n;
}

// Prometheus' advice for counters with known labels: there at 0 before the first event, so
// rate() and alerts on them work before the first failure. db errors appeared only at the
// first error.
TEST(MetricsTest, CountersWithKnownLabelsShowAtZeroFromTheStart) {
  Metrics metrics({"default"}, {"a"});
  const std::string text = scrape(metrics);
  for (const char* operation :
       {"claim", "complete", "connect", "heartbeat", "listen", "prune", "rescue", "resign", "stats",
        "schema check", "schedule", "limits", "daemon report", "daemon remove", "daemon expiry",
        "dead letters", "notify finished", "(other)"}) {
    const std::string labels = std::string("{operation=\"") + operation + "\"} 0";
    EXPECT_TRUE(has_line(text, "pgjobd_db_errors_total" + labels)) << operation << "\n" << text;
    EXPECT_TRUE(has_line(text, "pgjobd_db_call_timeouts_total" + labels)) << operation;
  }
  EXPECT_TRUE(has_line(text, R"(pgjobd_loop_errors_total{loop="claim"} 0)"));
  EXPECT_TRUE(has_line(text, R"(pgjobd_config_reloads_total{result="rejected"} 0)"));
  EXPECT_TRUE(has_line(text, "pgjobd_lease_renewals_held_total 0"));
  EXPECT_TRUE(has_line(text, R"(pgjobd_jobs_total{outcome="dead",queue="default",type="a"} 0)"));

  // An error counts in its own series, a timeout in both families.
  metrics.db_error("claim", true);
  metrics.db_error("claim");
  const std::string after = scrape(metrics);
  EXPECT_TRUE(has_line(after, R"(pgjobd_db_errors_total{operation="claim"} 2)")) << after;
  EXPECT_TRUE(has_line(after, R"(pgjobd_db_call_timeouts_total{operation="claim"} 1)"));
  EXPECT_TRUE(has_line(after, R"(pgjobd_db_errors_total{operation="complete"} 0)"));
}

// The limits in force get their throttled series at 0, one per reason the limit has; a
// later read of the limits never resets a count.
TEST(MetricsTest, LimitsInForceShowTheirThrottledSeriesAtZero) {
  Metrics metrics({"default"}, {"a"});
  metrics.set_limits({{"partner_api", "concurrency"}, {"mail", "rate"}});
  std::string text = scrape(metrics);
  EXPECT_TRUE(
      has_line(text, R"(pgjobd_limit_throttled_total{limit="partner_api",reason="concurrency"} 0)"))
      << text;
  EXPECT_TRUE(has_line(text, R"(pgjobd_limit_throttled_total{limit="mail",reason="rate"} 0)"));
  EXPECT_EQ(text.find(R"(limit="mail",reason="concurrency")"), std::string::npos);
  metrics.limit_throttled("mail", "rate");
  metrics.set_limits({{"mail", "rate"}});
  text = scrape(metrics);
  EXPECT_TRUE(has_line(text, R"(pgjobd_limit_throttled_total{limit="mail",reason="rate"} 1)"))
      << text;
}

// The README's metrics table and the families a scrape shows are the same set (the
// exposer's own series, served by the HTTP server, are checked in http_server_test).
TEST(MetricsTest, ReadmeTableListsExactlyTheFamilies) {
  Metrics metrics({"default"}, {"a"});
  // Every family with a series: those whose series start with their first value.
  metrics.set_queue_depth({{"default", "pending", 1}});
  metrics.schedule_fires("nightly", "fired", 1);
  metrics.limit_throttled("mail", "rate");
  metrics.set_limit_running({{"mail", 1}});
  std::set<std::string> scraped = testing::families_in(scrape(metrics));
  std::set<std::string> documented;
  for (const std::string& name : testing::readme_metric_names()) {
    if (name.starts_with("pgjobd_")) documented.insert(name);
  }
  EXPECT_EQ(scraped, documented);
}

// An application inserting 1,000 queue names, and jobs of them reaching the daemon anyway
// (a store that broke its contract): the series stay those of the served queues.
TEST(MetricsTest, ThousandQueueNamesYieldSeriesOnlyForServedQueues) {
  Metrics metrics({"default", "mail"}, {"a"});
  std::vector<Metrics::DepthRow> depth;
  std::vector<std::pair<std::string, double>> ages;
  for (int i = 0; i < 1000; ++i) {
    const std::string queue = "app-queue-" + std::to_string(i);
    depth.push_back({queue, "pending", 1});
    ages.emplace_back(queue, 5);
    metrics.job_started(queue, 0.1);
    metrics.job_finished(queue, "type-" + std::to_string(i), Outcome::kDone, 0.1);
  }
  depth.push_back({"default", "pending", 3});
  depth.push_back({"mail", "running", 2});
  depth.push_back({"mail", "bogus-status", 2});
  ages.emplace_back("default", 7);
  metrics.set_queue_depth(depth);
  metrics.set_oldest_due_age(ages);

  const std::string text = scrape(metrics);
  EXPECT_EQ(text.find("app-queue-"), std::string::npos) << text.substr(0, 4000);
  EXPECT_EQ(text.find("type-"), std::string::npos);
  EXPECT_EQ(text.find("bogus"), std::string::npos);
  EXPECT_EQ(series_count(text, "pgjobd_queue_depth"), 2) << text;
  EXPECT_TRUE(has_line(text, R"(pgjobd_queue_depth{queue="default",status="pending"} 3)"));
  EXPECT_TRUE(has_line(text, R"(pgjobd_queue_depth{queue="mail",status="running"} 2)"));
  EXPECT_EQ(series_count(text, "pgjobd_oldest_due_job_age_seconds"), 2);
  EXPECT_TRUE(has_line(text, R"(pgjobd_oldest_due_job_age_seconds{queue="default"} 7)"));
  EXPECT_TRUE(has_line(text, R"(pgjobd_oldest_due_job_age_seconds{queue="mail"} 0)"));
  // Per outcome: default/a and mail/a (built at start), and (other)/(other).
  EXPECT_EQ(series_count(text, "pgjobd_jobs_total"), 3 * 5) << text;
  EXPECT_TRUE(
      has_line(text, R"m(pgjobd_jobs_total{outcome="done",queue="(other)",type="(other)"} 1000)m"));
  EXPECT_EQ(series_count(text, "pgjobd_queue_wait_seconds_count"), 3);
  EXPECT_TRUE(has_line(text, R"m(pgjobd_queue_wait_seconds_count{queue="(other)"} 1000)m"));
}

// SIGHUP: a queue no longer served loses its gauges (and a statistics round still in
// flight cannot bring them back); a newly served one gets them. Job counters keep the
// series of earlier queues and types: a job claimed before the reload may finish after it.
TEST(MetricsTest, ServedQueuesChangeWithAReload) {
  Metrics metrics({"default", "mail"}, {"a"});
  metrics.set_queue_depth({{"default", "pending", 1}, {"mail", "pending", 4}});
  metrics.set_oldest_due_age({{"mail", 9}});
  metrics.job_finished("mail", "a", Outcome::kDone, 0.1);

  metrics.set_served({"default", "reports"}, {"a", "b"});
  std::string text = scrape(metrics);
  EXPECT_EQ(text.find(R"(pgjobd_queue_depth{queue="mail")"), std::string::npos) << text;
  EXPECT_EQ(text.find(R"(pgjobd_oldest_due_job_age_seconds{queue="mail"})"), std::string::npos);
  EXPECT_TRUE(has_line(text, R"(pgjobd_queue_depth{queue="default",status="pending"} 1)"));
  EXPECT_TRUE(has_line(text, R"(pgjobd_oldest_due_job_age_seconds{queue="reports"} 0)"));
  EXPECT_TRUE(has_line(text, R"(pgjobd_jobs_total{outcome="done",queue="mail",type="a"} 1)"));
  // The new pairs show at 0 at once, as those configured at start do.
  EXPECT_TRUE(has_line(text, R"(pgjobd_jobs_total{outcome="dead",queue="reports",type="b"} 0)"));
  EXPECT_TRUE(has_line(text, R"(pgjobd_jobs_total{outcome="dead",queue="default",type="b"} 0)"));
  EXPECT_TRUE(has_line(text, R"(pgjobd_queue_wait_seconds_count{queue="reports"} 0)"));

  // A round that asked before the reload still reports mail: ignored.
  metrics.set_queue_depth({{"mail", "pending", 4}, {"reports", "failed", 2}});
  metrics.set_oldest_due_age({{"mail", 9}, {"reports", 3}});
  text = scrape(metrics);
  EXPECT_EQ(text.find(R"(queue="mail",status)"), std::string::npos) << text;
  EXPECT_EQ(text.find(R"(pgjobd_oldest_due_job_age_seconds{queue="mail"})"), std::string::npos);
  EXPECT_TRUE(has_line(text, R"(pgjobd_queue_depth{queue="reports",status="failed"} 2)"));
  EXPECT_TRUE(has_line(text, R"(pgjobd_queue_depth{queue="default",status="pending"} 0)"));
  EXPECT_TRUE(has_line(text, R"(pgjobd_oldest_due_job_age_seconds{queue="reports"} 3)"));

  // Served again: its job series never left; its gauges come back with the next round.
  metrics.set_served({"mail"}, {"a"});
  metrics.job_finished("reports", "b", Outcome::kDone, 0.1);  // claimed before the reload
  metrics.set_queue_depth({{"mail", "pending", 4}});
  text = scrape(metrics);
  EXPECT_TRUE(has_line(text, R"(pgjobd_queue_depth{queue="mail",status="pending"} 4)")) << text;
  EXPECT_EQ(series_count(text, "pgjobd_queue_depth"), 1);
  EXPECT_TRUE(has_line(text, R"(pgjobd_jobs_total{outcome="done",queue="reports",type="b"} 1)"));
}

TEST(MetricsTest, QueueDepthReplacesPreviousValues) {
  Metrics metrics({"default", "mail"}, {"a"});
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
  metrics.set_jobs_held(40);
  metrics.set_workers_max(16);
  metrics.retried();
  metrics.retried();
  metrics.rescued(4);
  metrics.stale_write(1);
  metrics.fetch_batch(3);
  metrics.fetch_batch(16);
  metrics.fetch_batch(1060);  // a prefetching claim
  metrics.set_poll_interval(0.25);
  const std::string text = scrape(metrics);
  EXPECT_TRUE(has_line(text, "pgjobd_workers_busy 3")) << text;
  EXPECT_TRUE(has_line(text, "pgjobd_jobs_held 40"));
  EXPECT_TRUE(has_line(text, "pgjobd_workers_max 16"));
  EXPECT_TRUE(has_line(text, "pgjobd_retries_total 2"));
  EXPECT_TRUE(has_line(text, "pgjobd_rescued_total 4"));
  EXPECT_TRUE(has_line(text, "pgjobd_stale_writes_total 1"));
  EXPECT_TRUE(has_line(text, R"(pgjobd_fetch_batch_size_bucket{le="2"} 0)"));
  EXPECT_TRUE(has_line(text, R"(pgjobd_fetch_batch_size_bucket{le="4"} 1)"));
  EXPECT_TRUE(has_line(text, R"(pgjobd_fetch_batch_size_bucket{le="1024"} 2)"));
  EXPECT_TRUE(has_line(text, R"(pgjobd_fetch_batch_size_bucket{le="2048"} 3)"));
  EXPECT_TRUE(has_line(text, R"(pgjobd_fetch_batch_size_bucket{le="16384"} 3)"));
  EXPECT_TRUE(has_line(text, "pgjobd_fetch_batch_size_sum 1079"));
  EXPECT_TRUE(has_line(text, "pgjobd_poll_interval_seconds 0.25"));
  EXPECT_TRUE(has_line(text, R"(pgjobd_build_info{version="0.1.0"} 1)"));
}

TEST(MetricsTest, EveryFamilyHasHelpText) {
  Metrics metrics({"default"}, {"a"});
  metrics.db_error("claim");
  metrics.set_queue_depth({{"default", "pending", 1}});
  const std::string text = scrape(metrics);
  for (const char* name :
       {"pgjobd_jobs_total", "pgjobd_job_duration_seconds", "pgjobd_queue_wait_seconds",
        "pgjobd_queue_depth", "pgjobd_oldest_due_job_age_seconds", "pgjobd_workers_busy",
        "pgjobd_jobs_held", "pgjobd_workers_max", "pgjobd_retries_total", "pgjobd_rescued_total",
        "pgjobd_stale_writes_total", "pgjobd_completions_dropped_total",
        "pgjobd_completions_held_total", "pgjobd_completions_waiting_for_row_lock",
        "pgjobd_finished_unannounced_total", "pgjobd_fetch_batch_size",
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
        if (t == 1 && i == kPerThread / 2) metrics.set_served({"default", "late"}, {"a", "b"});
      }
    });
  }
  for (auto& thread : threads) thread.join();
  const std::string text = scrape(metrics);
  EXPECT_TRUE(has_line(text, R"(pgjobd_jobs_total{outcome="done",queue="default",type="a"} 40000)"))
      << text;
  // Before the reload the jobs of late/b counted as (other), after it as late/b: none lost.
  const auto value = [&](const std::string& prefix) {
    const auto at = text.find("\n" + prefix + " ");
    // No line: the reload came before the first count of that series.
    return at == std::string::npos ? 0.0 : std::stod(text.substr(at + prefix.size() + 2));
  };
  const double other =
      value(R"m(pgjobd_jobs_total{outcome="retry",queue="(other)",type="(other)"})m");
  const double late = value(R"(pgjobd_jobs_total{outcome="retry",queue="late",type="b"})");
  EXPECT_EQ(other + late, 20000) << text;
}

// pgjobd_queue_paused: one series per served queue, 0 until reported paused, back to 0 when
// no longer reported; queues not served get none, and a queue no longer served loses its.
TEST(MetricsTest, QueuePausedGaugeCoversServedQueuesOnly) {
  Metrics metrics({"default", "mail"}, {"a"});
  std::string text = scrape(metrics);
  EXPECT_EQ(series_count(text, "pgjobd_queue_paused"), 2) << text;
  EXPECT_TRUE(has_line(text, R"(pgjobd_queue_paused{queue="mail"} 0)")) << text;

  metrics.set_queue_paused({"mail", "elsewhere"});
  text = scrape(metrics);
  EXPECT_TRUE(has_line(text, R"(pgjobd_queue_paused{queue="mail"} 1)")) << text;
  EXPECT_TRUE(has_line(text, R"(pgjobd_queue_paused{queue="default"} 0)")) << text;
  EXPECT_EQ(text.find("elsewhere"), std::string::npos) << text;

  metrics.set_queue_paused({});
  EXPECT_TRUE(has_line(scrape(metrics), R"(pgjobd_queue_paused{queue="mail"} 0)"));

  metrics.set_served({"default"}, {"a"});
  text = scrape(metrics);
  EXPECT_EQ(series_count(text, "pgjobd_queue_paused"), 1) << text;
  EXPECT_EQ(text.find(R"(pgjobd_queue_paused{queue="mail"})"), std::string::npos) << text;
}

}  // namespace
}  // namespace pgjobd

namespace pgjobd {
namespace {

TEST(MetricsScheduleTest, FiresAreCountedByScheduleAndResultWithBoundedNames) {
  Metrics metrics({"default"}, {"a"});
  metrics.schedule_fires("nightly", "fired", 1);
  metrics.schedule_fires("nightly", "missed", 3);
  metrics.schedule_fires("nightly", "skipped_overlap", 0);  // nothing to count
  for (std::size_t i = 0; i <= Metrics::kMaxScheduleLabels; ++i) {
    metrics.schedule_fires("s" + std::to_string(i), "fired", 1);
  }
  metrics.set_schedule_overdue(12);
  const std::string text = scrape(metrics);
  EXPECT_TRUE(has_line(text, R"(pgjobd_schedule_fires_total{result="fired",schedule="nightly"} 1)"))
      << text;
  EXPECT_TRUE(
      has_line(text, R"(pgjobd_schedule_fires_total{result="missed",schedule="nightly"} 3)"));
  EXPECT_EQ(text.find(R"(result="skipped_overlap")"), std::string::npos);
  // "nightly" took one of the names: the last two schedules share (other).
  EXPECT_TRUE(
      has_line(text, R"m(pgjobd_schedule_fires_total{result="fired",schedule="(other)"} 2)m"));
  EXPECT_TRUE(has_line(text, "pgjobd_schedule_overdue_seconds 12"));
}

}  // namespace
}  // namespace pgjobd
