// End-to-end: the pgjobd command line: config errors and exit codes, check-config, enqueue,
// stats, retry, cancel, --help and --version.

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "db/sql_text.hpp"
#include "pgjobd/version.hpp"
#include "support/build_paths.hpp"
#include "support/daemon_process.hpp"
#include "support/test_database.hpp"
#include "support/test_text.hpp"

namespace pgjobd::testing {
namespace {

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

// A valid config in block style, so each key sits on a known line; `extra` is appended.
std::string block_config(const std::string& schema, const std::string& extra = "") {
  return "database:\n"  // line 1
         "  url: " +
         yaml_quote(test_database_url()) + "\n" +  // line 2
         "  schema: " + schema + "\n" +            // line 3
         "worker:\n"                               // line 4
         "  concurrency: 2\n"                      // line 5
         "poll:\n"                                 // line 6
         "  min_interval: 10ms\n"                  // line 7
         "metrics:\n"                              // line 8
         "  listen: \"\"\n"                        // line 9
         "handlers:\n"                             // line 10
         "  ping: {builtin: noop}\n" +             // line 11
         extra;
}

// ---- configuration errors -------------------------------------------------------------

TEST(CliE2E, UnknownKeyIsAUsageErrorNamingFileLineAndKey) {
  TempDir dir;
  std::string text = block_config("cli_unused");
  text.insert(text.find("poll:\n"), "  concurency: 3\n");  // becomes line 6, in worker
  const std::string file = dir.write("bad.yaml", text);

  for (const std::string command : {"check-config", "run"}) {
    SCOPED_TRACE(command);
    const CliResult result = run_cli({command, "-c", file});
    EXPECT_EQ(result.exit_code, 2) << result.err;
    EXPECT_TRUE(contains(result.err, file + ":6:")) << result.err;
    EXPECT_TRUE(contains(result.err, "worker.concurency")) << result.err;
    EXPECT_TRUE(contains(result.err, "concurrency")) << "no suggestion: " << result.err;
  }
}

TEST(CliE2E, BadDurationIsAUsageErrorNamingFileLineAndKey) {
  TempDir dir;
  std::string text = block_config("cli_unused");
  text.replace(text.find("min_interval: 10ms"), 18, "min_interval: 1.5s");
  const std::string file = dir.write("bad.yaml", text);

  for (const std::string command : {"check-config", "run"}) {
    SCOPED_TRACE(command);
    const CliResult result = run_cli({command, "-c", file});
    EXPECT_EQ(result.exit_code, 2) << result.err;
    EXPECT_TRUE(contains(result.err, file + ":7:")) << result.err;
    EXPECT_TRUE(contains(result.err, "poll.min_interval")) << result.err;
    EXPECT_TRUE(contains(result.err, "1.5s")) << result.err;
  }
}

TEST(CliE2E, SeveralProblemsAreAllReportedInFileOrder) {
  TempDir dir;
  const std::string file = dir.write("bad.yaml",
                                     "shutdown:\n"
                                     "  timeout: forever\n"
                                     "log:\n"
                                     "  level: chatty\n"
                                     "  colour: true\n");
  const CliResult result = run_cli({"check-config", "-c", file});
  EXPECT_EQ(result.exit_code, 2);
  const auto timeout = result.err.find(file + ":2: shutdown.timeout");
  const auto colour = result.err.find(file + ":5: log.colour");
  ASSERT_NE(timeout, std::string::npos) << result.err;
  ASSERT_NE(colour, std::string::npos) << result.err;
  EXPECT_LT(timeout, colour) << result.err;
  EXPECT_TRUE(contains(result.err, "log.level")) << result.err;
}

TEST(CliE2E, MissingConfigFileIsAUsageError) {
  TempDir dir;
  const std::string missing = dir.file("nowhere.yaml");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"check-config", "-c", missing},
        std::vector<std::string>{"run", "-c", missing}, std::vector<std::string>{"-c", missing},
        std::vector<std::string>{"migrate", "-c", missing}}) {
    SCOPED_TRACE(args[0]);
    const CliResult result = run_cli(args);
    EXPECT_EQ(result.exit_code, 2) << result.err;
    EXPECT_TRUE(contains(result.err, missing)) << result.err;
  }
}

