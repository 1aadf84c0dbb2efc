// Poison children through the real binary: handlers that segfault, hang past their timeout
// (also ignoring SIGTERM), flood stdout and stderr, leave grandchildren behind or do not
// exist. Each ends with a clear last_error, nothing is left running or unreaped, and normal
// jobs keep flowing meanwhile.

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <string>
#include <vector>

#include "support/daemon_process.hpp"
#include "support/hostile_load.hpp"
#include "support/private_cluster.hpp"
#include "support/test_database.hpp"
#include "support/test_text.hpp"

namespace pgjobd::testing {
namespace {

TEST(FaultsPoisonE2E, HostileChildrenEndWithClearErrorsAndLeaveNothingBehind) {
  constexpr int kEach = 3;
  constexpr int kNormal = 300;
  TestSchema schema;
  TempDir dir;
  const std::string ok = dir.file("ok");
  const std::string pids = dir.file("pids");  // "<job type> <pid>" of children to check
  const std::string record = "echo \"$PGJOBD_JOB_TYPE $$\" >> " + shell_quote(pids) + "; ";
  DaemonYaml yaml(schema.name());
  yaml.set("worker", "{concurrency: 8}")
      .shell_handler("segv", record + "kill -SEGV $$")
      .shell_handler("hang", record + "exec sleep 1000", "timeout: 500ms, kill_grace: 200ms")
      .shell_handler("stubborn", record + "trap '' TERM; while :; do sleep 0.1; done",
                     "timeout: 500ms, kill_grace: 300ms")
      .shell_handler("flood",
                     "head -c 3000000 /dev/zero | tr '\\0' o; "
                     "head -c 3000000 /dev/zero | tr '\\0' e >&2; echo ' the end' >&2; exit 1")
      .shell_handler("orphan",
                     "sleep 1000 & echo \"grandchild $!\" >> " + shell_quote(pids) + "; exit 0")
      .handler("missing", "{exec: [/nonexistent/pgjobd-no-such-program, --flag]}")
      .shell_handler("normal", "echo $PGJOBD_JOB_ID >> " + shell_quote(ok));
  const std::vector<std::string> poison = {"segv",  "hang",   "stubborn",
                                           "flood", "orphan", "missing"};
  // Poison first in line, so the normal jobs run alongside them.
  for (const auto& type : poison) {
    schema.exec("INSERT INTO {jobs} (type, max_attempts, priority) SELECT " + sql_literal(type) +
                ", 1, 1 FROM generate_series(1, " + std::to_string(kEach) + ")");
  }
  schema.insert_jobs("normal", kNormal);

  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  ASSERT_TRUE(wait_until(
      [&] { return schema.count("status IN ('pending', 'running', 'failed')") == 0; }, 60s))
      << summary_by_type(schema);

  const auto errors_of = [&](const std::string& type) {
    return schema.query(
        "SELECT string_agg(DISTINCT status || ': ' || coalesce(last_error, "
        "'(none)'), ' | ') FROM {jobs} WHERE type = " +
        sql_literal(type));
  };
  EXPECT_EQ(errors_of("segv"), "dead: killed by signal 11 (SIGSEGV)");
  EXPECT_EQ(errors_of("hang"), "dead: timed out after 500ms");
  EXPECT_EQ(errors_of("stubborn"), "dead: timed out after 500ms");
  EXPECT_EQ(errors_of("missing"),
            "dead: cannot run /nonexistent/pgjobd-no-such-program: No such file or directory");
  EXPECT_EQ(errors_of("orphan"), "done: (none)");
  // The flood: exit status plus only the tail of stderr (4 KiB), which ends the output.
  EXPECT_EQ(schema.count("type = 'flood' AND status = 'dead' AND last_error LIKE 'exit 1: ...e%' "
                         "AND last_error LIKE '%eee the end' AND octet_length(last_error) < 4200"),
            kEach)
      << schema.query("SELECT left(last_error, 100) FROM {jobs} WHERE type = 'flood'");

  EXPECT_EQ(schema.count("type = 'normal' AND status = 'done' AND attempts = 1"), kNormal)
      << summary_by_type(schema);
  EXPECT_EQ(id_counts(ok).size(), static_cast<std::size_t>(kNormal));

  // Nothing outlives its job: not the children (TERM-then-KILL after the timeout, including
  // the one that ignores TERM), not the grandchildren the orphan jobs left behind.
  std::vector<std::string> records = read_lines(pids);
  EXPECT_EQ(records.size(), static_cast<std::size_t>(4 * kEach));
  for (const std::string& line : records) {
    const pid_t pid = static_cast<pid_t>(std::stol(line.substr(line.find(' ') + 1)));
    EXPECT_TRUE(wait_until([&] { return !process_alive(pid); }, 5s))
        << line << " is still running after its job ended";
    if (process_alive(pid)) ::kill(pid, SIGKILL);
  }
  // And every child of the daemon was reaped: no zombies, no children at all once idle.
  EXPECT_TRUE(wait_until([&] { return child_pids(daemon.pid()).empty(); }, 5s))
      << child_pids(daemon.pid()).size() << " children, "
      << child_pids(daemon.pid(), /*zombies_only=*/true).size() << " of them zombies";
  EXPECT_TRUE(daemon.running());
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_for_exit(20s), 0);
}

}  // namespace
}  // namespace pgjobd::testing
