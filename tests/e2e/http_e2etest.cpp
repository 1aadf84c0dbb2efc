// End-to-end: the daemon's HTTP endpoint: /metrics counts real jobs, /healthz, and /readyz
// turning 503 while draining.

#include <gtest/gtest.h>
#include <signal.h>

#include <string>

#include "pgjobd/version.hpp"
#include "support/daemon_process.hpp"
#include "support/test_database.hpp"

namespace pgjobd::testing {
namespace {

TEST(HttpE2E, MetricsCountJobsAndProbesAnswer) {
  TestSchema schema;
  DaemonYaml yaml(schema.name());
  yaml.set("metrics", "{listen: \"127.0.0.1:0\"}")
      .handler("ping", "{builtin: noop}")
      .shell_handler("reject", "exit 65", "permanent_exit_codes: [65]");
  DaemonProcess daemon(yaml.text());
  const int port = daemon.metrics_port();
  ASSERT_GT(port, 0) << daemon.log();
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  EXPECT_TRUE(wait_until([&] { return http_get(port, "/readyz").status == 200; }, 10s))
      << http_get(port, "/readyz").body;

  schema.insert_jobs("ping", 25);
  schema.insert_jobs("reject", 2);
  ASSERT_TRUE(wait_until(
      [&] { return schema.count("status = 'done'") == 25 && schema.count("status = 'dead'") == 2; },
      15s));

  const HttpResponse metrics = http_get(port, "/metrics");
  ASSERT_EQ(metrics.status, 200) << metrics.error;
  EXPECT_NE(metrics.body.find("pgjobd_jobs_total{"), std::string::npos);
  EXPECT_EQ(metric_value(metrics.body, "pgjobd_jobs_total",
                         {{"queue", "default"}, {"type", "ping"}, {"outcome", "done"}}),
            25.0)
      << metrics.body;
  EXPECT_EQ(metric_value(metrics.body, "pgjobd_jobs_total",
                         {{"queue", "default"}, {"type", "reject"}, {"outcome", "dead"}}),
            2.0);
  EXPECT_EQ(metric_value(metrics.body, "pgjobd_jobs_total",
                         {{"queue", "default"}, {"type", "reject"}, {"outcome", "done"}}),
            0.0);
  EXPECT_EQ(metric_value(metrics.body, "pgjobd_job_duration_seconds_count",
                         {{"type", "ping"}, {"outcome", "done"}}),
            25.0);
  EXPECT_EQ(metric_value(metrics.body, "pgjobd_build_info", {{"version", kVersion}}), 1.0);
  EXPECT_EQ(metric_value(metrics.body, "pgjobd_workers_max"), 4.0);
  // Counters with known labels are there before their first event (README "Metrics").
  EXPECT_EQ(metric_value(metrics.body, "pgjobd_db_errors_total", {{"operation", "claim"}}), 0.0);
  EXPECT_EQ(metric_value(metrics.body, "pgjobd_db_call_timeouts_total", {{"operation", "claim"}}),
            0.0);
  EXPECT_EQ(metric_value(metrics.body, "pgjobd_queue_wait_seconds_count", {{"queue", "default"}}),
            27.0);

  const HttpResponse health = http_get(port, "/healthz");
  EXPECT_EQ(health.status, 200) << health.error;
  const HttpResponse ready = http_get(port, "/readyz");
  EXPECT_EQ(ready.status, 200) << ready.body;
  EXPECT_EQ(http_get(port, "/no-such-page").status, 404);

  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_for_exit(15s), 0);
}

TEST(HttpE2E, ReadyzIsUnavailableWhileDraining) {
  TestSchema schema;
  TempDir dir;
  const std::string pids = dir.file("pids");
  DaemonYaml yaml(schema.name());
  yaml.set("metrics", "{listen: \"127.0.0.1:0\"}")
      .set("shutdown", "{timeout: 60s}")
      .shell_handler("slow", "echo $$ >> " + shell_quote(pids) + "; exec sleep 30");
  DaemonProcess daemon(yaml.text());
  const int port = daemon.metrics_port();
  ASSERT_GT(port, 0) << daemon.log();
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  schema.insert_jobs("slow", 1);
  ASSERT_TRUE(wait_until([&] { return read_lines(pids).size() == 1; }, 15s));
  ASSERT_TRUE(wait_until([&] { return http_get(port, "/readyz").status == 200; }, 10s));

  daemon.signal(SIGTERM);
  EXPECT_TRUE(wait_until([&] { return http_get(port, "/readyz").status == 503; }, 10s))
      << "/readyz still says ready while draining";
  EXPECT_EQ(http_get(port, "/healthz").status, 200) << "a draining daemon is still alive";
  ASSERT_TRUE(daemon.wait_for_log("received: draining"));
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_for_exit(15s), 0);
  EXPECT_EQ(schema.count("status = 'pending' AND attempts = 0"), 1);
}

}  // namespace
}  // namespace pgjobd::testing
