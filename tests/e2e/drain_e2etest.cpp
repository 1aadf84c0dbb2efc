// End-to-end: SIGTERM/SIGINT drains of the real pgjobd binary, the second signal, the shutdown
// timeout releasing jobs and killing their handlers, and rescue after a SIGKILL.

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "support/daemon_process.hpp"
#include "support/test_database.hpp"

namespace pgjobd::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::set<std::string> distinct(const std::vector<std::string>& lines) {
  return {lines.begin(), lines.end()};
}

std::set<std::string> id_texts_where(TestSchema& schema, const std::string& where) {
  return distinct(schema.column("SELECT id::text FROM {jobs} WHERE " + where));
}

long millis_since(Clock::time_point start) {
  return static_cast<long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count());
}

// Handler pids written by `echo $$ >> pids; exec sleep N`: none may outlive the daemon.
void expect_no_handler_left(const std::string& pids_file) {
  for (const std::string& line : read_lines(pids_file)) {
    const pid_t pid = static_cast<pid_t>(std::stol(line));
    EXPECT_FALSE(process_alive(pid, "sleep")) << "handler process " << pid << " is still running";
    if (process_alive(pid, "sleep")) ::kill(-pid, SIGKILL);  // do not leak it past the test
  }
}

TEST(DrainE2E, SigtermFinishesInFlightJobsAndRestartRunsTheRestOnce) {
  constexpr int kJobs = 200;
  TestSchema schema;
  TempDir dir;
  const std::string starts = dir.file("starts");
  const std::string ends = dir.file("ends");
  DaemonYaml yaml(schema.name());
  yaml.set("worker", "{concurrency: 8}")
      .set("shutdown", "{timeout: 10s}")
      .shell_handler("work", "echo $PGJOBD_JOB_ID >> " + shell_quote(starts) +
                                 "; sleep 0.2; echo $PGJOBD_JOB_ID >> " + shell_quote(ends));
  schema.insert_jobs("work", kJobs);
  std::set<std::string> started_at_signal;

  {
    DaemonProcess daemon(yaml.text());
    ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
    ASSERT_TRUE(wait_until(
        [&] {
          return schema.count("status = 'done'") >= 16 && schema.count("status = 'running'") == 8;
        },
        30s))
        << table_summary(schema);
    // The rows say 8 running, but a claimed job may not have reached its handler yet (a
    // loaded machine showed 6 started of 8): the jobs whose handler had started are the
    // ones the drain must finish.
    started_at_signal = distinct(read_lines(starts));
    const auto signalled = Clock::now();
    daemon.signal(SIGTERM);
    ASSERT_EQ(daemon.wait_for_exit(20s), 0) << "no clean exit after SIGTERM";
    // Only the in-flight 0.2 s jobs are waited for, far below shutdown.timeout.
    EXPECT_LT(millis_since(signalled), 5000);
    EXPECT_NE(daemon.log().find("drained"), std::string::npos);
  }

  EXPECT_EQ(schema.count(), kJobs);
  EXPECT_EQ(schema.count("status = 'running'"), 0) << table_summary(schema);
  EXPECT_EQ(schema.count("status NOT IN ('done', 'pending')"), 0) << table_summary(schema);
  EXPECT_EQ(schema.count("status = 'done' AND attempts <> 1"), 0);
  EXPECT_EQ(schema.count("status = 'pending' AND attempts <> 0"), 0)
      << "a job left pending by the drain counts an attempt";
  EXPECT_EQ(schema.count("locked_until IS NOT NULL"), 0);
  // A done job keeps who ran it; a released one has no owner.
  EXPECT_EQ(schema.count("status = 'pending' AND locked_by IS NOT NULL"), 0);
  const std::int64_t done_after_drain = schema.count("status = 'done'");
  EXPECT_GT(done_after_drain, 16) << "the jobs running at SIGTERM were not finished";
  EXPECT_GT(schema.count("status = 'pending'"), 0) << "the daemon kept claiming while draining";
  // Every job that started finished during the drain and is done; nothing else started.
  const std::set<std::string> done_ids = id_texts_where(schema, "status = 'done'");
  EXPECT_GT(started_at_signal.size(), 16u);
  for (const std::string& id : started_at_signal) {
    EXPECT_TRUE(done_ids.contains(id)) << "job " << id << " had started at SIGTERM";
  }
  EXPECT_EQ(distinct(read_lines(starts)), done_ids);
  EXPECT_EQ(distinct(read_lines(ends)), done_ids);
  EXPECT_EQ(read_lines(starts).size(), done_ids.size());

  {
    DaemonProcess daemon(yaml.text());
    ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
    ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == kJobs; }, 60s))
        << table_summary(schema);
    daemon.signal(SIGTERM);
    EXPECT_EQ(daemon.wait_for_exit(20s), 0);
  }
  EXPECT_EQ(schema.count("status = 'done' AND attempts = 1"), kJobs);
  const std::vector<std::string> start_lines = read_lines(starts);
  EXPECT_EQ(start_lines.size(), static_cast<std::size_t>(kJobs)) << "some job ran twice";
  EXPECT_EQ(distinct(start_lines), id_texts_where(schema, "true"));
  EXPECT_EQ(read_lines(ends).size(), static_cast<std::size_t>(kJobs));
}

