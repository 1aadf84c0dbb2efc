// Reading and awaiting a job's outcome (README "Results and workflows"): pgjobd_job_result
// and its grants; the pgjobd_finished notification a daemon sends for the jobs it ends, from
// a session of its own after their commit (never inside the completion transaction), in
// payloads PostgreSQL accepts however many jobs a batch ended; pgjobd_cancel's own.

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <set>

#include "db/connection.hpp"
#include "db/pg_job_store.hpp"
#include "db/sql_text.hpp"
#include "engine/finished_notifier.hpp"
#include "pgjobd/engine.hpp"
#include "support/app_session.hpp"
#include "support/grants_roles.hpp"
#include "support/test_database.hpp"

namespace pgjobd {
namespace {

using testing::Session;
using testing::TestSchema;
using namespace std::chrono_literals;

// The ids pgjobd_finished announced for one schema, with the pid of the session that sent
// each, and that session's application_name read when the notification arrived.
class FinishedListener : public pqxx::notification_receiver {
 public:
  FinishedListener(pqxx::connection_base& conn, std::string schema)
      : pqxx::notification_receiver(conn, "pgjobd_finished"), schema_(std::move(schema)) {}

  void operator()(const std::string& payload, int backend_pid) override {
    const nlohmann::json json = nlohmann::json::parse(payload);
    if (json.at("schema") != schema_) return;  // another test's schema
    ++payloads_;
    EXPECT_LT(payload.size(), 8000u);
    for (const auto& id : json.at("ids")) {
      const std::int64_t job = id.get<std::int64_t>();
      ids_.push_back(job);
      senders_[job] = backend_pid;
    }
  }

  // Reads notifications until `ids` were all announced or 20 s passed.
  bool await_ids(const std::set<std::int64_t>& ids) {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < deadline) {
      bool all = true;
      for (const std::int64_t id : ids) all = all && senders_.count(id) > 0;
      if (all) return true;
      conn().await_notification(0, 100000);
    }
    return false;
  }
  // Reads what arrives within `wait`.
  void drain(std::chrono::milliseconds wait) {
    const auto deadline = std::chrono::steady_clock::now() + wait;
    while (std::chrono::steady_clock::now() < deadline) conn().await_notification(0, 50000);
  }

  const std::vector<std::int64_t>& ids() const { return ids_; }
  int sender(std::int64_t id) const { return senders_.at(id); }
  int payloads() const { return payloads_; }

 private:
  std::string schema_;
  std::vector<std::int64_t> ids_;
  std::map<std::int64_t, int> senders_;
  int payloads_ = 0;
};

TEST(JobResult, ReadsStatusResultErrorAndEndAndNoRowForAnUnknownId) {
  TestSchema schema;
  const std::string done = schema.query(
      R"(INSERT INTO {jobs} (type, status, attempts, finished_at, result) VALUES ('a', 'done', 1,
         '2030-01-02 03:04:05Z', '{"sum": 3}') RETURNING id)");
  const std::string dead = schema.query(
      "INSERT INTO {jobs} (type, status, attempts, finished_at, last_error) VALUES ('a', 'dead', "
      "5, now(), 'exit 3') RETURNING id");
  const std::string pending = schema.query("INSERT INTO {jobs} (type) VALUES ('a') RETURNING id");
  Session app(schema);
  const std::string row =
      "SELECT concat_ws('|', status, coalesce(result::text, '-'), coalesce(last_error, '-'), "
      "coalesce(finished_at::text, '-')) FROM {s}.pgjobd_job_result(";
  app.query("SET TIME ZONE 'UTC'");
  EXPECT_EQ(app.query(row + done + ")"), R"(done|{"sum": 3}|-|2030-01-02 03:04:05+00)");
  EXPECT_EQ(app.query(row + dead + ")").substr(0, 14), "dead|-|exit 3|");
  EXPECT_EQ(app.query(row + pending + ")"), "pending|-|-|-");
  EXPECT_EQ(app.query("SELECT count(*) FROM {s}.pgjobd_job_result(987654321)"), "0");
  EXPECT_EQ(app.query("SELECT count(*) FROM {s}.pgjobd_job_result(NULL)"), "0");
  // The columns are named as the README shows them.
  EXPECT_EQ(app.query("SELECT result ->> 'sum' FROM {s}.pgjobd_job_result(" + done + ")"), "3");
}

