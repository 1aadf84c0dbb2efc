// /metrics of a whole engine over the fake database: its series follow the configuration,
// never the table. 1,000 queue names in the table add nothing; a reload adds and removes
// the gauges of the queues it adds and drops; jobs a misbehaving store hands over from
// unserved queues or of unconfigured types count under "(other)".

#include <gtest/gtest.h>

#include <optional>

#include "engine/engine_factory.hpp"
#include "pgjobd/engine.hpp"
#include "support/daemon_process.hpp"
#include "support/fake_job_store.hpp"
#include "support/job_gate.hpp"
#include "support/wait_until.hpp"

namespace pgjobd {
namespace {

using pgjobd::testing::FakeDatabase;
using pgjobd::testing::FakeJobTable;
using pgjobd::testing::JobGate;
using pgjobd::testing::metric_value;
using pgjobd::testing::StoreMethod;
using pgjobd::testing::wait_until;
using std::chrono::seconds;

Config metrics_config(const std::vector<std::string>& queues) {
  Config config;
  config.metrics.listen = "127.0.0.1:0";
  config.worker.concurrency = 4;
  config.poll.min_interval = Millis(10);
  config.poll.max_interval = Millis(100);
  config.worker.queues.clear();
  for (const auto& queue : queues) config.worker.queues[queue];
  return config;
}

class EngineMetricsTest : public ::testing::Test {
 protected:
  void TearDown() override {
    table_.unblock_all();
    table_.set_claim_ignores_filters(false);
    gate_.release_all();
    if (engine_) engine_->drain();
  }

  Engine& start_engine(const Config& config) {
    engine_.emplace(make_engine(config, database_));
    engine_->register_handler(
        "gated", [this](const Job& job, std::stop_token stop) { return gate_.run(job, stop); });
    engine_->start();
    return *engine_;
  }

  std::string scrape() const {
    const auto response = pgjobd::testing::http_get(engine_->http_port(), "/metrics");
    EXPECT_EQ(response.status, 200) << response.error;
    return response.body;
  }

  std::optional<double> depth(const std::string& text, const std::string& queue) const {
    return metric_value(text, "pgjobd_queue_depth", {{"queue", queue}, {"status", "pending"}});
  }

  const std::shared_ptr<FakeDatabase> database_ = std::make_shared<FakeDatabase>();
  FakeJobTable& table_ = database_->table();
  JobGate gate_;
  std::optional<Engine> engine_;  // last: drained before the gate goes away
};

TEST_F(EngineMetricsTest, ThousandQueueNamesInTheTableAndAReloadThatAddsAndDropsQueues) {
  for (int i = 0; i < 1000; ++i) table_.add_job("gated", "app-queue-" + std::to_string(i));
  Engine& engine = start_engine(metrics_config({"idle-a", "idle-b"}));
  std::string text;
  ASSERT_TRUE(wait_until(
      [&] {
        text = scrape();
        return metric_value(text, "pgjobd_oldest_due_job_age_seconds", {{"queue", "idle-a"}}) &&
               table_.calls(StoreMethod::kQueueStats) >= 1;
      },
      seconds(20)));
  text = scrape();  // after the first statistics round
  EXPECT_EQ(text.find("app-queue-"), std::string::npos) << text;
  EXPECT_TRUE(metric_value(text, "pgjobd_oldest_due_job_age_seconds", {{"queue", "idle-b"}}));

  // SIGHUP: idle-b dropped, app-queue-7 served. Its job runs (gated) and its gauges appear.
  // The reload asks for statistics at once: the regular round (30 s) would miss the wait.
  engine.reload(metrics_config({"idle-a", "app-queue-7"}));
  ASSERT_TRUE(gate_.wait_started(1));
  ASSERT_TRUE(wait_until(
      [&] {
        text = scrape();
        return metric_value(text, "pgjobd_queue_depth", {{"queue", "app-queue-7"}}).has_value();
      },
      seconds(20)))
      << text;
  // idle-b's gauges are gone (its job counters stay: counters never reset mid-life).
  EXPECT_FALSE(metric_value(text, "pgjobd_queue_depth", {{"queue", "idle-b"}})) << text;
  EXPECT_FALSE(metric_value(text, "pgjobd_oldest_due_job_age_seconds", {{"queue", "idle-b"}}));
  EXPECT_TRUE(metric_value(text, "pgjobd_oldest_due_job_age_seconds", {{"queue", "app-queue-7"}}));
  EXPECT_EQ(text.find("app-queue-8"), std::string::npos);
  EXPECT_EQ(text.find("app-queue-70"), std::string::npos);
}

// A store that breaks its contract (returns a job of a queue not asked for and of a type
// with no handler): the engine hands the job back, and its metrics name neither.
TEST_F(EngineMetricsTest, AJobFromAnUnservedQueueOfAnUnknownTypeCountsAsOther) {
  table_.add_job("rogue-type", "rogue-queue");
  table_.set_claim_ignores_filters(true);
  start_engine(metrics_config({"default"}));
  ASSERT_TRUE(table_.wait_until([&] { return !table_.completions().empty(); }));
  table_.set_claim_ignores_filters(false);
  EXPECT_EQ(table_.completions().front().outcome, Outcome::kReleased);

  const std::string text = scrape();
  EXPECT_EQ(text.find("rogue"), std::string::npos) << text;
  const auto released =
      metric_value(text, "pgjobd_jobs_total",
                   {{"queue", "(other)"}, {"type", "(other)"}, {"outcome", "released"}});
  ASSERT_TRUE(released.has_value()) << text;
  EXPECT_GE(*released, 1);
  EXPECT_GE(
      metric_value(text, "pgjobd_queue_wait_seconds_count", {{"queue", "(other)"}}).value_or(0), 1);
}

}  // namespace
}  // namespace pgjobd