TEST(CliE2E, ValidConfigPassesCheckConfig) {
  TempDir dir;
  const std::string file = dir.write("good.yaml", block_config("cli_unused"));
  const CliResult result = run_cli({"check-config", "-c", file});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(contains(result.out, "ok")) << result.out;
  EXPECT_TRUE(contains(result.out, "1 handler")) << result.out;

  // PGJOBD_CONFIG stands in for -c.
  const CliResult from_env = run_cli({"check-config"}, {{"PGJOBD_CONFIG", file}});
  EXPECT_EQ(from_env.exit_code, 0) << from_env.err;

  // The shipped example config is valid too.
  const CliResult example = run_cli({"check-config", "-c", source_path("config/pgjobd.yaml")});
  EXPECT_EQ(example.exit_code, 0) << example.err;
}

// check-config applies run's rules: a file without a handler, which `run` refuses, is
// refused with the same words; `--for ui` checks it for the dashboard alone, which needs
// ui.listen and no handler.
TEST(CliE2E, CheckConfigRefusesWhatRunRefuses) {
  TempDir dir;
  std::string text = block_config("cli_unused");
  text.erase(text.find("handlers:\n"));
  const std::string file = dir.write("no-handlers.yaml", text);
  const CliResult check = run_cli({"check-config", "-c", file});
  const CliResult run = run_cli({"run", "-c", file});
  EXPECT_EQ(check.exit_code, 2) << check.out << check.err;
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_TRUE(contains(check.err, "error: " + file + ": no handlers configured")) << check.err;
  EXPECT_EQ(check.err, run.err);
  EXPECT_EQ(check.out, "");

  const CliResult for_ui = run_cli({"check-config", "--for", "ui", "-c", file});
  EXPECT_EQ(for_ui.exit_code, 2) << for_ui.err;
  EXPECT_TRUE(contains(for_ui.err, "ui.listen is empty")) << for_ui.err;
  const std::string dashboard = dir.write("dashboard.yaml", text + "ui:\n  listen: 127.0.0.1:0\n");
  const CliResult ui_ok = run_cli({"check-config", "--for", "ui", "-c", dashboard});
  EXPECT_EQ(ui_ok.exit_code, 0) << ui_ok.err;
  EXPECT_TRUE(contains(ui_ok.out, "ok")) << ui_ok.out;
  EXPECT_EQ(run_cli({"check-config", "--for", "workers", "-c", dashboard}).exit_code, 2);
}

TEST(CliE2E, UsageErrorsExitTwo) {
  EXPECT_EQ(run_cli({"no-such-command"}).exit_code, 2);
  EXPECT_EQ(run_cli({"enqueue"}).exit_code, 2);  // TYPE missing
  EXPECT_EQ(run_cli({"retry", "-c", "x.yaml", "not-a-number"}).exit_code, 2);
  EXPECT_EQ(run_cli({"pause", "-c", "x.yaml"}).exit_code, 2);  // QUEUE missing
  EXPECT_EQ(run_cli({"resume", "-c", "x.yaml"}).exit_code, 2);
  EXPECT_EQ(run_cli({"run", "--frobnicate"}).exit_code, 2);
}