// sql/grants.sql: the producer (which may only enqueue), the runtime and the operator roles
// read outcomes through the function; a role without the grant may not.
TEST(JobResult, TheGrantsFileLetsProducerRuntimeAndOperatorCallIt) {
  TestSchema schema;
  const testing::GrantsRoles roles(schema, "jr");
  ASSERT_TRUE(roles.applied()) << roles.command();
  const std::string stranger = "pgjobd_stranger_jr_" + std::to_string(getpid());
  schema.exec("DROP ROLE IF EXISTS " + quote_identifier(stranger));
  schema.exec("CREATE ROLE " + quote_identifier(stranger) + " LOGIN");
  schema.exec("GRANT USAGE ON SCHEMA " + quote_identifier(schema.name()) + " TO " +
              quote_identifier(stranger));
  {
    Session app(schema, testing::test_database_url_for_role(roles.producer));
    const std::string id = app.query("SELECT {s}.pgjobd_enqueue('a')");
    EXPECT_EQ(app.query("SELECT status FROM {s}.pgjobd_job_result(" + id + ")"), "pending");
    EXPECT_EQ(app.query("SELECT count(*) FROM {s}.pgjobd_job_result(0)"), "0");
    EXPECT_EQ(app.error("SELECT count(*) FROM {s}.jobs").substr(0, 5), "42501");
  }
  for (const auto& role : {roles.runtime, roles.operator_role}) {
    SCOPED_TRACE(role);
    Session app(schema, testing::test_database_url_for_role(role));
    EXPECT_EQ(app.query("SELECT status FROM {s}.pgjobd_job_result(1)"), "pending");
  }
  {
    Session app(schema, testing::test_database_url_for_role(stranger));
    EXPECT_EQ(app.error("SELECT * FROM {s}.pgjobd_job_result(1)").substr(0, 5), "42501");
  }
  schema.exec("DROP OWNED BY " + quote_identifier(stranger));
  schema.exec("DROP ROLE " + quote_identifier(stranger));
}

// The daemon announces a done, a dead and an sql handler's job (whose handler commits its
// end itself) from its notifier session, not from the completer's or the sql handler's: the
// NOTIFY is never part of a completion transaction. When the notification arrives the end
// is committed, as pgjobd_job_result shows.
TEST(FinishedNotifications, TheDaemonAnnouncesEndedJobsFromItsOwnSessionAfterTheCommit) {
  TestSchema schema;
  Config config = schema.config();
  HandlerConfig sql;
  sql.kind = HandlerConfig::Kind::kSql;
  sql.sql = "SELECT $1::jsonb, $2::bigint";
  config.handlers["by_sql"] = sql;
  Session app(schema);
  FinishedListener listener(app.connection(), schema.name());
  app.query("SELECT 1");  // sends the LISTEN
  Engine engine(config);
  engine.register_handler("ok", [](const Job&, std::stop_token) { return JobResult::done(); });
  engine.register_handler("bad", [](const Job&, std::stop_token) { return JobResult::dead("no"); });
  engine.register_handler("again", [](const Job& job, std::stop_token) {
    return job.attempt < 2 ? JobResult::retry("once more") : JobResult::done();
  });
  engine.start();
  std::map<std::string, std::int64_t> ids;
  for (const char* type : {"ok", "bad", "by_sql", "again"}) {
    ids[type] = std::stoll(app.query(std::string("SELECT {s}.pgjobd_enqueue('") + type + "')"));
  }
  ASSERT_TRUE(listener.await_ids({ids["ok"], ids["bad"], ids["by_sql"], ids["again"]}))
      << testing::table_summary(schema);
  // Each arrived once: a retry is not an end.
  listener.drain(200ms);
  EXPECT_EQ(listener.ids().size(), 4u);
  std::map<std::string, std::string> statuses;
  for (const auto& [type, id] : ids) {
    statuses[type] =
        app.query("SELECT status FROM {s}.pgjobd_job_result(" + std::to_string(id) + ")");
    const std::string sender =
        app.query("SELECT application_name FROM pg_stat_activity WHERE pid = " +
                  std::to_string(listener.sender(id)));
    EXPECT_EQ(sender, "pgjobd finished notifier") << type;
  }
  EXPECT_EQ(statuses, (std::map<std::string, std::string>{
                          {"again", "done"}, {"bad", "dead"}, {"by_sql", "done"}, {"ok", "done"}}));
  engine.drain();
}

