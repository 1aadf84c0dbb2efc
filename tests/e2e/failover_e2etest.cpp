// Failover to a promoted synchronous standby: two daemons on a multi-host URL ride out the
// primary's crash (pg_ctl stop -m immediate) and the standby's promotion mid-run without a
// restart, and every sql-handler effect happens exactly once.

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>

#include "support/daemon_process.hpp"
#include "support/private_cluster.hpp"
#include "support/test_text.hpp"
#include "support/wait_until.hpp"

namespace pgjobd::testing {
namespace {

constexpr int kFailoverJobs = 3000;
constexpr auto kFailoverOutage = 3s;

// A daemon on the pair's multi-host URL, schema `failover`, whose `effect` handler records
// its job id and the daemon's name in failover.effects, in the transaction that marks the
// job done. The table has no unique key, so a second run of a job shows as a second row, not
// as an error. Lease 2 s: jobs the old primary had handed out come back within seconds of
// the promotion (rescued, or released by their daemon), not after the default 30 s.
DaemonYaml failover_daemon_yaml(const ReplicaPair& pair, const std::string& name) {
  const std::string effect_sql =
      "INSERT INTO failover.effects (job_id, daemon) VALUES ($2, " + sql_literal(name) + ")";
  DaemonYaml yaml("failover");
  yaml.set("database", "{url: " + yaml_quote(pair.failover_url()) + ", schema: failover}")
      .set("worker", "{concurrency: 8}")
      .set("lease", "{duration: 2s}")
      .set("metrics", "{listen: \"127.0.0.1:0\"}")
      .handler("effect", "{sql: " + yaml_quote(effect_sql) + "}");
  return yaml;
}

TEST(FailoverE2E, SyncStandbyPromotedMidRunEveryJobDoneEveryEffectOnceNoRestart) {
  ReplicaPair pair;
  ClusterSession primary_db(pair.primary().url(), "failover");
  primary_db.create_schema();
  primary_db.exec(
      "CREATE TABLE failover.effects (job_id bigint NOT NULL, daemon text NOT NULL, "
      "at timestamptz NOT NULL DEFAULT clock_timestamp())");
  primary_db.exec("INSERT INTO {jobs} (type) SELECT 'effect' FROM generate_series(1, " +
                  std::to_string(kFailoverJobs) + ")");

  DaemonProcess daemon_a(failover_daemon_yaml(pair, "a").text());
  DaemonProcess daemon_b(failover_daemon_yaml(pair, "b").text());
  ASSERT_TRUE(daemon_a.wait_ready(30s)) << daemon_a.log();
  ASSERT_TRUE(daemon_b.wait_ready(30s)) << daemon_b.log();
  const int port_a = daemon_a.metrics_port();
  const int port_b = daemon_b.metrics_port();
  ASSERT_GT(port_a, 0);
  ASSERT_GT(port_b, 0);

  ASSERT_TRUE(
      wait_until([&] { return primary_db.count("status = 'done'") >= kFailoverJobs / 4; }, 60s))
      << primary_db.summary();
  const std::int64_t running_before = primary_db.count("status = 'running'");
  const std::int64_t done_before = primary_db.count("status = 'done'");
  const auto stopped_at = std::chrono::steady_clock::now();
  pair.stop_primary();

  // Both daemons notice the loss (their claims fail) and say so, in the log and on /readyz.
  EXPECT_TRUE(daemon_a.wait_for_log("claim failed", 30s)) << daemon_a.log();
  EXPECT_TRUE(daemon_b.wait_for_log("claim failed", 30s)) << daemon_b.log();
  EXPECT_TRUE(wait_until([&] { return http_get(port_a, "/readyz").status == 503; }, 30s))
      << "daemon a's /readyz while no server takes writes: " << http_get(port_a, "/readyz").body;
  EXPECT_TRUE(wait_until([&] { return http_get(port_b, "/readyz").status == 503; }, 30s))
      << "daemon b's /readyz while no server takes writes: " << http_get(port_b, "/readyz").body;

  // The outage's length is the point: longer than the lease, as an HA manager's detection
  // takes seconds, so the jobs the old primary handed out come back through the rescuer or
  // their daemon's release, and the daemons' reconnect backoff has grown.
  std::this_thread::sleep_until(stopped_at + kFailoverOutage);
  ClusterSession db(pair.standby_url(), "failover");
  // The server's clock, which the effects' timestamps also read.
  const std::string promoted_at = sql_literal(db.query("SELECT clock_timestamp()::text"));
  const double down_seconds = seconds_since(stopped_at);
  const auto promoting_at = std::chrono::steady_clock::now();
  pair.promote_standby();
  const double promote_seconds = seconds_since(promoting_at);

  // The synchronous standby has every commit a client saw, and the stop came mid-run.
  const std::int64_t done_at_promotion = db.count("status = 'done'");
  EXPECT_GE(done_at_promotion, done_before) << "committed completions were lost in the failover";
  ASSERT_LT(done_at_promotion, kFailoverJobs) << "the primary stopped after the run, not in it";

  const std::string after_promotion = "FROM failover.effects WHERE at > " + promoted_at;
  // A daemon's next attempt comes within its reconnect backoff (at most 12 s). The first
  // one back may finish every job before the other returns: each one's recovery is its own
  // "claims work again" below.
  ASSERT_TRUE(wait_until(
      [&] { return db.query("SELECT count(DISTINCT daemon) " + after_promotion) != "0"; }, 30s))
      << "daemons that completed jobs after the promotion: "
      << db.query("SELECT string_agg(DISTINCT daemon, ', ') " + after_promotion) << "; "
      << db.summary() << "\n"
      << pair.standby_log_tail();
  const double recovered_seconds =
      std::stod(db.query("SELECT extract(epoch FROM min(first_at) - " + promoted_at +
                         "::timestamptz) FROM (SELECT min(at) AS first_at " + after_promotion +
                         " GROUP BY daemon) firsts"));
  // Every job done: none dead (an attempt lost to the outage is retried), none left running.
  ASSERT_TRUE(wait_until([&] { return db.count("status = 'done'") == kFailoverJobs; }, 60s))
      << db.summary() << "\n"
      << pair.standby_log_tail();
  const double finished_seconds = seconds_since(promoting_at);
  EXPECT_TRUE(daemon_a.wait_for_log("claims work again", 30s)) << daemon_a.log();
  EXPECT_TRUE(daemon_b.wait_for_log("claims work again", 30s)) << daemon_b.log();
  EXPECT_TRUE(wait_until([&] { return http_get(port_a, "/readyz").status == 200; }, 15s))
      << http_get(port_a, "/readyz").body;
  EXPECT_TRUE(wait_until([&] { return http_get(port_b, "/readyz").status == 200; }, 15s))
      << http_get(port_b, "/readyz").body;
  std::printf(
      "[ failover ] primary stopped (-m immediate) with %lld done and %lld running; standby "
      "promoted %.2f s later (pg_ctl promote took %.2f s); jobs completed again %.2f s after "
      "the promotion began; all %d done %.2f s after it\n",
      static_cast<long long>(done_before), static_cast<long long>(running_before), down_seconds,
      promote_seconds, recovered_seconds, kFailoverJobs, finished_seconds);

  EXPECT_EQ(db.query("SELECT count(*) FROM failover.effects"), std::to_string(kFailoverJobs))
      << "jobs run twice (id: runs): "
      << db.query(
             "SELECT string_agg(job_id || ': ' || n, ', ') FROM (SELECT job_id, count(*) n "
             "FROM failover.effects GROUP BY job_id HAVING count(*) > 1 LIMIT 20) twice");
  EXPECT_EQ(db.query("SELECT count(DISTINCT job_id) FROM failover.effects"),
            std::to_string(kFailoverJobs));
  EXPECT_EQ(db.count("NOT EXISTS (SELECT 1 FROM failover.effects e "
                     "WHERE e.job_id = {jobs}.id)"),
            0)
      << "done jobs without their effect";
  for (DaemonProcess* daemon : {&daemon_a, &daemon_b}) {
    EXPECT_TRUE(daemon->running()) << "a daemon exited instead of reconnecting";
    EXPECT_EQ(count_occurrences(daemon->log(), "pgjobd ready"), 1) << "the engine restarted";
    daemon->signal(SIGTERM);
  }
  EXPECT_EQ(daemon_a.wait_for_exit(20s), 0);
  EXPECT_EQ(daemon_b.wait_for_exit(20s), 0);
}

}  // namespace
}  // namespace pgjobd::testing
