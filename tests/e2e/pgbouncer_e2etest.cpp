// Daemons behind a real PgBouncer in transaction pooling mode (scripts/pgbouncer.sh, Debian's
// pgbouncer 1.18) with database.pooler: transaction. The pool has fewer server connections
// than the daemons open, so every statement meets server connections other clients used:
// named prepared statements failed there ("prepared statement \"pgjobd_claim\" already
// exists"). Every job runs once, the sql handler's transaction and statement_timeout work,
// cancel and pause work, and LISTEN goes past the pooler (database.listen_url) or, without
// it, the daemon polls.

#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "db/sql_text.hpp"
#include "support/build_paths.hpp"
#include "support/daemon_process.hpp"
#include "support/test_database.hpp"
#include "support/wait_until.hpp"

namespace pgjobd::testing {
namespace {

// One PgBouncer for a test, stopped at its end.
class Bouncer {
 public:
  explicit Bouncer(int pool_size) {
    const std::string command = source_path("scripts/pgbouncer.sh") + " start " +
                                shell_quote(dir_.path()) + " " + shell_quote(test_database_url()) +
                                " " + std::to_string(pool_size) + " > /dev/null";
    started_ = std::system(command.c_str()) == 0;
    url_ = read_text_file(dir_.file("url"));
    while (!url_.empty() && url_.back() == '\n') url_.pop_back();
  }
  ~Bouncer() {
    const std::string command =
        source_path("scripts/pgbouncer.sh") + " stop " + shell_quote(dir_.path());
    [[maybe_unused]] const int rc = std::system(command.c_str());
  }
  Bouncer(const Bouncer&) = delete;
  Bouncer& operator=(const Bouncer&) = delete;

  bool started() const { return started_ && !url_.empty(); }
  const std::string& url() const { return url_; }
  std::string log() const { return read_text_file(dir_.file("pgbouncer.log")); }

