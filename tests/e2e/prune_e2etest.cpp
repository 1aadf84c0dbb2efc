// Retention next to a backlog of millions of expired rows, with the real binary: a daemon
// that becomes leader works the backlog off in slices while long jobs keep their leases
// and a dead daemon's job is rescued within seconds.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "support/daemon_process.hpp"
#include "support/private_cluster.hpp"
#include "support/test_database.hpp"
#include "support/test_text.hpp"
#include "support/wait_until.hpp"

namespace pgjobd::testing {
namespace {

using PruneClock = std::chrono::steady_clock;

// 500,000 done rows finished two days ago (retention.done is 24 h), one per millisecond
// so their order on the index is their id order: retention deletes the oldest first, so the
// first id is gone as soon as it starts and the last id only when it is done. Unchanged,
// the prune deleted them in one go on the maintenance thread for longer than the 3 s
// lease: the long jobs were stopped and run again, and the ghost's job waited.
// (Half a million: beside the rest of the suite a million took more than 90 s to delete;
// bench/prune.sh measures 3 M.)
TEST(PruneE2E, ABacklogIsWorkedOffWhileLongJobsKeepTheirLeasesAndRescueGoesOn) {
  constexpr int kExpired = 500'000;
  constexpr int kLongJobs = 4;
  TestSchema schema;
  TempDir dir;
  const std::string effects = dir.file("effects");
  schema.exec(
      "INSERT INTO {jobs} (type, status, attempts, started_at, finished_at) "
      "SELECT 'old', 'done', 1, now() - interval '2 days', "
      "now() - interval '2 days' + g * interval '1 millisecond' "
      "FROM generate_series(1, " +
      std::to_string(kExpired) + ") g");
  const std::string first_expired = schema.query("SELECT min(id) FROM {jobs}");
  const std::string last_expired = schema.query("SELECT max(id) FROM {jobs}");
  const auto exists = [&](const std::string& id) {
    return schema.query("SELECT count(*) FROM {jobs} WHERE id = " + id) == "1";
  };
  schema.insert_jobs("long", kLongJobs);

  DaemonYaml yaml(schema.name());
  yaml.set("lease", "{duration: 3s}")
      .set("retention", "{done: 24h}")
      .set("metrics", "{listen: \"127.0.0.1:0\"}")
      // The side effect first, then 20 s of work: longer than six leases.
      .shell_handler("long", "echo $PGJOBD_JOB_ID >> " + shell_quote(effects) + "; exec sleep 20")
      .handler("rescued", "{builtin: noop}");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  const int port = daemon.metrics_port();
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'running'") == kLongJobs; }, 20s))
      << table_summary(schema);

  // The leader's first prune pass comes 5 s after its start.
  ASSERT_TRUE(wait_until([&] { return !exists(first_expired); }, 30s)) << daemon.log();
  const auto started = PruneClock::now();

  // A daemon that died with a job: its lease ran out a second ago.
  const std::string ghost = schema.query(
      "INSERT INTO {jobs} (type, status, attempts, locked_by, locked_until, started_at) "
      "VALUES ('rescued', 'running', 1, 'ghost:1:0', now() - interval '1 second', "
      "now() - interval '10 seconds') RETURNING id");
  const auto ghost_inserted = PruneClock::now();
  const bool rescued = wait_until(
      [&] {
        return schema.query(
                   "SELECT locked_by IS DISTINCT FROM 'ghost:1:0' FROM {jobs} "
                   "WHERE id = " +
                   ghost) == "t";
      },
      20s);
  EXPECT_TRUE(rescued) << "a dead daemon's job was not rescued within 20 s";
  const double rescue_s = seconds_since(ghost_inserted);
  // While the backlog was being worked off, not after it.
  const bool backlog_left = exists(last_expired);
  EXPECT_TRUE(backlog_left) << "the prune ended before the rescue: the test shows nothing";
  // One rescue interval (lease / 3 = 1 s) and a prune pass, with room for a loaded machine.
  EXPECT_LT(rescue_s, 5.0);

  ASSERT_TRUE(wait_until([&] { return !exists(last_expired); }, 180s)) << daemon.log();
  const double prune_s = seconds_since(started);
  EXPECT_EQ(schema.count("type = 'old'"), 0);
  std::printf(
      "[ prune ] %d expired rows deleted within %.1f s of the first slice (%.0f rows/s); a dead "
      "daemon's job (lease expired) rescued %.2f s after it was inserted\n",
      kExpired, prune_s, kExpired / prune_s, rescue_s);

  ASSERT_TRUE(wait_until(
      [&] { return schema.count("type = 'long' AND status = 'done'") == kLongJobs; }, 40s))
      << table_summary(schema) << daemon.log();
  ASSERT_TRUE(
      wait_until([&] { return schema.count("id = " + ghost + " AND status = 'done'") == 1; }, 20s))
      << table_summary(schema);
  // No long job was stopped, released or run again.
  EXPECT_EQ(schema.count("type = 'long' AND (attempts <> 1 OR attempt_log <> '[]')"), 0)
      << schema.query(
             "SELECT string_agg(id || ': ' || attempts || ' ' || attempt_log::text, "
             "'; ') FROM {jobs} WHERE type = 'long'");
  const auto runs = id_counts(effects);
  EXPECT_EQ(runs.size(), static_cast<std::size_t>(kLongJobs));
  for (const auto& [id, n] : runs) EXPECT_EQ(n, 1) << "job " << id << " ran " << n << " times";
  EXPECT_EQ(metric_value(http_get(port, "/metrics").body, "pgjobd_stale_writes_total"), 0.0);
  EXPECT_EQ(daemon.log().find("lost the lease"), std::string::npos) << daemon.log();
  stop_daemon(daemon);
}

}  // namespace
}  // namespace pgjobd::testing