TEST(CliE2E, HelpAndVersion) {
  const CliResult help = run_cli({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  for (const char* command : {"run", "migrate", "check-config", "enqueue", "stats", "retry",
                              "cancel", "pause", "resume", "schedules"}) {
    EXPECT_TRUE(contains(help.out, command)) << command << " missing from --help:\n" << help.out;
  }
  const CliResult version = run_cli({"--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(trimmed(version.out), std::string("pgjobd ") + kVersion);
}

TEST(CliE2E, DatabaseUrlFromTheEnvironmentOverridesTheFile) {
  TestSchema schema;
  TempDir dir;
  std::string text = block_config(schema.name());
  const auto url_line = text.find("  url: ");
  text.replace(url_line, text.find('\n', url_line) - url_line,
               "  url: \"postgresql://nobody@127.0.0.1:1/nothing?connect_timeout=2\"");
  const std::string file = dir.write("pgjobd.yaml", text);

  EXPECT_EQ(run_cli({"stats", "-c", file}).exit_code, 1);
  for (const char* variable : {"PGJOBD_DATABASE_URL", "DATABASE_URL"}) {
    SCOPED_TRACE(variable);
    const CliResult result =
        run_cli({"stats", "-c", file, "--json"}, {{variable, test_database_url()}});
    EXPECT_EQ(result.exit_code, 0) << result.err;
    EXPECT_EQ(trimmed(result.out), "{}");
  }
}

// ---- enqueue, stats, retry, cancel ----------------------------------------------------

class CliJobsE2E : public ::testing::Test {
 protected:
  CliJobsE2E() : file_(dir_.write("pgjobd.yaml", block_config(schema_.name()))) {}

  CliResult cli(std::vector<std::string> args) {
    args.insert(args.begin() + 1, {"-c", file_});
    return run_cli(args);
  }
  std::string enqueue_ok(std::vector<std::string> args) {
    args.insert(args.begin(), "enqueue");
    const CliResult result = cli(args);
    EXPECT_EQ(result.exit_code, 0) << result.err;
    return trimmed(result.out);
  }
  std::string row(const std::string& id, const std::string& columns) {
    return schema_.query("SELECT concat_ws('|', " + columns + ") FROM {jobs} WHERE id = " + id);
  }

  TestSchema schema_;
  TempDir dir_;
  std::string file_;
};

TEST_F(CliJobsE2E, EnqueueSetsEveryColumn) {
  const std::string id = enqueue_ok({"report", R"({"month": "2031-04", "n": [1, 2]})", "--queue",
                                     "mail", "--priority", "7", "--run-at", "2031-05-06 07:08:09Z",
                                     "--max-attempts", "9", "--unique-key", "report-2031-04"});
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(row(id, "type, queue, priority, max_attempts, unique_key, status, attempts"),
            "report|mail|7|9|report-2031-04|pending|0");
  EXPECT_EQ(row(id, "run_at = '2031-05-06 07:08:09+00'::timestamptz"), "t");
  EXPECT_EQ(nlohmann::json::parse(row(id, "payload::text")),
            nlohmann::json::parse(R"({"month": "2031-04", "n": [1, 2]})"));
}

TEST_F(CliJobsE2E, EnqueueDefaults) {
  const std::string id = enqueue_ok({"ping"});
  EXPECT_EQ(row(id, "type, queue, priority, max_attempts, status, payload::text"),
            "ping|default|0|5|pending|{}");
  EXPECT_EQ(row(id, "unique_key IS NULL, run_at <= now(), run_at > now() - interval '1 minute'"),
            "t|t|t");
}

TEST_F(CliJobsE2E, EnqueueWithALiveUniqueKeyReturnsTheExistingJob) {
  const std::string first = enqueue_ok({"report", R"({"n": 1})", "--unique-key", "k1"});
  const std::string second = enqueue_ok({"report", R"({"n": 2})", "--unique-key", "k1"});
  EXPECT_EQ(second, first);
  EXPECT_EQ(schema_.count(), 1);
  EXPECT_EQ(row(first, "payload->>'n'"), "1");
  // Another type, or the same key once the first job finished, makes a new job.
  EXPECT_NE(enqueue_ok({"other", "{}", "--unique-key", "k1"}), first);
  schema_.exec("UPDATE {jobs} SET status = 'done', finished_at = now() WHERE id = " + first);
  EXPECT_NE(enqueue_ok({"report", "{}", "--unique-key", "k1"}), first);
  EXPECT_EQ(schema_.count(), 3);
}

TEST_F(CliJobsE2E, EnqueueRejectsBadInput) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"enqueue", "ping", R"({"n": )"},
        std::vector<std::string>{"enqueue", "ping", "not json"},
        std::vector<std::string>{"enqueue", "ping", "{}", "--priority", "40000"},
        std::vector<std::string>{"enqueue", "ping", "{}", "--max-attempts", "0"}}) {
    SCOPED_TRACE(args[2]);
    const CliResult result = cli(args);
    EXPECT_EQ(result.exit_code, 2) << result.out << result.err;
    EXPECT_EQ(result.out, "");
  }
  EXPECT_TRUE(contains(cli({"enqueue", "ping", "not json"}).err, "JSON"));
  EXPECT_EQ(schema_.count(), 0);
}

// An unparseable --run-at is bad input on the command line, like bad JSON: exit 2, not a
// runtime failure (1).
TEST_F(CliJobsE2E, EnqueueWithAnUnparseableRunAtIsAUsageError) {
  const CliResult result = cli({"enqueue", "ping", "{}", "--run-at", "next tuesday-ish"});
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_TRUE(contains(result.err, "next tuesday-ish")) << result.err;
  EXPECT_EQ(schema_.count(), 0);
}

