// End-to-end: exec jobs through the real pgjobd binary: exactly-once runs at volume, payload and
// environment, retries to dead, permanent exit codes, timeouts, and the scheduling policy of
// the daemon and of its programs.

#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/daemon_process.hpp"
#include "support/test_database.hpp"

namespace pgjobd::testing {
namespace {

using Clock = std::chrono::steady_clock;

TEST(ExecJobsE2E, ThousandJobsEachRunExactlyOnce) {
  constexpr int kJobs = 1000;
  TestSchema schema;
  TempDir dir;
  const std::string ran = dir.file("ran");
  DaemonYaml yaml(schema.name());
  yaml.set("worker", "{concurrency: 16}")
      .shell_handler("append", "echo $PGJOBD_JOB_ID >> " + shell_quote(ran));
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();

  const auto started = Clock::now();
  schema.insert_jobs("append", kJobs);
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == kJobs; }, 90s))
      << table_summary(schema);
  const auto elapsed_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
  std::cout << "[ metric ] " << kJobs << " exec jobs (concurrency 16) done in " << elapsed_ms
            << " ms (" << (kJobs * 1000.0 / static_cast<double>(std::max<long>(elapsed_ms, 1)))
            << " jobs/s)\n";
  RecordProperty("exec_1000_jobs_wall_ms", std::to_string(elapsed_ms));
  stop_daemon(daemon);

  EXPECT_EQ(schema.count(), kJobs);
  EXPECT_EQ(schema.count("status = 'done' AND attempts = 1 AND locked_until IS NULL"), kJobs)
      << table_summary(schema);

  const std::vector<std::string> lines = read_lines(ran);
  EXPECT_EQ(lines.size(), static_cast<std::size_t>(kJobs));
  std::set<std::int64_t> ids_run;
  for (const auto& line : lines) ids_run.insert(std::stoll(line));
  EXPECT_EQ(ids_run.size(), static_cast<std::size_t>(kJobs)) << "some job ran more than once";

  std::set<std::int64_t> ids_in_table;
  std::istringstream ids(schema.query("SELECT string_agg(id::text, ' ') FROM {jobs}"));
  for (std::int64_t id = 0; ids >> id;) ids_in_table.insert(id);
  EXPECT_EQ(ids_run, ids_in_table);
}

TEST(ExecJobsE2E, HandlerGetsPayloadOnStdinAndJobEnvironment) {
  TestSchema schema;
  TempDir dir;
  const std::string base = shell_quote(dir.path()) + "/$PGJOBD_JOB_ID";
  DaemonYaml yaml(schema.name());
  yaml.set("worker", "{concurrency: 2, queues: {default: {}, mail: {}}}")
      .shell_handler("envtype", "cat > " + base + ".payload; echo \"$PGJOBD_JOB_ID " +
                                    "$PGJOBD_JOB_TYPE $PGJOBD_JOB_QUEUE $PGJOBD_JOB_ATTEMPT\" > " +
                                    base + ".env");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();

  const std::string payload = R"({"to": "ann@example.com", "n": [1, 2.5, "three"], "ü": null})";
  const std::string id =
      schema.query("INSERT INTO {jobs} (type, queue, payload) VALUES ('envtype', 'mail', '" +
                   payload + "') RETURNING id");
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == 1; }, 15s))
      << table_summary(schema);
  stop_daemon(daemon);

  EXPECT_EQ(nlohmann::json::parse(read_text_file(dir.file(id + ".payload"))),
            nlohmann::json::parse(payload));
  EXPECT_EQ(read_text_file(dir.file(id + ".env")), id + " envtype mail 1\n");
}

