// Dead letters against PostgreSQL (sql/functions/pgjobd_dead_letter.sql, README "Dead
// letters"): every path to dead enqueues the dead-letter job in the same transaction, a
// dead-letter job that dies enqueues none, the queue default and override, the runtime
// role's rights, and the daemons' sync of handlers.TYPE.dead_letter (start, reload, two
// daemons that disagree).

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "db/pg_job_store.hpp"
#include "engine/dead_letter_sync.hpp"
#include "pgjobd/engine.hpp"
#include "support/claims.hpp"
#include "support/log_capture.hpp"
#include "support/test_database.hpp"

namespace pgjobd {
namespace {

using testing::claim_of;
using testing::TestSchema;
using namespace std::chrono_literals;

void route(TestSchema& schema, const std::string& type, const std::string& target,
           const std::string& queue_sql = "NULL") {
  schema.exec("INSERT INTO " + schema.qualified("pgjobd_dead_letters") +
              " (type, target_type, target_queue) VALUES ('" + type + "', '" + target + "', " +
              queue_sql + ")");
}

// The one job claimed of `type` (fails the test when there is not exactly one).
Job claim_one(PgJobStore& store, const std::string& type, const std::string& queue = "default") {
  const auto jobs = store.claim(claim_of(1, {type}, "w", queue));
  EXPECT_EQ(jobs.size(), 1u);
  return jobs.empty() ? Job{} : jobs[0];
}

void die(PgJobStore& store, const Job& job, const std::string& error) {
  EXPECT_EQ(store.complete({{{job.id, job.attempt}, Outcome::kDead, error, Millis(0)}}, "w", false)
                .written,
            1);
}

// The dead-letter jobs: "type queue dead_letter_of" per row, by id.
std::vector<std::string> dead_letter_jobs(TestSchema& schema) {
  return schema.column(
      "SELECT type || ' ' || queue || ' ' || dead_letter_of FROM {jobs} "
      "WHERE dead_letter_of IS NOT NULL ORDER BY id");
}

TEST(DeadLetter, AHandlersDeadResultEnqueuesTheDeadLetterJobWithTheDeadJob) {
  TestSchema schema;
  route(schema, "mail", "mail_dead");
  schema.exec(R"(INSERT INTO {jobs} (type, queue, payload) VALUES ('mail', 'q1', '{"to": "x"}'))");
  PgJobStore store(schema.config().database, "test");
  const Job job = claim_one(store, "mail", "q1");
  die(store, job, "fatal: no such user");
  const std::string id = std::to_string(job.id);
  ASSERT_EQ(dead_letter_jobs(schema), std::vector<std::string>{"mail_dead q1 " + id});
  const auto payload = nlohmann::json::parse(
      schema.query("SELECT payload::text FROM {jobs} WHERE dead_letter_of = " + id));
  EXPECT_EQ(payload, nlohmann::json::parse(R"({"dead_job": {"id": )" + id +
                                           R"(, "type": "mail", "queue": "q1",
      "payload": {"to": "x"}, "attempts": 1, "last_error": "fatal: no such user"}})"));
  EXPECT_EQ(schema.query("SELECT status FROM {jobs} WHERE dead_letter_of = " + id), "pending");
}

// Used-up attempts and oversized payloads reach the table as a dead completion, like a
// handler's dead result (JobRunner, Fetcher); the rescue is the one other path.
TEST(DeadLetter, TheLeaseRescueEnqueuesOneIntoTheConfiguredQueue) {
  TestSchema schema;
  route(schema, "a", "a_dead", "'dlq'");
  schema.exec("INSERT INTO {jobs} (type, max_attempts) VALUES ('a', 1)");
  PgJobStore store(schema.config().database, "test");
  const Job job = claim_one(store, "a");
  // Its owner vanished: the rescue kills it (attempts used up).
  schema.exec("UPDATE {jobs} SET locked_until = now() - interval '1 second' WHERE id = " +
              std::to_string(job.id));
  EXPECT_EQ(store.lead_and_rescue("rescuer", Millis(15000), schema.config().retry, 100).dead, 1);
  EXPECT_EQ(dead_letter_jobs(schema),
            (std::vector<std::string>{"a_dead dlq " + std::to_string(job.id)}));
  EXPECT_EQ(schema.query("SELECT payload #>> '{dead_job,last_error}' LIKE 'rescued: lease%' "
                         "FROM {jobs} WHERE dead_letter_of IS NOT NULL"),
            "t");
}

TEST(DeadLetter, ADeadLetterJobThatDiesEnqueuesNoOtherEvenWhenItsTypeNamesItself) {
  TestSchema schema;
  route(schema, "a", "a");
  schema.insert_jobs("a", 1);
  PgJobStore store(schema.config().database, "test");
  const Job first = claim_one(store, "a");
  die(store, first, "fatal");
  const Job letter = claim_one(store, "a");
  EXPECT_EQ(
      schema.query("SELECT dead_letter_of FROM {jobs} WHERE id = " + std::to_string(letter.id)),
      std::to_string(first.id));
  die(store, letter, "fatal again");
  EXPECT_EQ(schema.count(), 2) << testing::table_summary(schema);
}

TEST(DeadLetter, OnlyRowsBecomingDeadOfATypeWithADeadLetterEnqueue) {
  TestSchema schema;
  route(schema, "a", "a_dead");
  schema.exec("INSERT INTO {jobs} (type) VALUES ('a'), ('b')");
  PgJobStore store(schema.config().database, "test");
  const Job a = claim_one(store, "a");
  store.complete({{{a.id, 1}, Outcome::kDone, "", Millis(0)}}, "w", false);
  die(store, claim_one(store, "b"), "fatal");  // no dead_letter for b
  // A dead row updated again (its status set once more) is not "becoming dead".
  schema.exec("UPDATE {jobs} SET status = 'dead' WHERE type = 'a'");
  schema.exec("UPDATE {jobs} SET status = 'dead', last_error = 'again' WHERE type = 'a'");
  EXPECT_EQ(dead_letter_jobs(schema).size(), 1u) << testing::table_summary(schema);
}

// The daemons' runtime role (sql/grants.sql) marks jobs dead; the trigger's insert is the
// owner's, and the role may write pgjobd_dead_letters itself (the sync).
TEST(DeadLetter, TheRuntimeRoleEnqueuesThemAndSyncs) {
  TestSchema schema;
  const std::string role = testing::create_runtime_role(schema, "pgjobd_dl_");
  Config config = schema.config();
  config.database.url = testing::test_database_url_for_role(role);
  {
    PgJobStore store(config.database, "test");
    EXPECT_TRUE(store.sync_dead_letters({{"a", {"a_dead", ""}}}, {"a"}, "d1").empty());
    schema.insert_jobs("a", 1);
    die(store, claim_one(store, "a"), "fatal");
  }
  EXPECT_EQ(dead_letter_jobs(schema).size(), 1u) << testing::table_summary(schema);
}

// "type target_type target_queue written_by" per row.
std::vector<std::string> routes(TestSchema& schema) {
  return schema.column(
      "SELECT concat_ws(' ', type, target_type, coalesce(target_queue, '-'), "
      "written_by) FROM " +
      schema.qualified("pgjobd_dead_letters") + " ORDER BY type");
}

TEST(DeadLetter, SyncWritesTheServedTypesAndReportsWhatAnotherDaemonWroteDifferently) {
  TestSchema schema;
  PgJobStore store(schema.config().database, "test");
  route(schema, "b", "b_dead");  // written by another daemon ('' writer)
  route(schema, "c", "c_dead");  // a type this daemon does not serve
  auto overwritten = store.sync_dead_letters({{"a", {"a_dead", ""}}}, {"a", "b"}, "d1");
  ASSERT_EQ(overwritten.size(), 1u);
  EXPECT_EQ(overwritten[0].type, "b");
  EXPECT_EQ(overwritten[0].change, "removed");
  EXPECT_EQ(overwritten[0].previous.type, "b_dead");
  EXPECT_EQ(routes(schema), (std::vector<std::string>{"a a_dead - d1", "c c_dead - "}));

  // Another daemon writes the same: nothing to report, the row stays d1's.
  EXPECT_TRUE(store.sync_dead_letters({{"a", {"a_dead", ""}}}, {"a"}, "d2").empty());
  // ... and then something else: reported, with what it replaced.
  overwritten = store.sync_dead_letters({{"a", {"a_other", "dlq"}}}, {"a"}, "d2");
  ASSERT_EQ(overwritten.size(), 1u);
  EXPECT_EQ(overwritten[0].change, "changed");
  EXPECT_EQ(overwritten[0].previous_writer, "d1");
  EXPECT_EQ(routes(schema), (std::vector<std::string>{"a a_other dlq d2", "c c_dead - "}));
  // A daemon changing its own row reports nothing.
  EXPECT_TRUE(store.sync_dead_letters({{"a", {"a_dead", ""}}}, {"a"}, "d2").empty());
}

TEST(DeadLetter, TheSyncWarnsWhenItOverwritesAnotherDaemonsSetting) {
  TestSchema schema;
  route(schema, "a", "a_dead");
  std::map<std::string, HandlerConfig> handlers;
  handlers["a"].dead_letter = DeadLetterConfig{"a_other", ""};
  Metrics metrics({"default"}, {"a"});
  Health health;
  MaintenanceCalls calls(metrics, health);
  testing::LogCapture log;
  DeadLetterSync sync("d1", std::make_shared<PgJobStore>(schema.config().database, "test"),
                      handlers);
  sync.run(MaintenanceTask::Clock::now(), {}, calls);
  EXPECT_FALSE(calls.last_failed());
  EXPECT_TRUE(log.contains("type a now enqueues a_other, replacing a_dead")) << log.all();
}

TEST(DeadLetter, ADaemonWritesItsSettingAtStartAndAReloadRemovesIt) {
  TestSchema schema;
  Config config = schema.config();
  HandlerConfig noop;
  noop.builtin = "noop";
  config.handlers["a"] = noop;
  config.handlers["a"].dead_letter = DeadLetterConfig{"a_dead", "dlq"};
  Engine engine(config);
  engine.start();
  EXPECT_TRUE(testing::wait_until(
      [&] { return routes(schema).size() == 1 && routes(schema)[0].starts_with("a a_dead dlq"); },
      20s));
  config.handlers["a"].dead_letter.reset();
  engine.reload(config);
  EXPECT_TRUE(testing::wait_until([&] { return routes(schema).empty(); }, 20s));
  engine.drain();
}

}  // namespace
}  // namespace pgjobd
