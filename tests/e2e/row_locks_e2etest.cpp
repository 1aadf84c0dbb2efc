// An application session holds the row lock of one running job (an uncommitted UPDATE, a
// SELECT ... FOR UPDATE) for longer than the lease, while the daemon runs 2,000 short jobs
// that record their side effects. That one row must affect at most its own job (README,
// "What an application can and cannot break"): the other completions keep flowing, no job
// runs twice, and the held job ends done (or back in the queue and then done) once the
// lock is released. (A hold longer than the lease lets the held job's own lease run out:
// then the rescuer may take it once the lock is gone, before its completion is retried,
// and it runs again: README, "What an application can and cannot break".)

#include <gtest/gtest.h>

#include <chrono>
#include <pqxx/pqxx>
#include <string>
#include <thread>

#include "db/connection.hpp"
#include "db/sql_text.hpp"
#include "support/daemon_process.hpp"
#include "support/private_cluster.hpp"
#include "support/test_database.hpp"

namespace pgjobd::testing {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kRowLockJobs = 2000;
constexpr auto kRowLockLease = std::chrono::seconds(3);
// Longer than the lease: a completion or a heartbeat that waited for the row would let
// leases run out.
constexpr auto kRowLockHold = kRowLockLease + std::chrono::seconds(3);

// `lock_sql` ({id}: the held job's id) run in an open transaction of an application
// session while the job runs and its handler finishes, and kept for kRowLockHold at least.
void hold_one_running_row(const std::string& lock_sql) {
  TestSchema schema;
  TempDir dir;
  const std::string effects = dir.file("effects");
  DaemonYaml yaml(schema.name());
  yaml.set("worker", "{concurrency: 16}")
      .set("lease", "{duration: 3s}")
      .set("metrics", "{listen: \"127.0.0.1:0\"}")
      .shell_handler("work", "echo $PGJOBD_JOB_ID >> " + shell_quote(effects))
      // Runs long enough for the application to take its row before it finishes.
      .shell_handler("slow", "echo $PGJOBD_JOB_ID >> " + shell_quote(effects) + "; sleep 1");
  DaemonProcess daemon(yaml.text());
  const int port = daemon.metrics_port();
  ASSERT_NE(port, 0) << daemon.log();
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();

  const std::string held = schema.query("INSERT INTO {jobs} (type) VALUES ('slow') RETURNING id");
  ASSERT_TRUE(wait_until([&] { return id_counts(effects).contains(std::stoll(held)); },
                         std::chrono::seconds(20)))
      << table_summary(schema);
  ASSERT_EQ(schema.count("id = " + held + " AND status = 'running'"), 1);

  auto session = open_connection(schema.config().database, "application");
  pqxx::work hold(*session);
  std::string sql = lock_sql;
  sql.replace(sql.find("{id}"), 4, held);
  sql.replace(sql.find("{jobs}"), 6, quote_identifier(schema.name()) + ".jobs");
  hold.exec(sql);
  const auto held_since = Clock::now();

  schema.exec("INSERT INTO {jobs} (type) SELECT 'work' FROM generate_series(1, " +
              std::to_string(kRowLockJobs) + ")");
  // Completions keep flowing: every other job is done while the row is still held.
  EXPECT_TRUE(
      wait_until([&] { return schema.count("type = 'work' AND status = 'done'") == kRowLockJobs; },
                 std::chrono::seconds(40)))
      << table_summary(schema);
  EXPECT_TRUE(daemon.wait_for_log(
      "job " + held + ": its row is locked by another session; its completion is retried",
      std::chrono::seconds(10)))
      << daemon.log();
  const auto metrics = http_get(port, "/metrics").body;
  EXPECT_EQ(metric_value(metrics, "pgjobd_completions_held_total"), 1.0) << metrics;
  EXPECT_EQ(metric_value(metrics, "pgjobd_completions_waiting_for_row_lock"), 1.0) << metrics;
  // Hold past the lease.
  std::this_thread::sleep_until(held_since + kRowLockHold);
  EXPECT_EQ(schema.count("type = 'work' AND status = 'done'"), kRowLockJobs);
  hold.commit();

  // The held job ends done once the lock is gone: its completion written, or, when the
  // rescuer took it first (its lease could not be renewed while the row was held), back in
  // the queue and done after running again.
  EXPECT_TRUE(wait_until([&] { return schema.count("status = 'done'") == kRowLockJobs + 1; },
                         std::chrono::seconds(30)))
      << table_summary(schema);
  // No other job ran twice, and the held one once per attempt; every done job's side effect
  // is there.
  const auto runs = id_counts(effects);
  int twice = 0;
  for (const auto& [id, count] : runs) twice += count > 1 && id != std::stoll(held) ? 1 : 0;
  EXPECT_EQ(twice, 0);
  EXPECT_EQ(runs.size(), static_cast<std::size_t>(kRowLockJobs + 1));
  const int attempts = std::stoi(schema.query("SELECT attempts FROM {jobs} WHERE id = " + held));
  EXPECT_EQ(runs.at(std::stoll(held)), attempts);
  // Reported once for the held job, and for no other. (Another job's completion may meet a
  // row the daemon's own heartbeat holds for the milliseconds of its write: set aside, and
  // written at the retry 250 ms later without a report. Counted as held, 42 of them made
  // this test fail on a loaded machine.)
  EXPECT_EQ(
      count_occurrences(daemon.log(), "job " + held + ": its row is locked by another session"), 1)
      << daemon.log();
  EXPECT_EQ(count_occurrences(daemon.log(), "its row is locked by another session"), 1)
      << daemon.log();
  // The gauge is set once the completer is back from the write that made the row done.
  std::string after;
  EXPECT_TRUE(wait_until(
      [&] {
        after = http_get(port, "/metrics").body;
        return metric_value(after, "pgjobd_completions_waiting_for_row_lock") == 0.0;
      },
      std::chrono::seconds(10)))
      << after;
  // Fenced off at most once: the held job's own completion, if the rescuer took it first.
  EXPECT_EQ(metric_value(after, "pgjobd_stale_writes_total"), attempts - 1.0);
  stop_daemon(daemon);
}

TEST(RowLocksE2E, AnUncommittedUpdateOfOneRunningJobHoldsUpNoOtherJob) {
  hold_one_running_row("UPDATE {jobs} SET priority = priority WHERE id = {id}");
}

TEST(RowLocksE2E, ASelectForUpdateOfOneRunningJobHoldsUpNoOtherJob) {
  hold_one_running_row("SELECT 1 FROM {jobs} WHERE id = {id} FOR UPDATE");
}

}  // namespace
}  // namespace pgjobd::testing