TEST(ExecJobsE2E, FailingJobIsRetriedWithBackoffThenDead) {
  TestSchema schema;
  TempDir dir;
  const std::string attempts_file = dir.file("attempts");
  DaemonYaml yaml(schema.name());
  yaml.shell_handler("flaky", "echo $PGJOBD_JOB_ATTEMPT >> " + shell_quote(attempts_file) +
                                  "; echo \"boom on attempt $PGJOBD_JOB_ATTEMPT\" >&2; exit 3");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();

  const std::string id =
      schema.query("INSERT INTO {jobs} (type, max_attempts) VALUES ('flaky', 3) RETURNING id");
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'dead'") == 1; }, 15s))
      << table_summary(schema);
  stop_daemon(daemon);

  const std::string where = " FROM {jobs} WHERE id = " + id;
  EXPECT_EQ(schema.query("SELECT attempts" + where), "3");
  EXPECT_EQ(schema.query("SELECT jsonb_array_length(errors)" + where), "3");
  EXPECT_EQ(schema.query("SELECT string_agg(e->>'attempt', ',' ORDER BY n) FROM {jobs}, "
                         "jsonb_array_elements(errors) WITH ORDINALITY AS x(e, n) WHERE id = " +
                         id),
            "1,2,3");
  EXPECT_EQ(schema.query("SELECT bool_and(e->>'error' LIKE 'exit 3%') FROM {jobs}, "
                         "jsonb_array_elements(errors) e WHERE id = " +
                         id),
            "t");
  const std::string last_error = schema.query("SELECT last_error" + where);
  EXPECT_NE(last_error.find("exit 3"), std::string::npos) << last_error;
  EXPECT_NE(last_error.find("boom on attempt 3"), std::string::npos) << last_error;
  EXPECT_EQ(schema.query("SELECT finished_at IS NOT NULL AND locked_by IS NULL" + where), "t");
  EXPECT_EQ(read_lines(attempts_file), (std::vector<std::string>{"1", "2", "3"}));
}

TEST(ExecJobsE2E, PermanentExitCodeIsDeadAfterOneAttempt) {
  TestSchema schema;
  DaemonYaml yaml(schema.name());
  yaml.shell_handler("bounce", "echo 'no such mailbox' >&2; exit 65",
                     "permanent_exit_codes: [64, 65]");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();

  const std::string id =
      schema.query("INSERT INTO {jobs} (type, max_attempts) VALUES ('bounce', 5) RETURNING id");
  ASSERT_TRUE(wait_until([&] { return schema.count("status IN ('dead', 'done')") == 1; }, 15s))
      << table_summary(schema);
  stop_daemon(daemon);

  const std::string where = " FROM {jobs} WHERE id = " + id;
  EXPECT_EQ(schema.query("SELECT status" + where), "dead");
  EXPECT_EQ(schema.query("SELECT attempts" + where), "1");
  EXPECT_EQ(schema.query("SELECT jsonb_array_length(errors)" + where), "1");
  const std::string last_error = schema.query("SELECT last_error" + where);
  EXPECT_NE(last_error.find("exit 65"), std::string::npos) << last_error;
  EXPECT_NE(last_error.find("no such mailbox"), std::string::npos) << last_error;
}

TEST(ExecJobsE2E, MissingProgramIsDeadAtOnce) {
  TestSchema schema;
  DaemonYaml yaml(schema.name());
  yaml.handler("ghost", "{exec: [/nonexistent/pgjobd-e2e-program]}");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  const std::string id =
      schema.query("INSERT INTO {jobs} (type, max_attempts) VALUES ('ghost', 5) RETURNING id");
  ASSERT_TRUE(wait_until([&] { return schema.count("status IN ('dead', 'done')") == 1; }, 15s))
      << table_summary(schema);
  stop_daemon(daemon);
  EXPECT_EQ(schema.query("SELECT status || ' ' || attempts FROM {jobs} WHERE id = " + id),
            "dead 1");
  const std::string last_error = schema.query("SELECT last_error FROM {jobs} WHERE id = " + id);
  EXPECT_NE(last_error.find("/nonexistent/pgjobd-e2e-program"), std::string::npos) << last_error;
}

// A payload far larger than a pipe buffer, and a handler that writes a lot to stdout and
// stderr before reading it: the daemon must feed and drain the pipes at the same time.
TEST(ExecJobsE2E, LargePayloadAndLargeOutputDoNotDeadlock) {
  TestSchema schema;
  TempDir dir;
  const std::string received = dir.file("received");
  DaemonYaml yaml(schema.name());
  yaml.shell_handler("bulky",
                     "head -c 3000000 /dev/zero; head -c 300000 /dev/zero | tr '\\0' e >&2; "
                     "wc -c > " +
                         shell_quote(received) + "; echo 'the end' >&2; exit 7",
                     "timeout: 20s");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  const std::string id = schema.query(
      "INSERT INTO {jobs} (type, max_attempts, payload) VALUES ('bulky', 1, "
      "jsonb_build_object('blob', repeat('x', 2000000))) RETURNING id");
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'dead'") == 1; }, 20s))
      << table_summary(schema);
  stop_daemon(daemon);
  EXPECT_EQ(std::stoll(read_text_file(received)),
            std::stoll(schema.query("SELECT octet_length(payload::text) FROM {jobs}")));
  const std::string last_error = schema.query("SELECT last_error FROM {jobs} WHERE id = " + id);
  EXPECT_NE(last_error.find("exit 7"), std::string::npos) << last_error.substr(0, 200);
  EXPECT_NE(last_error.find("the end"), std::string::npos) << "the stderr tail is kept";
  EXPECT_LT(last_error.size(), 20000u) << "only the tail of stderr is kept";
}

