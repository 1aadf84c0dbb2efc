// The sql handler: the statement and the job's completion commit together or not at all.

#include "handlers/sql_handler.hpp"

#include <gtest/gtest.h>

#include "db/pg_database.hpp"
#include "db/pg_job_store.hpp"
#include "pgjobd/engine.hpp"
#include "support/test_database.hpp"

namespace pgjobd {
namespace {

using testing::TestSchema;
using namespace std::chrono_literals;

class SqlHandlerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    schema_.exec("CREATE TABLE " + side_table() + " (job_id bigint, payload jsonb)");
  }
  std::string side_table() const { return "\"" + schema_.name() + "\".side_effects"; }
  HandlerConfig sql_config(const std::string& sql) const {
    HandlerConfig config;
    config.kind = HandlerConfig::Kind::kSql;
    config.sql = sql;
    return config;
  }
  SqlHandlerContext context(bool delete_done = false, std::size_t max_result_bytes = 65536) const {
    return {std::make_shared<PgDatabase>(schema_.config().database), "worker-1", delete_done,
            max_result_bytes};
  }
  // Claims the single pending job as worker-1.
  Job claim() {
    PgJobStore store(schema_.config().database, "test");
    auto jobs = store.claim({{{"default", 1}}, {"t"}, 1, "worker-1", Millis(30000)});
    EXPECT_EQ(jobs.size(), 1u);
    return jobs.empty() ? Job{} : jobs[0];
  }
  std::string insert_side_effect() const {
    return "INSERT INTO " + side_table() + " (job_id, payload) VALUES ($2, $1::jsonb)";
  }
  TestSchema schema_;
};

TEST_F(SqlHandlerTest, StatementAndDoneCommitTogether) {
  schema_.exec("INSERT INTO {jobs} (type, payload) VALUES ('t', '{\"n\": 7}')");
  const Job job = claim();
  const Handler handler = make_sql_handler(sql_config(insert_side_effect()), context());
  const JobResult result = handler(job, {});
  EXPECT_EQ(result.outcome, Outcome::kDone) << result.error;
  EXPECT_TRUE(result.completion_written);
  EXPECT_EQ(schema_.query("SELECT status || ' ' || coalesce(locked_by, 'none') || ' ' || "
                          "(locked_until IS NULL) FROM {jobs}"),
            "done worker-1 true");
  EXPECT_EQ(schema_.query("SELECT job_id || ' ' || (payload->>'n') FROM " + side_table()),
            std::to_string(job.id) + " 7");
}

// The server cannot infer the type of a parameter the statement leaves unused, so both are
// always sent typed ($1 jsonb, $2 bigint): every combination works.
TEST_F(SqlHandlerTest, StatementsMayUseEitherParameterBothOrNone) {
  schema_.exec("CREATE TABLE \"" + schema_.name() + "\".seen (what text, job_id bigint, n int)");
  const std::string seen = "\"" + schema_.name() + "\".seen";
  const std::vector<std::pair<std::string, std::string>> statements = {
      {"only $1", "INSERT INTO " + seen + " (what, n) VALUES ('only $1', ($1->>'n')::int)"},
      {"only $2", "INSERT INTO " + seen + " (what, job_id) VALUES ('only $2', $2)"},
      {"both", "INSERT INTO " + seen + " VALUES ('both', $2, ($1->>'n')::int)"},
      {"none", "INSERT INTO " + seen + " (what) VALUES ('none');"},
  };
  for (const auto& [what, sql] : statements) {
    schema_.exec("INSERT INTO {jobs} (type, payload) VALUES ('t', '{\"n\": 5}')");
    const Job job = claim();
    const JobResult result = make_sql_handler(sql_config(sql), context())(job, {});
    EXPECT_EQ(result.outcome, Outcome::kDone) << what << ": " << result.error;
    const std::string id = std::to_string(job.id);
    const std::string expected = what == "only $1" ? "5" : what == "none" ? "-" : id;
    EXPECT_EQ(schema_.query("SELECT coalesce(job_id::text, n::text, '-') FROM " + seen +
                            " WHERE what = '" + what + "'"),
              expected)
        << what;
    EXPECT_EQ(schema_.query("SELECT status FROM {jobs} WHERE id = " + id), "done") << what;
  }
}

