// Cancelling a running job from SQL (pgjobd_cancel, README "SQL interface"): the daemon
// running it stops its exec handler's whole process group, by NOTIFY at once or, with
// LISTEN off, at its next heartbeat; the job ends cancelled with the reason and never runs
// again. And a job whose daemon was SIGKILLed ends cancelled when the rescuer finds it.

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "db/sql_text.hpp"
#include "support/daemon_process.hpp"
#include "support/test_database.hpp"
#include "support/wait_until.hpp"

namespace pgjobd::testing {
namespace {

using Clock = std::chrono::steady_clock;

// As an operator would: psql, in a session of its own.
void psql_cancel(TestSchema& schema, const std::string& id, const std::string& reason) {
  ASSERT_EQ(reason.find('\''), std::string::npos);  // written as a plain literal below
  const std::string sql =
      "SELECT " + quote_identifier(schema.name()) + ".pgjobd_cancel(" + id + ", '" + reason + "')";
  const std::string command = "psql -q -X -t -A -v ON_ERROR_STOP=1 " +
                              shell_quote(test_database_url()) + " -c " + shell_quote(sql) +
                              " > /dev/null";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
}

// A `sleep 60` job whose process group also holds a child that ignores SIGTERM (only the
// group's SIGKILL after kill_grace ends it). Its pids are appended to `pids`.
void add_sleeper(DaemonYaml& yaml, const std::string& pids) {
  yaml.shell_handler("sleeper",
                     "echo $$ >> " + shell_quote(pids) +
                         "; (trap '' TERM; exec sleep 61) & echo $! >> " + shell_quote(pids) +
                         "; exec sleep 60",
                     "kill_grace: 300ms");
  yaml.handler("ping", "{builtin: noop}");
}

struct Cancelled {
  std::chrono::milliseconds took{0};
  std::vector<pid_t> pids;
};

// Starts a sleeper, cancels it once both of its processes run, and measures how long until
// the row is cancelled.
Cancelled cancel_a_running_sleeper(TestSchema& schema, const std::string& pids,
                                   const std::string& reason) {
  const std::string id =
      schema.query("INSERT INTO {jobs} (type, max_attempts) VALUES ('sleeper', 5) RETURNING id");
  EXPECT_TRUE(wait_until([&] { return read_lines(pids).size() == 2; }, 15s))
      << table_summary(schema);
  EXPECT_EQ(schema.query("SELECT status FROM {jobs} WHERE id = " + id), "running");
  Cancelled result;
  for (const auto& line : read_lines(pids))
    result.pids.push_back(static_cast<pid_t>(std::stol(line)));
  const auto asked = Clock::now();
  psql_cancel(schema, id, reason);
  EXPECT_TRUE(wait_until(
      [&] { return schema.count("id = " + id + " AND status = 'cancelled'") == 1; }, 30s))
      << table_summary(schema);
  result.took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - asked);
  return result;
}

// Cancelled, with the reason, after one attempt; and it does not run again: a job inserted
// after it runs to done while it stays as it is.
void expect_cancelled_for_good(TestSchema& schema, const std::vector<pid_t>& pids,
                               const std::string& reason) {
  for (const pid_t pid : pids) {
    EXPECT_TRUE(wait_until([&] { return !process_alive(pid); }, 5s))
        << "process " << pid << " of the cancelled job survived";
    if (process_alive(pid)) ::kill(pid, SIGKILL);
  }
  EXPECT_EQ(schema.query("SELECT attempts || ' ' || last_error || ' ' || "
                         "(attempt_log -> -1 ->> 'outcome') FROM {jobs} WHERE type = 'sleeper'"),
            "1 cancelled: " + reason + " cancelled");
  schema.exec("INSERT INTO {jobs} (type) VALUES ('ping')");
  ASSERT_TRUE(
      wait_until([&] { return schema.count("type = 'ping' AND status = 'done'") == 1; }, 15s));
  EXPECT_EQ(schema.query("SELECT status || ' ' || attempts FROM {jobs} WHERE type = 'sleeper'"),
            "cancelled 1");
}

// The NOTIFY reaches the daemon at once: with a 60 s lease its next heartbeat is 20 s
// away, so only the notification can stop the job within the 2 s the issue asks for.
TEST(CancelE2E, RunningExecJobIsStoppedWithinTwoSecondsByTheNotify) {
  TestSchema schema;
  TempDir dir;
  const std::string pids = dir.file("pids");
  DaemonYaml yaml(schema.name());
  yaml.set("lease", "{duration: 60s}");
  add_sleeper(yaml, pids);
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();

  const Cancelled cancelled = cancel_a_running_sleeper(schema, pids, "operator said so");
  EXPECT_LT(cancelled.took, 2000ms) << daemon.log();
  expect_cancelled_for_good(schema, cancelled.pids, "operator said so");
  EXPECT_TRUE(daemon.wait_for_log("cancel requested (pgjobd_cancel); stopping its handler"))
      << daemon.log();
  stop_daemon(daemon);
}

// With LISTEN off (or a notification lost) the heartbeat's answer carries the request: a
// 3 s lease heartbeats every second, so the job stops within about a second, plus the
// kill_grace for the child that ignores SIGTERM.
TEST(CancelE2E, WithListenOffTheNextHeartbeatStopsIt) {
  TestSchema schema;
  TempDir dir;
  const std::string pids = dir.file("pids");
  DaemonYaml yaml(schema.name());
  yaml.set("poll", "{min_interval: 10ms, max_interval: 100ms, listen_notify: false}");
  yaml.set("lease", "{duration: 3s}");
  add_sleeper(yaml, pids);
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();

  const Cancelled cancelled = cancel_a_running_sleeper(schema, pids, "no listener");
  EXPECT_LT(cancelled.took, 2500ms) << daemon.log();  // heartbeat 1 s + grace 0.3 s + writes
  expect_cancelled_for_good(schema, cancelled.pids, "no listener");
  stop_daemon(daemon);
}

// The daemon running the job is SIGKILLed: nobody stops the handler or writes the end. The
// other daemon's rescuer finds the expired lease with the cancel request and ends the job
// cancelled instead of running it again.
TEST(CancelE2E, JobOfASigkilledDaemonEndsCancelledWhenRescued) {
  TestSchema schema;
  TempDir dir;
  const std::string pids = dir.file("pids");
  DaemonYaml yaml(schema.name());
  yaml.set("lease", "{duration: 2s}");
  add_sleeper(yaml, pids);
  auto first = std::make_unique<DaemonProcess>(yaml.text());
  ASSERT_TRUE(first->wait_ready()) << first->log();
  const std::string id = schema.query("INSERT INTO {jobs} (type) VALUES ('sleeper') RETURNING id");
  ASSERT_TRUE(wait_until([&] { return read_lines(pids).size() == 2; }, 15s));
  first->signal(SIGKILL);
  first->wait_for_exit(10s);
  // Its handler's processes outlive it (their own process group): not the point here.
  for (const auto& line : read_lines(pids)) ::kill(static_cast<pid_t>(std::stol(line)), SIGKILL);

  psql_cancel(schema, id, "after the crash");
  EXPECT_EQ(schema.query("SELECT status FROM {jobs} WHERE id = " + id), "running");
  DaemonProcess second(yaml.text());
  ASSERT_TRUE(second.wait_ready()) << second.log();
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'cancelled'") == 1; }, 30s))
      << table_summary(schema) << second.log();
  EXPECT_EQ(schema.query("SELECT attempts || ' ' || last_error FROM {jobs} WHERE id = " + id),
            "1 cancelled: after the crash (its daemon stopped: lease expired)");
  EXPECT_EQ(read_lines(pids).size(), 2u);  // the second daemon never started it
  stop_daemon(second);
}

}  // namespace
}  // namespace pgjobd::testing