TEST(ExecJobsE2E, TimeoutKillsTheWholeProcessGroup) {
  TestSchema schema;
  TempDir dir;
  const std::string pids = dir.file("pids");
  DaemonYaml yaml(schema.name());
  // A background grandchild in the handler's process group that ignores SIGTERM (so only the
  // group SIGKILL ends it), then the handler itself hangs.
  yaml.shell_handler(
      "hang", "(trap '' TERM; exec sleep 29) & echo $! >> " + shell_quote(pids) + "; exec sleep 30",
      "timeout: 300ms, kill_grace: 200ms");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();

  const std::string id =
      schema.query("INSERT INTO {jobs} (type, max_attempts) VALUES ('hang', 1) RETURNING id");
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'dead'") == 1; }, 15s))
      << table_summary(schema);
  const std::string last_error = schema.query("SELECT last_error FROM {jobs} WHERE id = " + id);
  EXPECT_NE(last_error.find("timed out after 300ms"), std::string::npos) << last_error;

  const std::vector<std::string> grandchildren = read_lines(pids);
  ASSERT_EQ(grandchildren.size(), 1u);
  const pid_t grandchild = static_cast<pid_t>(std::stol(grandchildren[0]));
  // It was reparented when the handler died, so its reaping is not the daemon's to wait for.
  EXPECT_TRUE(wait_until([&] { return !process_alive(grandchild, "sleep"); }, 5s))
      << "the handler's background child " << grandchild << " survived the timeout";
  if (process_alive(grandchild, "sleep")) ::kill(grandchild, SIGKILL);
  stop_daemon(daemon);
}

// The policy (field 41 of /proc/PID/task/TID/stat) of every thread of process `pid`.
std::vector<int> thread_policies(pid_t pid) {
  std::vector<int> policies;
  for (const auto& task :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
    std::ifstream in(task.path() / "stat");
    const std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (stat.rfind(')') == std::string::npos) continue;  // a thread that ended meanwhile
    // After the name's closing parenthesis (a name may hold spaces and parentheses) comes
    // field 3.
    std::istringstream fields(stat.substr(stat.rfind(')') + 2));
    std::string field;
    for (int number = 3; number <= 41 && fields >> field; ++number) {
    }
    policies.push_back(std::stoi(field));
  }
  return policies;
}

// worker.scheduling: by default every thread of the daemon runs under SCHED_BATCH; with
// `normal` under the policy it was started with (this test's). The program of an exec job
// starts under that policy either way, never under SCHED_BATCH.
TEST(ExecJobsE2E, TheDaemonsThreadsRunUnderSchedBatchAndItsProgramsUnderThePolicyBefore) {
  const int started_with = sched_getscheduler(0);
  ASSERT_NE(started_with, SCHED_BATCH) << "the test runs under SCHED_BATCH already";
  for (const std::string scheduling : {"", "normal"}) {
    SCOPED_TRACE("worker.scheduling: " + (scheduling.empty() ? "(default)" : scheduling));
    TestSchema schema;
    TempDir dir;
    DaemonYaml yaml(schema.name());
    if (!scheduling.empty()) yaml.set("worker", "{scheduling: " + scheduling + "}");
    yaml.shell_handler("policy",
                       "exec cut -d' ' -f41 /proc/self/stat > " + shell_quote(dir.file("policy")));
    DaemonProcess daemon(yaml.text());
    ASSERT_TRUE(daemon.wait_ready()) << daemon.log();

    const std::vector<int> threads = thread_policies(daemon.pid());
    EXPECT_GT(threads.size(), 3u);  // the workers, the fetcher, the completer, ...
    const int expected = scheduling.empty() ? SCHED_BATCH : started_with;
    EXPECT_EQ(std::count(threads.begin(), threads.end(), expected),
              static_cast<std::ptrdiff_t>(threads.size()))
        << "every thread under policy " << expected;

    schema.insert_jobs("policy", 1);
    ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == 1; }, 15s))
        << table_summary(schema);
    EXPECT_EQ(read_lines(dir.file("policy")),
              std::vector<std::string>{std::to_string(started_with)});
    stop_daemon(daemon);
  }
}

}  // namespace
}  // namespace pgjobd::testing
