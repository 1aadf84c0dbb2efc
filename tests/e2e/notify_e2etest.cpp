// End-to-end: an INSERT wakes an idle daemon through NOTIFY long before its next poll.

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "db/connection.hpp"
#include "support/daemon_process.hpp"
#include "support/test_database.hpp"

namespace pgjobd::testing {
namespace {

std::int64_t unix_nanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

TEST(NotifyE2E, InsertWakesAnIdleDaemonWithinMilliseconds) {
  constexpr int kTrials = 10;
  TestSchema schema;
  TempDir dir;
  DaemonYaml yaml(schema.name());
  // Polling every 5 s: only the NOTIFY can explain ten pickups within a second each.
  yaml.set("poll", "{min_interval: 5s, max_interval: 5s, listen_notify: true}")
      .shell_handler("stamp", "date +%s%N > " + shell_quote(dir.path()) +
                                  "/$PGJOBD_JOB_ID.tmp && mv " + shell_quote(dir.path()) +
                                  "/$PGJOBD_JOB_ID.tmp " + shell_quote(dir.path()) +
                                  "/$PGJOBD_JOB_ID");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();

  // A warm-up job: once it is done, the start-up claims (the first poll and the listener's
  // catch-up wake) have happened, so they cannot pick up a measured job.
  const std::string warm_up =
      schema.query("INSERT INTO {jobs} (type) VALUES ('stamp') RETURNING id");
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == 1; }, 15s))
      << daemon.log();

  std::vector<double> latencies_ms;
  for (int trial = 0; trial < kTrials; ++trial) {
    const std::string id = schema.query("INSERT INTO {jobs} (type) VALUES ('stamp') RETURNING id");
    const std::int64_t committed = unix_nanos();  // autocommit: the INSERT has committed
    const std::string stamp_file = dir.file(id);
    ASSERT_TRUE(wait_until([&] { return !read_text_file(stamp_file).empty(); }, 10s))
        << "job " << id << " did not run (trial " << trial << ")";
    const std::int64_t handler_started = std::stoll(read_text_file(stamp_file));
    latencies_ms.push_back(static_cast<double>(handler_started - committed) / 1e6);
    // Picked up by a poll, not a NOTIFY: no need to spend 5 s on each remaining trial.
    if (latencies_ms.back() >= 1000) break;
    ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == trial + 2; }, 10s));
  }
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_for_exit(10s), 0);

  ASSERT_FALSE(latencies_ms.empty());
  std::vector<double> sorted = latencies_ms;
  std::sort(sorted.begin(), sorted.end());
  const std::size_t n = sorted.size();
  const double median = n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  const double max = sorted.back();
  std::cout << "[ metric ] NOTIFY pickup latency (INSERT commit to handler start, " << n
            << " trials, poll interval 5s): median " << median << " ms, max " << max << " ms\n";
  RecordProperty("notify_latency_median_ms", std::to_string(median));
  RecordProperty("notify_latency_max_ms", std::to_string(max));
  EXPECT_EQ(latencies_ms.size(), static_cast<std::size_t>(kTrials));
  // The median says how fast a wake-up is; one trial may meet a loaded machine (a
  // sanitizer build beside other builds took 110 ms once, median 21 ms). Every trial still
  // has to beat the poll: a poll every 5 s would start a job within 1 s of its INSERT with
  // a chance of 1 in 5, all ten with one in ten million.
  EXPECT_LT(median, 100.0);
  for (std::size_t trial = 0; trial < latencies_ms.size(); ++trial) {
    EXPECT_LT(latencies_ms[trial], 1000.0) << "trial " << trial;
  }
}

// pgjobd_retry and pgjobd_retry_many make a job due now and wake the daemons as an INSERT
// does: with a 30 s poll, a retried job runs within a second (before, it waited for the
// next poll: 2.6 s in issue 45's run with the default poll).
TEST(NotifyE2E, RetryAndRetryManyWakeAnIdleDaemonWithinASecond) {
  TestSchema schema;
  DaemonYaml yaml(schema.name());
  yaml.set("poll", "{min_interval: 30s, max_interval: 30s, listen_notify: true}")
      .handler("stamp", "{builtin: noop}");
  // Dead before the daemon starts, so no start-up claim or INSERT wake-up is pending.
  const std::string dead =
      "INSERT INTO {jobs} (type, status, attempts, max_attempts, finished_at) "
      "VALUES ('stamp', 'dead', 1, 1, now()) RETURNING id";
  const std::string first = schema.query(dead);
  const std::string second = schema.query(dead);
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  schema.query("INSERT INTO {jobs} (type) VALUES ('stamp')");  // the warm-up, as above
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == 1; }, 15s))
      << daemon.log();

  const std::string s = schema.qualified("pgjobd_retry");
  schema.query("SELECT " + s + "(" + first + ")");
  EXPECT_TRUE(wait_until([&] { return schema.count("status = 'done'") == 2; }, 1s))
      << "pgjobd_retry woke no daemon";
  schema.query("SELECT count(*) FROM " + s + "_many(ARRAY[" + second + "]::bigint[])");
  EXPECT_TRUE(wait_until([&] { return schema.count("status = 'done'") == 3; }, 1s))
      << "pgjobd_retry_many woke no daemon";
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_for_exit(10s), 0);
}

// Any database user can NOTIFY the daemons' channel (no right is needed; issue 42): here
// 1,000 NOTIFYs, each in its own transaction, over two seconds or more. A NOTIFY whose claim
// finds nothing spaces the next claim (up to 20 ms), so the flood costs a bounded rate of
// claims (one per NOTIFY before: about 1,000 here), and a job inserted after it still
// starts at once.
TEST(NotifyE2E, AFloodOfNotifiesCostsABoundedRateOfClaims) {
  TestSchema schema;
  DaemonYaml yaml(schema.name());
  yaml.set("poll", "{min_interval: 30s, max_interval: 30s, listen_notify: true}")
      .set("metrics", "{listen: \"127.0.0.1:0\"}")
      .handler("stamp", "{builtin: noop}");
  DaemonProcess daemon(yaml.text());
  const int port = daemon.metrics_port();
  ASSERT_NE(port, 0) << daemon.log();
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  schema.query("INSERT INTO {jobs} (type) VALUES ('stamp')");  // the warm-up, as above
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == 1; }, 15s))
      << daemon.log();
  const auto claims = [&] {
    return metric_value(http_get(port, "/metrics").body, "pgjobd_claim_duration_seconds_count")
        .value_or(-1);
  };
  const double before = claims();
  ASSERT_GE(before, 1);

  auto flooder = open_connection(schema.config().database, "flood");
  pqxx::nontransaction flood(*flooder);
  const auto began = std::chrono::steady_clock::now();
  flood.exec("DO $$ BEGIN FOR i IN 1..1000 LOOP PERFORM pg_notify('pgjobd_jobs', " +
             flood.quote(schema.name()) + "); COMMIT; PERFORM pg_sleep(0.002); END LOOP; END $$");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  const double made = claims() - before;  // during the flood (a spaced claim may follow)
  std::cout << "[ metric ] a flood of 1,000 NOTIFYs over " << seconds << " s cost " << made
            << " claims\n";
  EXPECT_LE(made, 100 * seconds + 50) << daemon.log();
  EXPECT_GE(made, 5) << "NOTIFYs still set claims off";

  schema.query("INSERT INTO {jobs} (type) VALUES ('stamp')");
  EXPECT_TRUE(wait_until([&] { return schema.count("status = 'done'") == 2; }, 2s)) << daemon.log();
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_for_exit(10s), 0);
}

}  // namespace
}  // namespace pgjobd::testing
