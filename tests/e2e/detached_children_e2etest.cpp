// End-to-end: processes an exec job detaches from its process group (setsid, a double fork
// into a new session) end with the job, however it ends: done, timed out, cancelled, or
// released by a drain; and not before (README "Exec handler").

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "db/sql_text.hpp"
#include "support/daemon_process.hpp"
#include "support/test_database.hpp"
#include "support/wait_until.hpp"

namespace pgjobd::testing {
namespace {

// Starts two detached sleepers and appends their pids to `pids`: `setsid sleep` (a new
// session, the job's child its parent) and `setsid -f` (forked twice: its parent exits at
// once, so it is an orphan while the job still runs). Then waits until both pids are
// written, and runs `then`.
std::string detaching_script(const std::string& pids, const std::string& then) {
  const std::string file = shell_quote(pids);
  return "setsid sleep 1001 </dev/null >/dev/null 2>&1 & echo $! >> " + file +
         "; setsid -f sh -c 'echo $$ >> " + pids + "; exec sleep 1002' </dev/null >/dev/null 2>&1" +
         "; while [ $(wc -l < " + file + ") -lt 2 ]; do sleep 0.01; done; " + then;
}

std::vector<pid_t> detached_pids(const std::string& pids) {
  EXPECT_TRUE(wait_until([&] { return read_lines(pids).size() == 2; }, 15s));
  std::vector<pid_t> out;
  for (const std::string& line : read_lines(pids))
    out.push_back(static_cast<pid_t>(std::stol(line)));
  return out;
}

// Both sleepers are gone within a bounded wait (killed for good measure if not, so a failing
// run leaves nothing behind).
void expect_gone(const std::vector<pid_t>& pids, const std::string& how) {
  for (const pid_t pid : pids) {
    EXPECT_TRUE(wait_until([&] { return !process_alive(pid, "sleep"); }, 5s))
        << "detached process " << pid << " outlived its job (" << how << ")";
    if (process_alive(pid, "sleep")) ::kill(pid, SIGKILL);
  }
}

void expect_alive(const std::vector<pid_t>& pids) {
  for (const pid_t pid : pids) EXPECT_TRUE(process_alive(pid, "sleep")) << pid;
}

// A scratch schema, the pid file and a ready daemon whose `detach` handler runs
// detaching_script(then) with the handler settings `extra`; `configure` adds to the config.
struct Detaching {
  Detaching(const std::string& then, const std::string& extra,
            const std::function<void(DaemonYaml&)>& configure = {}) {
    DaemonYaml yaml(schema.name());
    yaml.shell_handler("detach", detaching_script(pids, then), extra);
    if (configure) configure(yaml);
    daemon = std::make_unique<DaemonProcess>(yaml.text());
    EXPECT_TRUE(daemon->wait_ready()) << daemon->log();
  }
  TestSchema schema;
  TempDir dir;
  std::string pids = dir.file("pids");
  std::unique_ptr<DaemonProcess> daemon;
};

TEST(DetachedChildrenE2E, EndWhenTheJobIsDone) {
  Detaching run("exit 0", "");
  TestSchema& schema = run.schema;

  schema.exec("INSERT INTO {jobs} (type) VALUES ('detach')");
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == 1; }, 15s))
      << table_summary(schema);
  expect_gone(detached_pids(run.pids), "done");
  stop_daemon(*run.daemon);
}

TEST(DetachedChildrenE2E, EndWhenTheJobTimesOut) {
  Detaching run("exec sleep 60", "timeout: 500ms, kill_grace: 200ms");
  TestSchema& schema = run.schema;

  schema.exec("INSERT INTO {jobs} (type, max_attempts) VALUES ('detach', 1)");
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'dead'") == 1; }, 15s))
      << table_summary(schema);
  EXPECT_NE(schema.query("SELECT last_error FROM {jobs}").find("timed out"), std::string::npos);
  expect_gone(detached_pids(run.pids), "timed out");
  stop_daemon(*run.daemon);
}

// Another job ending meanwhile (its sweep runs) leaves the running job's detached processes
// alone: they carry its PGJOBD_JOB_ID. The cancel then ends them.
TEST(DetachedChildrenE2E, OutliveOtherJobsAndEndWhenTheJobIsCancelled) {
  Detaching run("exec sleep 60", "kill_grace: 200ms", [](DaemonYaml& yaml) {
    yaml.set("worker", "{concurrency: 2}").shell_handler("quick", "exit 0");
  });
  TestSchema& schema = run.schema;

  const std::string id = schema.query("INSERT INTO {jobs} (type) VALUES ('detach') RETURNING id");
  const std::vector<pid_t> detached = detached_pids(run.pids);
  schema.exec("INSERT INTO {jobs} (type) VALUES ('quick')");
  ASSERT_TRUE(
      wait_until([&] { return schema.count("type = 'quick' AND status = 'done'") == 1; }, 15s))
      << table_summary(schema);
  expect_alive(detached);
  EXPECT_EQ(schema.query("SELECT status FROM {jobs} WHERE id = " + id), "running");

  schema.exec("SELECT " + quote_identifier(schema.name()) + ".pgjobd_cancel(" + id + ", 'test')");
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'cancelled'") == 1; }, 15s))
      << table_summary(schema);
  expect_gone(detached, "cancelled");
  stop_daemon(*run.daemon);
}

TEST(DetachedChildrenE2E, EndWhenTheDrainReleasesTheJob) {
  Detaching run("exec sleep 60", "kill_grace: 200ms",
                [](DaemonYaml& yaml) { yaml.set("shutdown", "{timeout: 500ms}"); });
  TestSchema& schema = run.schema;

  schema.exec("INSERT INTO {jobs} (type) VALUES ('detach')");
  const std::vector<pid_t> detached = detached_pids(run.pids);
  stop_daemon(*run.daemon);
  expect_gone(detached, "drained");
}

}  // namespace
}  // namespace pgjobd::testing