TEST(DrainE2E, ShutdownTimeoutReleasesJobsAndStopsTheirHandlers) {
  TestSchema schema;
  TempDir dir;
  const std::string pids = dir.file("pids");
  DaemonYaml yaml(schema.name());
  yaml.set("worker", "{concurrency: 4}")
      .set("shutdown", "{timeout: 1s}")
      .shell_handler("sleepy", "echo $$ >> " + shell_quote(pids) + "; exec sleep 30");
  schema.insert_jobs("sleepy", 6);
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  ASSERT_TRUE(wait_until(
      [&] { return schema.count("status = 'running'") == 4 && read_lines(pids).size() == 4; }, 15s))
      << table_summary(schema);

  const auto signalled = Clock::now();
  daemon.signal(SIGTERM);
  ASSERT_EQ(daemon.wait_for_exit(25s), 0) << "no clean exit after SIGTERM";
  const long drain_ms = millis_since(signalled);
  EXPECT_GE(drain_ms, 900) << "the drain did not wait for shutdown.timeout";
  EXPECT_LT(drain_ms, 6000) << "the drain took far longer than shutdown.timeout (1s)";
  EXPECT_NE(daemon.log().find("after the shutdown timeout"), std::string::npos) << daemon.log();

  EXPECT_EQ(schema.count("status = 'pending'"), 6) << table_summary(schema);
  EXPECT_EQ(schema.count("attempts = 0"), 6) << "released jobs must not count the attempt";
  EXPECT_EQ(schema.count("locked_by IS NULL AND locked_until IS NULL"), 6);
  EXPECT_EQ(schema.count("errors = '[]' AND last_error IS NULL"), 6)
      << "a release is not a failure";
  EXPECT_EQ(read_lines(pids).size(), 4u);
  expect_no_handler_left(pids);
}

TEST(DrainE2E, SecondSignalEndsTheDrainWaitAtOnce) {
  TestSchema schema;
  TempDir dir;
  const std::string pids = dir.file("pids");
  DaemonYaml yaml(schema.name());
  yaml.set("worker", "{concurrency: 2}")
      .set("shutdown", "{timeout: 60s}")
      .shell_handler("sleepy", "echo $$ >> " + shell_quote(pids) + "; exec sleep 30");
  schema.insert_jobs("sleepy", 2);
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  ASSERT_TRUE(wait_until(
      [&] { return schema.count("status = 'running'") == 2 && read_lines(pids).size() == 2; }, 15s))
      << table_summary(schema);

  daemon.signal(SIGTERM);
  // Two signals sent back to back could merge into one pending signal: wait until the first
  // was taken.
  ASSERT_TRUE(daemon.wait_for_log("SIGTERM received: draining")) << daemon.log();
  // A negative check needs a window: the first signal alone must not end the 60 s wait.
  EXPECT_FALSE(daemon.wait_for_exit(500ms).has_value()) << "exited without waiting for its jobs";
  EXPECT_EQ(schema.count("status = 'running'"), 2);

  const auto second = Clock::now();
  daemon.signal(SIGTERM);
  ASSERT_EQ(daemon.wait_for_exit(20s), 0) << "no clean exit after the second SIGTERM";
  EXPECT_LT(millis_since(second), 4000) << "the second signal did not cut the drain short";
  EXPECT_NE(daemon.log().find("second signal"), std::string::npos) << daemon.log();

  EXPECT_EQ(schema.count("status = 'pending' AND attempts = 0 AND locked_by IS NULL"), 2)
      << table_summary(schema);
  expect_no_handler_left(pids);
}