TEST_F(CliJobsE2E, StatsReflectsTheTable) {
  EXPECT_EQ(trimmed(cli({"stats", "--json"}).out), "{}");
  schema_.exec(
      "INSERT INTO {jobs} (type, queue, status, attempts, finished_at) VALUES "
      "('a', 'default', 'pending', 0, NULL), ('a', 'default', 'pending', 0, NULL),"
      "('a', 'default', 'pending', 0, NULL), ('a', 'default', 'done', 1, now()),"
      "('a', 'default', 'done', 1, now()), ('b', 'mail', 'dead', 5, now()),"
      "('b', 'mail', 'failed', 1, NULL), ('b', 'mail', 'cancelled', 0, now()),"
      "('b', 'mail', 'blocked', 0, NULL)");
  const CliResult json = cli({"stats", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(nlohmann::json::parse(json.out), nlohmann::json::parse(R"({
      "default": {"pending": 3, "done": 2},
      "mail": {"dead": 1, "failed": 1, "cancelled": 1, "blocked": 1}})"));

  const CliResult text = cli({"stats"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(contains(text.out, "pending")) << text.out;
  // Each status a column, blocked (jobs waiting for their parents) last.
  EXPECT_TRUE(contains(text.out,
                       "queue                   pending    running     failed       done "
                       "      dead  cancelled    blocked\n"))
      << text.out;
  EXPECT_TRUE(contains(text.out,
                       "mail                          0          0          1          0 "
                       "         1          1          1\n"))
      << text.out;
}

TEST_F(CliJobsE2E, RetryMakesADeadJobPendingAgain) {
  const std::string id = schema_.query(
      "INSERT INTO {jobs} (type, status, attempts, max_attempts, finished_at, last_error) "
      "VALUES ('ping', 'dead', 5, 5, now(), 'exit 3') RETURNING id");
  const CliResult result = cli({"retry", id});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(contains(result.out, "pending again (was dead)")) << result.out;
  EXPECT_EQ(row(id, "status, attempts, finished_at IS NULL, run_at <= now()"), "pending|5|t|t");
  EXPECT_GT(std::stoi(row(id, "max_attempts")), 5) << "a retried dead job gets no attempt";

  // A pending job cannot be retried, a missing one neither.
  const CliResult again = cli({"retry", id});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_TRUE(contains(again.err, "pending")) << again.err;
  const CliResult missing = cli({"retry", "987654321"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_TRUE(contains(missing.err, "987654321")) << missing.err;
}

TEST_F(CliJobsE2E, CancelAPendingJobButNotADoneOne) {
  const std::string pending = enqueue_ok({"ping"});
  const CliResult cancelled = cli({"cancel", pending, "--reason", "duplicate order"});
  EXPECT_EQ(cancelled.exit_code, 0) << cancelled.err;
  EXPECT_EQ(row(pending, "status, finished_at IS NOT NULL, last_error"),
            "cancelled|t|cancelled: duplicate order");
  // Idempotent: a second cancel says so and succeeds.
  const CliResult again = cli({"cancel", pending});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_TRUE(contains(again.out, "cancelled")) << again.out;

  const std::string done = schema_.query(
      "INSERT INTO {jobs} (type, status, attempts, finished_at) VALUES ('ping', 'done', 1, "
      "now()) RETURNING id");
  const CliResult refused = cli({"cancel", done});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_TRUE(contains(refused.err, "done")) << refused.err;
  EXPECT_EQ(row(done, "status"), "done");

  EXPECT_EQ(cli({"cancel", "987654321"}).exit_code, 1);
  // A cancelled job can be retried.
  EXPECT_EQ(cli({"retry", pending}).exit_code, 0);
  EXPECT_EQ(row(pending, "status"), "pending");
}

// Every subcommand's error has one shape: "error: ", the text without the server's
// "ERROR:  " prefix or libpq's trailing newline, and one newline; bad input exits 2, an
// unknown id or a job in the wrong state 1.
TEST_F(CliJobsE2E, ErrorsHaveOneShape) {
  const std::string done = schema_.query(
      "INSERT INTO {jobs} (type, status, attempts, finished_at) VALUES ('ping', 'done', 1, "
      "now()) RETURNING id");
  struct Case {
    std::vector<std::string> args;
    int exit_code;
    std::string err;
  };
  for (const Case& c : std::vector<Case>{
           {{"enqueue", "ping", "{}", "--run-at", "soon"},
            2,
            "error: invalid job: invalid input syntax for type timestamp with time zone: "
            "\"soon\"\n"},
           {{"enqueue", "ping", "{"}, 2, "error: payload is not valid JSON: {\n"},
           {{"retry", "987654321"}, 1, "error: pgjobd_retry: job 987654321 does not exist\n"},
           {{"retry", done}, 1, ""},
           {{"cancel", "987654321"}, 1, "error: pgjobd_cancel: job 987654321 does not exist\n"},
           {{"cancel", done},
            1,
            "error: job " + done + " is done: a finished job cannot be cancelled\n"},
           {{"pause", ""},
            2,
            "error: pgjobd_pause_queue: queue must be 1..200 characters long, not 0\n"},
           {{"resume", ""},
            2,
            "error: pgjobd_resume_queue: queue must be 1..200 characters long, not 0\n"}}) {
    SCOPED_TRACE(c.args[0] + " " + c.args[1]);
    const CliResult result = cli(c.args);
    EXPECT_EQ(result.exit_code, c.exit_code) << result.err;
    EXPECT_EQ(result.out, "");
    if (!c.err.empty()) {
      EXPECT_EQ(result.err, c.err);
    }
    EXPECT_TRUE(result.err.starts_with("error: ")) << result.err;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
    EXPECT_FALSE(contains(result.err, "ERROR:")) << result.err;
  }

  // An unreachable server: one line too, naming the server by the URL's parsed fields.
  const std::string unreachable =
      dir_.write("unreachable.yaml",
                 "database: {url: \"postgresql://nobody@127.0.0.1:1/nothing?connect_timeout=2\"}\n"
                 "handlers: {ping: {builtin: noop}}\n");
  const CliResult lost = run_cli({"retry", "-c", unreachable, "1"});
  EXPECT_EQ(lost.exit_code, 1) << lost.err;
  EXPECT_TRUE(lost.err.starts_with(
      "error: cannot connect to host=127.0.0.1 port=1 dbname=nothing user=nobody: "))
      << lost.err;
  EXPECT_EQ(std::count(lost.err.begin(), lost.err.end(), '\n'), 1) << lost.err;
}

// pause and resume go through pgjobd_pause_queue / pgjobd_resume_queue: idempotent, fine
// before the queue has a job, and a bad queue name is a usage error.
TEST_F(CliJobsE2E, PauseAndResumeAQueue) {
  const auto paused = [&] {
    return schema_.query("SELECT paused FROM " + quote_identifier(schema_.name()) +
                         ".pgjobd_queues WHERE queue = 'mail'");
  };
  for (int i = 0; i < 2; ++i) {
    const CliResult result = cli({"pause", "mail"});
    EXPECT_EQ(result.exit_code, 0) << result.err;
    EXPECT_TRUE(contains(result.out, "queue mail paused")) << result.out;
    EXPECT_EQ(paused(), "t");
  }
  // Enqueueing into a paused queue still works.
  EXPECT_FALSE(enqueue_ok({"ping", "{}", "--queue", "mail"}).empty());
  const CliResult resumed = cli({"resume", "mail"});
  EXPECT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_TRUE(contains(resumed.out, "queue mail resumed")) << resumed.out;
  EXPECT_EQ(paused(), "f");
  EXPECT_EQ(cli({"resume", "mail"}).exit_code, 0);

  const CliResult empty = cli({"pause", ""});
  EXPECT_EQ(empty.exit_code, 2) << empty.err;
  EXPECT_TRUE(contains(empty.err, "queue must be 1..200 characters long")) << empty.err;
  EXPECT_EQ(cli({"resume", std::string(201, 'q')}).exit_code, 2);
}

// The function's own checks reach the operator as a usage error naming the value.
TEST_F(CliJobsE2E, EnqueueReportsTheFunctionsCheck) {
  const CliResult result = cli({"enqueue", "ping", "{}", "--queue", std::string(201, 'q')});
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_TRUE(contains(result.err, "queue must be 1..200 characters long, not 201")) << result.err;
  EXPECT_EQ(schema_.count(), 0);
}

}  // namespace
}  // namespace pgjobd::testing