TEST(FinishedNotifications, NoneWhenTheSwitchIsOff) {
  TestSchema schema;
  Config config = schema.config();
  config.worker.notify_finished = false;
  Session app(schema);
  FinishedListener listener(app.connection(), schema.name());
  app.query("SELECT 1");
  Engine engine(config);
  engine.register_handler("ok", [](const Job&, std::stop_token) { return JobResult::done(); });
  engine.start();
  app.query("SELECT {s}.pgjobd_enqueue('ok')");
  ASSERT_TRUE(testing::wait_until([&] { return schema.count("status = 'done'") == 1; }, 20s));
  listener.drain(300ms);
  EXPECT_TRUE(listener.ids().empty());
  engine.drain();
}

// PostgreSQL refuses a payload of 8000 bytes or more: 3000 ids of 19 digits, one batch, are
// sent in several payloads, in one transaction, and every id arrives.
TEST(FinishedNotifications, ALargeBatchIsSplitIntoPayloadsPostgresAccepts) {
  TestSchema schema;
  Session app(schema);
  FinishedListener listener(app.connection(), schema.name());
  app.query("SELECT 1");
  std::vector<std::int64_t> ids;
  for (std::int64_t i = 0; i < 3000; ++i) ids.push_back(1'000'000'000'000'000'000 + i);
  PgJobStore store(schema.config().database, "finished notifier");
  store.announce_finished(FinishedNotifier::payloads(schema.name(), ids));
  ASSERT_TRUE(listener.await_ids({ids.front(), ids.back()}));
  listener.drain(100ms);
  EXPECT_EQ(listener.ids(), ids);
  EXPECT_GE(listener.payloads(), 8);
}

// pgjobd_cancel ends a pending job itself: it announces it. A running one is only marked
// (its daemon ends it, and announces it then).
TEST(FinishedNotifications, ACancelThatEndsAJobAnnouncesIt) {
  TestSchema schema;
  const std::string pending = schema.query("INSERT INTO {jobs} (type) VALUES ('a') RETURNING id");
  const std::string running = schema.query(
      "INSERT INTO {jobs} (type, status, locked_by, locked_until, attempts) VALUES ('a', "
      "'running', 'w', now() + interval '1 hour', 1) RETURNING id");
  Session app(schema);
  FinishedListener listener(app.connection(), schema.name());
  app.query("SELECT 1");
  Session ops(schema);
  EXPECT_EQ(ops.query("SELECT {s}.pgjobd_cancel(" + running + ")"), "running");
  EXPECT_EQ(ops.query("SELECT status FROM {s}.pgjobd_cancel_many(ARRAY[" + pending + "])"),
            "cancelled");
  ASSERT_TRUE(listener.await_ids({std::stoll(pending)}));
  listener.drain(100ms);
  EXPECT_EQ(listener.ids(), std::vector<std::int64_t>{std::stoll(pending)});
}

}  // namespace
}  // namespace pgjobd