// Config loading refuses such text; this is the line behind it: the extended protocol takes
// one statement, so a COMMIT smuggled in cannot end the fenced transaction early.
TEST_F(SqlHandlerTest, SeveralStatementsAreRefusedAndHaveNoEffect) {
  schema_.exec("CREATE TABLE \"" + schema_.name() + "\".t (x int, y int)");
  schema_.exec("INSERT INTO \"" + schema_.name() + "\".t VALUES (0, 0)");
  const std::string t = "\"" + schema_.name() + "\".t";
  schema_.exec("INSERT INTO {jobs} (type) VALUES ('t')");
  const Job job = claim();
  const JobResult result = make_sql_handler(
      sql_config("UPDATE " + t + " SET x=1; COMMIT; UPDATE " + t + " SET y=1"), context())(job, {});
  EXPECT_EQ(result.outcome, Outcome::kRetry);
  EXPECT_NE(result.error.find("multiple commands"), std::string::npos) << result.error;
  EXPECT_EQ(schema_.query("SELECT x || ' ' || y FROM " + t), "0 0");
  EXPECT_EQ(schema_.query("SELECT status FROM {jobs}"), "running");
}

// libpq would wait for COPY data the handler never sends: the COPY is ended at once and
// reported, and the pooled connection stays usable for the next job.
TEST_F(SqlHandlerTest, CopyIsRefusedAndTheConnectionStaysUsable) {
  const SqlHandlerContext shared = context();
  const std::vector<std::string> copies = {"COPY " + side_table() + " FROM STDIN",
                                           "COPY (SELECT 1) TO STDOUT"};
  for (const std::string& copy : copies) {
    schema_.exec("INSERT INTO {jobs} (type) VALUES ('t')");
    const Job job = claim();
    const JobResult result = make_sql_handler(sql_config(copy), shared)(job, {});
    EXPECT_EQ(result.outcome, Outcome::kRetry) << copy;
    EXPECT_NE(result.error.find("COPY"), std::string::npos) << result.error;
    schema_.exec("UPDATE {jobs} SET status = 'done', locked_by = NULL WHERE id = " +
                 std::to_string(job.id));
  }
  schema_.exec("INSERT INTO {jobs} (type, payload) VALUES ('t', '{\"n\": 1}')");
  const Job job = claim();
  const JobResult result = make_sql_handler(sql_config(insert_side_effect()), shared)(job, {});
  EXPECT_EQ(result.outcome, Outcome::kDone) << result.error;
}

TEST_F(SqlHandlerTest, NothingCommitsWhenTheJobIsNoLongerOurs) {
  schema_.exec("INSERT INTO {jobs} (type) VALUES ('t')");
  const Job job = claim();
  schema_.exec("UPDATE {jobs} SET locked_by = 'someone-else', attempts = 2");
  const Handler handler = make_sql_handler(sql_config(insert_side_effect()), context());
  const JobResult result = handler(job, {});
  EXPECT_EQ(result.outcome, Outcome::kReleased);
  EXPECT_TRUE(result.completion_written);  // nothing for the completer to write
  EXPECT_EQ(std::stoll(schema_.query("SELECT count(*) FROM " + side_table())), 0);
  EXPECT_EQ(schema_.query("SELECT status || ' ' || locked_by FROM {jobs}"), "running someone-else");
}

TEST_F(SqlHandlerTest, DataExceptionsAreDeadOtherErrorsRetry) {
  schema_.exec("INSERT INTO {jobs} (type, payload) VALUES ('t', '{\"n\": \"abc\"}')");
  Job job = claim();
  Handler handler = make_sql_handler(
      sql_config("INSERT INTO " + side_table() + " (job_id) VALUES (($1::jsonb->>'n')::bigint)"),
      context());
  JobResult result = handler(job, {});
  EXPECT_EQ(result.outcome, Outcome::kDead);
  EXPECT_NE(result.error.find("invalid input syntax"), std::string::npos) << result.error;
  EXPECT_FALSE(result.completion_written);  // the completer records the failure

  handler = make_sql_handler(
      sql_config("SELECT * FROM no_such_table WHERE $2 > 0 AND $1 IS NOT NULL"), context());
  result = handler(job, {});
  EXPECT_EQ(result.outcome, Outcome::kRetry);
  EXPECT_NE(result.error.find("no_such_table"), std::string::npos) << result.error;
  EXPECT_EQ(schema_.query("SELECT status FROM {jobs}"), "running");  // rolled back
}