 private:
  TempDir dir_;
  bool started_ = false;
  std::string url_;
};

void sql_call(TestSchema& schema, const std::string& call) {
  schema.exec("SELECT " + quote_identifier(schema.name()) + "." + call);
}

DaemonYaml pooled_daemon(TestSchema& schema, const Bouncer& bouncer, const std::string& listen_url,
                         const std::string& pids) {
  DaemonYaml yaml(schema.name());
  std::string database =
      "{url: " + yaml_quote(bouncer.url()) + ", schema: " + schema.name() + ", pooler: transaction";
  if (!listen_url.empty()) database += ", listen_url: " + yaml_quote(listen_url);
  yaml.set("database", database + "}");
  yaml.set("worker", "{concurrency: 8, queues: {default: {}, held: {}}}");
  yaml.handler("ping", "{builtin: noop}");
  // Its own transaction, with statement_timeout set for the transaction only.
  yaml.handler("record", "{sql: \"insert into " + schema.name() +
                             ".side (job_id) values ($2)\", timeout: 5s}");
  yaml.shell_handler("sleeper", "echo $$ >> " + shell_quote(pids) + "; exec sleep 60",
                     "kill_grace: 300ms");
  return yaml;
}

TEST(PgBouncerE2E, TwoDaemonsBehindATransactionPoolerRunEveryJobOnceAndEveryFeatureWorks) {
  Bouncer bouncer(3);  // 3 server connections for 2 daemons' 8+ sessions
  ASSERT_TRUE(bouncer.started()) << bouncer.log();
  TestSchema schema;
  schema.exec("CREATE TABLE " + quote_identifier(schema.name()) + ".side (job_id bigint)");
  TempDir dir;
  const std::string pids = dir.file("pids");
  sql_call(schema, "pgjobd_pause_queue('held')");
  const DaemonYaml yaml = pooled_daemon(schema, bouncer, test_database_url(), pids);
  DaemonProcess first(yaml.text());
  DaemonProcess second(yaml.text());
  ASSERT_TRUE(first.wait_ready()) << first.log();
  ASSERT_TRUE(second.wait_ready()) << second.log();

  constexpr int kJobs = 3000;
  schema.exec("INSERT INTO {jobs} (type, queue) VALUES ('ping', 'held')");
  schema.exec("INSERT INTO {jobs} (type) SELECT 'ping' FROM generate_series(1, " +
              std::to_string(kJobs) + ")");
  schema.exec("INSERT INTO {jobs} (type) SELECT 'record' FROM generate_series(1, 50)");
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == kJobs + 50; }, 60s))
      << table_summary(schema) << first.log() << second.log();
  EXPECT_EQ(schema.count("status = 'done' AND attempts = 1"), kJobs + 50);
  EXPECT_EQ(schema.query("SELECT count(DISTINCT job_id) || ' ' || count(*) FROM " +
                         quote_identifier(schema.name()) + ".side"),
            "50 50");
  // The paused queue's job waited, and runs once resumed.
  EXPECT_EQ(schema.query("SELECT status FROM {jobs} WHERE queue = 'held'"), "pending");
  sql_call(schema, "pgjobd_resume_queue('held')");
  ASSERT_TRUE(
      wait_until([&] { return schema.count("queue = 'held' AND status = 'done'") == 1; }, 15s));

  // Cancel reaches a running job through the LISTEN session past the pooler.
  const std::string id = schema.query("INSERT INTO {jobs} (type) VALUES ('sleeper') RETURNING id");
  ASSERT_TRUE(wait_until([&] { return read_lines(pids).size() == 1; }, 15s));
  sql_call(schema, "pgjobd_cancel(" + id + ", 'through the pooler')");
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'cancelled'") == 1; }, 5s))
      << table_summary(schema);
  const pid_t sleeper = static_cast<pid_t>(std::stol(read_lines(pids)[0]));
  EXPECT_TRUE(wait_until([&] { return !process_alive(sleeper); }, 5s));
  if (process_alive(sleeper)) ::kill(sleeper, SIGKILL);

  for (DaemonProcess* daemon : {&first, &second}) {
    EXPECT_EQ(daemon->log().find("prepared statement"), std::string::npos) << daemon->log();
    EXPECT_EQ(daemon->log().find("claim failed"), std::string::npos) << daemon->log();
    // The hot statements went as calls of the functions that keep their plans.
    EXPECT_EQ(daemon->log().find("planned at each execution"), std::string::npos) << daemon->log();
    stop_daemon(*daemon);
  }
}

// No listen_url: the daemon says it polls, and still finds new jobs (within
// poll.max_interval) and cancels (at its next heartbeat).
TEST(PgBouncerE2E, WithoutAListenUrlTheDaemonPolls) {
  Bouncer bouncer(2);
  ASSERT_TRUE(bouncer.started()) << bouncer.log();
  TestSchema schema;
  schema.exec("CREATE TABLE " + quote_identifier(schema.name()) + ".side (job_id bigint)");
  TempDir dir;
  const std::string pids = dir.file("pids");
  DaemonYaml yaml = pooled_daemon(schema, bouncer, "", pids);
  yaml.set("lease", "{duration: 3s}");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  EXPECT_TRUE(daemon.wait_for_log("no LISTEN, new jobs are found by polling")) << daemon.log();

  schema.exec("INSERT INTO {jobs} (type) SELECT 'ping' FROM generate_series(1, 200)");
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == 200; }, 30s))
      << table_summary(schema) << daemon.log();
  const std::string id = schema.query("INSERT INTO {jobs} (type) VALUES ('sleeper') RETURNING id");
  ASSERT_TRUE(wait_until([&] { return read_lines(pids).size() == 1; }, 15s));
  sql_call(schema, "pgjobd_cancel(" + id + ")");
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'cancelled'") == 1; }, 10s))
      << table_summary(schema) << daemon.log();
  const pid_t sleeper = static_cast<pid_t>(std::stol(read_lines(pids)[0]));
  EXPECT_TRUE(wait_until([&] { return !process_alive(sleeper); }, 5s));
  if (process_alive(sleeper)) ::kill(sleeper, SIGKILL);
  stop_daemon(daemon);
}

}  // namespace
}  // namespace pgjobd::testing