TEST(DrainE2E, HandlerIgnoringSigtermIsKilledAfterKillGrace) {
  TestSchema schema;
  TempDir dir;
  const std::string pids = dir.file("pids");
  DaemonYaml yaml(schema.name());
  yaml.set("shutdown", "{timeout: 60s}")
      .shell_handler("stubborn",
                     "trap '' TERM; echo $$ >> " + shell_quote(pids) + "; sleep 30; sleep 30",
                     "kill_grace: 300ms");
  schema.insert_jobs("stubborn", 1);
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  ASSERT_TRUE(wait_until([&] { return read_lines(pids).size() == 1; }, 15s));
  const pid_t handler = static_cast<pid_t>(std::stol(read_lines(pids)[0]));

  daemon.signal(SIGTERM);
  ASSERT_TRUE(daemon.wait_for_log("SIGTERM received: draining")) << daemon.log();
  const auto second = Clock::now();
  daemon.signal(SIGTERM);
  ASSERT_EQ(daemon.wait_for_exit(20s), 0) << daemon.log();
  EXPECT_LT(millis_since(second), 4000);
  EXPECT_EQ(schema.count("status = 'pending' AND attempts = 0"), 1) << table_summary(schema);
  EXPECT_FALSE(process_alive(handler)) << "the handler that ignores SIGTERM survived";
  if (process_alive(handler)) ::kill(-handler, SIGKILL);
}

TEST(DrainE2E, SigintOnAnIdleDaemonExitsZero) {
  TestSchema schema;
  DaemonYaml yaml(schema.name());
  yaml.handler("ping", "{builtin: noop}");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  daemon.signal(SIGINT);
  EXPECT_EQ(daemon.wait_for_exit(10s), 0);
  EXPECT_NE(daemon.log().find("SIGINT received"), std::string::npos) << daemon.log();
}

TEST(DrainE2E, JobOfASigkilledDaemonIsRescuedAfterItsLease) {
  TestSchema schema;
  TempDir dir;
  const std::string pids = dir.file("pids");
  const std::string ran = dir.file("ran");
  const std::string id = schema.query("INSERT INTO {jobs} (type) VALUES ('task') RETURNING id");
  {
    DaemonYaml yaml(schema.name());
    yaml.set("lease", "{duration: 1s}")
        .shell_handler("task", "echo $$ >> " + shell_quote(pids) + "; exec sleep 30");
    DaemonProcess daemon(yaml.text());
    ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
    ASSERT_TRUE(wait_until([&] { return read_lines(pids).size() == 1; }, 15s))
        << table_summary(schema);
    daemon.signal(SIGKILL);
    EXPECT_EQ(daemon.wait_for_exit(10s), 128 + SIGKILL);
  }
  // The killed daemon's handler lives on in its own process group; end it.
  const pid_t orphan = static_cast<pid_t>(std::stol(read_lines(pids).at(0)));
  ::kill(-orphan, SIGKILL);
  EXPECT_EQ(schema.query("SELECT status FROM {jobs} WHERE id = " + id), "running");

  DaemonYaml yaml(schema.name());
  yaml.set("lease", "{duration: 1s}")
      .shell_handler("task", "echo $PGJOBD_JOB_ATTEMPT >> " + shell_quote(ran));
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == 1; }, 20s))
      << table_summary(schema) << "\n"
      << daemon.log();
  EXPECT_EQ(schema.query("SELECT attempts FROM {jobs} WHERE id = " + id), "2");
  EXPECT_EQ(read_lines(ran), std::vector<std::string>{"2"});
  const std::string history = schema.query("SELECT errors::text FROM {jobs} WHERE id = " + id);
  EXPECT_NE(history.find("rescued: lease expired"), std::string::npos) << history;
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_for_exit(10s), 0);
}

}  // namespace
}  // namespace pgjobd::testing