TEST_F(SqlHandlerTest, TimeoutCancelsTheStatement) {
  schema_.exec("INSERT INTO {jobs} (type) VALUES ('t')");
  const Job job = claim();
  HandlerConfig config = sql_config("SELECT pg_sleep(10), $1::jsonb, $2::bigint");
  config.timeout = 200ms;
  const auto start = std::chrono::steady_clock::now();
  const JobResult result = make_sql_handler(config, context())(job, {});
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_EQ(result.outcome, Outcome::kRetry);
  EXPECT_NE(result.error.find("statement timeout"), std::string::npos) << result.error;
}

TEST_F(SqlHandlerTest, StopRequestCancelsAndReleases) {
  schema_.exec("INSERT INTO {jobs} (type) VALUES ('t')");
  const Job job = claim();
  std::stop_source stop;
  // The schema's name marks this test's statement among those of tests running beside it.
  const std::string statement =
      "SELECT pg_sleep(10), $1::jsonb, $2::bigint, '" + schema_.name() + "' AS marker";
  std::thread stopper([&] {
    // Cancel once the statement is running on the server.
    testing::wait_until(
        [&] {
          return schema_.query(
                     "SELECT count(*) FROM pg_stat_activity WHERE query LIKE "
                     "'SELECT pg_sleep(10)%" +
                     schema_.name() + "%' AND state = 'active'") != "0";
        },
        10s);
    stop.request_stop();
  });
  const JobResult result =
      make_sql_handler(sql_config(statement), context())(job, stop.get_token());
  stopper.join();
  EXPECT_EQ(result.outcome, Outcome::kReleased) << result.error;
}

// A database outage is not a job failure: the daemon's session to the server ended under
// the statement (pg_terminate_backend, as a restart or a failover would) releases the job
// without counting an attempt. With max_attempts 1 a counted attempt would make it dead.
TEST_F(SqlHandlerTest, ALostSessionReleasesTheJobWithoutCountingAnAttempt) {
  const std::string naps = "\"" + schema_.name() + "\".naps";
  schema_.exec("CREATE TABLE " + naps + " (seconds float8)");
  schema_.exec("INSERT INTO " + naps + " VALUES (60)");
  schema_.exec("INSERT INTO {jobs} (type, max_attempts) VALUES ('t', 1)");
  Config config = schema_.config();
  // The schema's name marks this test's statement among those of tests running beside it.
  config.handlers["t"] = sql_config("INSERT INTO " + side_table() +
                                    " (job_id) SELECT $2 FROM pg_sleep((SELECT seconds FROM " +
                                    naps + ")) WHERE $1 IS NOT NULL");
  Engine engine(config);
  engine.start();
  // In pg_sleep, its 60 s read: a session still parsing the statement (active, with its
  // text) would read the 0 written next and end before it is terminated.
  const std::string sleeping =
      "FROM pg_stat_activity WHERE application_name LIKE 'pgjobd%' AND state = 'active' AND "
      "wait_event = 'PgSleep' AND pid <> pg_backend_pid() AND "
      "query LIKE '%pg_sleep%" +
      schema_.name() + "%'";
  ASSERT_TRUE(testing::wait_until(
      [&] { return schema_.query("SELECT count(*) " + sleeping) == "1"; }, 20s));
  schema_.exec("UPDATE " + naps + " SET seconds = 0");  // the next run ends at once
  EXPECT_EQ(schema_.query("SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) " + sleeping),
            "1");
  ASSERT_TRUE(testing::wait_until(
      [&] { return schema_.count("status IN ('done', 'failed', 'dead')") == 1; }, 20s));
  EXPECT_EQ(schema_.query("SELECT status || ' ' || coalesce(last_error, '') FROM {jobs}"), "done ");
  EXPECT_EQ(schema_.query("SELECT attempts FROM {jobs}"), "1");  // the run that succeeded
  EXPECT_EQ(schema_.query("SELECT count(*) FROM " + side_table()), "1");
  engine.drain();
}

TEST_F(SqlHandlerTest, EngineRunsSqlJobsExactlyOnce) {
  schema_.insert_jobs("t", 200);
  Config config = schema_.config();
  config.handlers["t"] = sql_config(insert_side_effect());
  config.retention.done = Millis(0);  // delete at completion, in the same transaction
  Engine engine(config);
  engine.start();
  ASSERT_TRUE(testing::wait_until([&] { return schema_.count() == 0; }, 30s));
  engine.drain();
  EXPECT_EQ(schema_.query("SELECT count(*) || ' ' || count(DISTINCT job_id) FROM " + side_table()),
            "200 200");
}

}  // namespace
}  // namespace pgjobd
