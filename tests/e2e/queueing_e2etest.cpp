// End-to-end: what gets claimed, in which order and how often: priorities, queue limits,
// unserved queues and types, retention, and two daemons sharing one table.

#include <gtest/gtest.h>
#include <signal.h>

#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/daemon_process.hpp"
#include "support/test_database.hpp"

namespace pgjobd::testing {
namespace {

TEST(QueueingE2E, HigherPriorityRunsFirstThenOlderRunAt) {
  TestSchema schema;
  TempDir dir;
  const std::string order = dir.file("order");
  // Inserted before the daemon starts, so the order is the claim order, not arrival order.
  std::vector<std::string> ids;
  for (const char* values : {"0, now() - interval '1 minute'", "5, now() - interval '1 minute'",
                             "-1, now() - interval '1 minute'", "5, now() - interval '2 minutes'",
                             "10, now() - interval '1 minute'"}) {
    ids.push_back(schema.query(std::string("INSERT INTO {jobs} (type, priority, run_at) VALUES "
                                           "('ordered', ") +
                               values + ") RETURNING id"));
  }
  DaemonYaml yaml(schema.name());
  yaml.set("worker", "{concurrency: 1}")
      .shell_handler("ordered", "echo $PGJOBD_JOB_ID >> " + shell_quote(order));
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == 5; }, 15s))
      << table_summary(schema) << daemon.log();
  stop_daemon(daemon);
  EXPECT_EQ(read_lines(order), (std::vector<std::string>{ids[4], ids[3], ids[1], ids[0], ids[2]}));
}

TEST(QueueingE2E, QueueConcurrencyLimitIsNeverExceeded) {
  TestSchema schema;
  TempDir dir;
  const std::string lock = dir.file("lock");
  const std::string overlaps = dir.file("overlaps");
  const std::string ran = dir.file("ran");
  DaemonYaml yaml(schema.name());
  yaml.set("worker", "{concurrency: 4, queues: {default: {}, mail: {concurrency: 1}}}")
      .shell_handler("send", "mkdir " + shell_quote(lock) + " 2>/dev/null || echo x >> " +
                                 shell_quote(overlaps) + "; echo $PGJOBD_JOB_ID >> " +
                                 shell_quote(ran) + "; sleep 0.05; rmdir " + shell_quote(lock) +
                                 " 2>/dev/null; true");
  schema.insert_jobs("send", 8, "mail");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == 8; }, 20s))
      << table_summary(schema) << daemon.log();
  stop_daemon(daemon);
  EXPECT_EQ(read_lines(ran).size(), 8u);
  EXPECT_EQ(read_text_file(overlaps), "") << "two mail jobs ran at once with concurrency 1";
}

TEST(QueueingE2E, JobsOfUnservedQueuesAndUnknownTypesAreLeftAlone) {
  TestSchema schema;
  DaemonYaml yaml(schema.name());
  yaml.handler("ping", "{builtin: noop}");
  schema.insert_jobs("ping", 5);
  schema.insert_jobs("ping", 2, "elsewhere");
  schema.insert_jobs("unknown_type", 3);
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == 5; }, 15s))
      << table_summary(schema);
  // Another batch after the first is done: had the daemon taken the others, it would have by
  // now.
  schema.insert_jobs("ping", 5);
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == 10; }, 15s))
      << table_summary(schema);
  stop_daemon(daemon);
  EXPECT_EQ(schema.count("status = 'pending' AND attempts = 0 AND "
                         "(queue = 'elsewhere' OR type = 'unknown_type')"),
            5)
      << table_summary(schema);
}

TEST(QueueingE2E, RetentionZeroDeletesDoneJobsAtOnce) {
  TestSchema schema;
  TempDir dir;
  const std::string ran = dir.file("ran");
  DaemonYaml yaml(schema.name());
  yaml.set("retention", "{done: 0, dead: 7d}")
      .shell_handler("ephemeral", "echo $PGJOBD_JOB_ID >> " + shell_quote(ran))
      .shell_handler("doomed", "exit 65", "permanent_exit_codes: [65]");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  schema.insert_jobs("ephemeral", 20);
  schema.insert_jobs("doomed", 1);
  ASSERT_TRUE(wait_until([&] { return read_lines(ran).size() == 20; }, 15s));
  EXPECT_TRUE(wait_until([&] { return schema.count("type = 'ephemeral'") == 0; }, 10s))
      << table_summary(schema);
  EXPECT_TRUE(wait_until([&] { return schema.count("status = 'dead'") == 1; }, 10s))
      << "dead jobs follow retention.dead, not retention.done: " << table_summary(schema);
  stop_daemon(daemon);
}

TEST(QueueingE2E, TwoDaemonsShareTheTableWithoutRunningAJobTwice) {
  constexpr int kJobs = 300;
  TestSchema schema;
  TempDir dir;
  const std::string ran = dir.file("ran");
  DaemonYaml yaml(schema.name());
  yaml.set("worker", "{concurrency: 8}")
      .shell_handler("shared", "echo \"$PGJOBD_JOB_ID $PPID\" >> " + shell_quote(ran));
  std::vector<std::unique_ptr<DaemonProcess>> daemons;
  for (int i = 0; i < 2; ++i) {
    daemons.push_back(std::make_unique<DaemonProcess>(yaml.text()));
    ASSERT_TRUE(daemons.back()->wait_ready()) << daemons.back()->log();
  }
  schema.insert_jobs("shared", kJobs);
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == kJobs; }, 60s))
      << table_summary(schema);
  for (auto& daemon : daemons) stop_daemon(*daemon);

  EXPECT_EQ(schema.count("attempts = 1"), kJobs);
  const std::vector<std::string> lines = read_lines(ran);
  EXPECT_EQ(lines.size(), static_cast<std::size_t>(kJobs));
  std::set<std::string> ids;
  std::set<std::string> runners;
  for (const std::string& line : lines) {
    std::istringstream in(line);
    std::string id, parent;
    in >> id >> parent;
    ids.insert(id);
    runners.insert(parent);
  }
  EXPECT_EQ(ids.size(), static_cast<std::size_t>(kJobs)) << "a job ran twice";
  // Both took part (the handler's parent is the daemon that ran it).
  EXPECT_EQ(runners, (std::set<std::string>{std::to_string(daemons[0]->pid()),
                                            std::to_string(daemons[1]->pid())}));
}

}  // namespace
}  // namespace pgjobd::testing
