// Cancel and the history of attempts (sql/005_cancel_history.up.sql,
// sql/functions/pgjobd_cancel*.sql): pgjobd_cancel on every status, what the daemon's statements
// (heartbeat, completion, rescue) make of a cancel request, cancels racing completions, and
// attempt_log with pgjobd_job_attempts.

#include <gtest/gtest.h>

#include <atomic>
#include <pqxx/pqxx>
#include <string>
#include <thread>
#include <vector>

#include "db/pg_job_store.hpp"
#include "support/app_session.hpp"
#include "support/claims.hpp"
#include "support/schema_notifications.hpp"
#include "support/test_database.hpp"
#include "support/test_text.hpp"

namespace pgjobd {
namespace {

using testing::Session;
using testing::TestSchema;

using testing::claim_of;
using testing::kLease;

using testing::contains;

std::string id_text(std::int64_t id) { return std::to_string(id); }

std::string status_of(TestSchema& schema, std::int64_t id) {
  return schema.query("SELECT status FROM {jobs} WHERE id = " + id_text(id));
}

std::int64_t insert_job(TestSchema& schema, const std::string& columns = "",
                        const std::string& values = "") {
  return std::stoll(schema.query("INSERT INTO {jobs} (type" + columns + ") VALUES ('a'" + values +
                                 ") RETURNING id"));
}

TEST(Cancel, PendingAndFailedJobsAreCancelledAtOnce) {
  TestSchema schema;
  Session app(schema);
  const auto pending = insert_job(schema);
  const auto failed = insert_job(schema, ", status, attempts, last_error", ", 'failed', 1, 'boom'");
  EXPECT_EQ(app.query("SELECT {s}.pgjobd_cancel(" + id_text(pending) + ", 'not needed')"),
            "cancelled");
  EXPECT_EQ(app.query("SELECT {s}.pgjobd_cancel(" + id_text(failed) + ")"), "cancelled");
  EXPECT_EQ(schema.query("SELECT last_error FROM {jobs} WHERE id = " + id_text(pending)),
            "cancelled: not needed");
  EXPECT_EQ(schema.query("SELECT last_error FROM {jobs} WHERE id = " + id_text(failed)),
            "cancelled");
  EXPECT_EQ(schema.count("status = 'cancelled' AND finished_at IS NOT NULL"), 2);
  // Idempotent: cancelling again says so and changes nothing.
  EXPECT_EQ(app.query("SELECT {s}.pgjobd_cancel(" + id_text(pending) + ", 'again')"), "cancelled");
  EXPECT_EQ(schema.query("SELECT last_error FROM {jobs} WHERE id = " + id_text(pending)),
            "cancelled: not needed");
  PgJobStore store(schema.config().database, "test");
  EXPECT_TRUE(store.claim(claim_of(10)).empty());
}

TEST(Cancel, FinishedJobsAreLeftAsTheyAre) {
  TestSchema schema;
  Session app(schema);
  for (const char* status : {"done", "dead"}) {
    SCOPED_TRACE(status);
    const auto id = insert_job(schema, ", status, attempts, finished_at",
                               std::string(", '") + status + "', 1, now()");
    EXPECT_EQ(app.query("SELECT {s}.pgjobd_cancel(" + id_text(id) + ", 'late')"), status);
    EXPECT_EQ(status_of(schema, id), status);
    EXPECT_EQ(schema.count("cancel_requested_at IS NOT NULL"), 0);
  }
}

TEST(Cancel, RefusesBadArgumentsNamingThem) {
  TestSchema schema;
  Session app(schema);
  const auto id = insert_job(schema);
  const std::string null_id = app.error("SELECT {s}.pgjobd_cancel(NULL)");
  EXPECT_TRUE(contains(null_id, "22004") && contains(null_id, "pgjobd_cancel: id must not be NULL"))
      << null_id;
  const std::string unknown = app.error("SELECT {s}.pgjobd_cancel(987654321)");
  EXPECT_TRUE(contains(unknown, "P0002") && contains(unknown, "job 987654321 does not exist"))
      << unknown;
  const std::string long_reason =
      app.error("SELECT {s}.pgjobd_cancel(" + id_text(id) + ", repeat('x', 8193))");
  EXPECT_TRUE(contains(long_reason, "22023") &&
              contains(long_reason, "reason must be at most 8192 bytes long, not 8193"))
      << long_reason;
  EXPECT_EQ(status_of(schema, id), "pending");
}

// A running job is only marked: its daemon must stop it. The mark reaches the daemon by
// NOTIFY (on pgjobd_cancel, with the schema as payload) and by the heartbeat's answer.
TEST(Cancel, RunningJobIsMarkedNotifiedAndReportedByTheHeartbeat) {
  TestSchema schema;
  schema.insert_jobs("a", 2);
  PgJobStore store(schema.config().database, "test");
  const auto jobs = store.claim(claim_of(2));
  ASSERT_EQ(jobs.size(), 2u);

  Session listener(schema);
  testing::SchemaNotifications receiver(listener.connection(), "pgjobd_cancel", schema.name());
  listener.query("SELECT 1");  // the LISTEN is sent with the next statement

  Session app(schema);
  EXPECT_EQ(app.query("SELECT {s}.pgjobd_cancel(" + id_text(jobs[0].id) + ", 'first')"), "running");
  receiver.await_first();
  EXPECT_EQ(receiver.count(), 1);
  EXPECT_EQ(status_of(schema, jobs[0].id), "running");
  // A second request keeps the first one's reason.
  EXPECT_EQ(app.query("SELECT {s}.pgjobd_cancel(" + id_text(jobs[0].id) + ", 'second')"),
            "running");
  EXPECT_EQ(schema.query("SELECT cancel_reason FROM {jobs} WHERE id = " + id_text(jobs[0].id)),
            "first");

  const auto report = store.heartbeat({{jobs[0].id, 1}, {jobs[1].id, 1}}, "w", kLease);
  EXPECT_EQ(report.kept.size(), 2u);
  EXPECT_EQ(report.cancel_requested, (std::vector<JobAttempt>{{jobs[0].id, 1}}));
}

TEST(Cancel, RolledBackCancelCancelsNothing) {
  TestSchema schema;
  const auto pending = insert_job(schema);
  const auto running = insert_job(schema);
  PgJobStore store(schema.config().database, "test");
  schema.exec(
      "UPDATE {jobs} SET status = 'pending', run_at = now() + interval '1 hour' WHERE id = " +
      id_text(pending));
  const auto jobs = store.claim(claim_of(1));
  ASSERT_EQ(jobs.size(), 1u);
  ASSERT_EQ(jobs[0].id, running);
  Session app(schema);
  {
    pqxx::work txn(app.connection());
    for (const auto id : {pending, running}) {
      txn.exec("SELECT " + quote_identifier(schema.name()) + ".pgjobd_cancel(" + id_text(id) + ")");
    }
    txn.abort();
  }
  EXPECT_EQ(status_of(schema, pending), "pending");
  EXPECT_EQ(schema.count("cancel_requested_at IS NOT NULL"), 0);
  EXPECT_TRUE(store.heartbeat({{running, 1}}, "w", kLease).cancel_requested.empty());
}

// Whatever the daemon reports for a job whose cancel was requested, it ends cancelled with
// the request's reason, never retried; except done, which stands.
TEST(Cancel, CompletionOfAMarkedJobEndsItCancelledUnlessDone) {
  TestSchema schema;
  schema.insert_jobs("a", 5);
  PgJobStore store(schema.config().database, "test");
  const auto jobs = store.claim(claim_of(5));
  ASSERT_EQ(jobs.size(), 5u);
  Session app(schema);
  for (const auto& job : jobs) {
    ASSERT_EQ(app.query("SELECT {s}.pgjobd_cancel(" + id_text(job.id) + ", 'stop it')"), "running");
  }
  const auto report =
      store.complete({{{jobs[0].id, 1}, Outcome::kRetry, "boom", Millis(10)},
                      {{jobs[1].id, 1}, Outcome::kDead, "bad", Millis(0)},
                      {{jobs[2].id, 1}, Outcome::kReleased, {}, Millis(0)},
                      {{jobs[3].id, 1}, Outcome::kCancelled, "cancelled", Millis(0)},
                      {{jobs[4].id, 1}, Outcome::kDone, {}, Millis(0)}},
                     "w", false);
  EXPECT_EQ(report.written, 5);
  for (int i = 0; i < 4; ++i) {
    SCOPED_TRACE(i);
    const std::string id = id_text(jobs[static_cast<std::size_t>(i)].id);
    EXPECT_EQ(schema.query("SELECT status || ' ' || attempts || ' ' || last_error || ' ' || "
                           "(finished_at IS NOT NULL) || ' ' || (errors -> -1 ->> 'error') "
                           "FROM {jobs} WHERE id = " +
                           id),
              "cancelled 1 cancelled: stop it true cancelled: stop it");
    EXPECT_EQ(schema.query("SELECT attempt_log -> -1 ->> 'outcome' FROM {jobs} WHERE id = " + id),
              "cancelled");
  }
  EXPECT_EQ(status_of(schema, jobs[4].id), "done");
  EXPECT_TRUE(store.claim(claim_of(5)).empty());
}

// Cancels racing completions, job by job: with a done completion every job ends done
// (cancel returns 'running' before it, 'done' after); with a failure every job ends
// cancelled (the completion reads the mark, or the cancel finds the job failed). None is
// left running, pending or failed, and each cancel's answer agrees with the outcome.
TEST(Cancel, RacingCompletionsEndEveryJobConsistently) {
  for (const Outcome outcome : {Outcome::kDone, Outcome::kRetry}) {
    SCOPED_TRACE(to_string(outcome));
    TestSchema schema;
    constexpr int kJobs = 200;
    schema.insert_jobs("a", kJobs);
    PgJobStore store(schema.config().database, "test");
    const auto jobs = store.claim(claim_of(kJobs));
    ASSERT_EQ(jobs.size(), static_cast<std::size_t>(kJobs));
    std::vector<std::string> answers(jobs.size());
    std::atomic<bool> go{false};
    std::thread canceller([&] {
      Session app(schema);
      while (!go) std::this_thread::yield();
      for (std::size_t i = 0; i < jobs.size(); ++i) {
        answers[i] = app.query("SELECT {s}.pgjobd_cancel(" + id_text(jobs[i].id) + ", 'race')");
      }
    });
    go = true;
    for (const auto& job : jobs) {
      store.complete({{{job.id, 1}, outcome, "boom", Millis(60000)}}, "w", false);
    }
    canceller.join();
    const std::string expected = outcome == Outcome::kDone ? "done" : "cancelled";
    EXPECT_EQ(schema.count("status = '" + expected + "'"), kJobs) << testing::table_summary(schema);
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      if (outcome == Outcome::kDone) {
        EXPECT_TRUE(answers[i] == "running" || answers[i] == "done") << answers[i];
      } else {
        EXPECT_TRUE(answers[i] == "running" || answers[i] == "cancelled") << answers[i];
      }
    }
  }
}

// A job whose daemon died (SIGKILL: no completion, no heartbeat) after its cancel was
// requested: the rescuer ends it cancelled instead of retrying it, attempts left or not.
TEST(Cancel, RescueEndsAMarkedJobOfADeadDaemonCancelled) {
  TestSchema schema;
  schema.insert_jobs("a", 2);
  PgJobStore crashed(schema.config().database, "crashed");
  const auto jobs = crashed.claim(claim_of(2, {"a"}, "crashed"));
  ASSERT_EQ(jobs.size(), 2u);
  Session app(schema);
  ASSERT_EQ(app.query("SELECT {s}.pgjobd_cancel(" + id_text(jobs[0].id) + ", 'no longer wanted')"),
            "running");
  schema.exec("UPDATE {jobs} SET locked_until = now() - interval '1 second'");
  PgJobStore rescuer(schema.config().database, "rescuer");
  const auto report = rescuer.lead_and_rescue("rescuer", Millis(15000), schema.config().retry, 100);
  EXPECT_EQ(report.cancelled, 1);
  EXPECT_EQ(report.failed, 1);
  EXPECT_EQ(schema.query("SELECT status || ' ' || last_error || ' ' || (finished_at IS NOT NULL) "
                         "FROM {jobs} WHERE id = " +
                         id_text(jobs[0].id)),
            "cancelled cancelled: no longer wanted (its daemon stopped: lease expired) true");
  EXPECT_EQ(schema.query("SELECT attempt_log -> -1 ->> 'outcome' FROM {jobs} WHERE id = " +
                         id_text(jobs[0].id)),
            "lease_expired");
  EXPECT_EQ(status_of(schema, jobs[1].id), "failed");
}

// The bulk forms answer per id, in the array's order, and never fail the selection for one
// job: an unknown id has a NULL status, a job retry refuses is left as it is.
TEST(Cancel, BulkCancelAndRetryAnswerPerIdInOrder) {
  TestSchema schema;
  Session ops(schema);
  const auto pending = insert_job(schema);
  const auto done = insert_job(schema, ", status, attempts, finished_at", ", 'done', 1, now()");
  const auto dead = insert_job(schema, ", status, attempts, finished_at", ", 'dead', 5, now()");
  const std::string ids = "ARRAY[" + id_text(done) + ", 987654321, " + id_text(pending) + ", " +
                          id_text(dead) + "]::bigint[]";
  EXPECT_EQ(ops.column("SELECT id || ' ' || coalesce(status, '-') FROM {s}.pgjobd_cancel_many(" +
                       ids + ", 'bulk')"),
            (std::vector<std::string>{id_text(done) + " done", "987654321 -",
                                      id_text(pending) + " cancelled", id_text(dead) + " dead"}));
  EXPECT_EQ(schema.query("SELECT last_error FROM {jobs} WHERE id = " + id_text(pending)),
            "cancelled: bulk");
  EXPECT_EQ(ops.column("SELECT id || ' ' || coalesce(previous_status, '-') || ' ' || retried "
                       "FROM {s}.pgjobd_retry_many(" +
                       ids + ")"),
            (std::vector<std::string>{id_text(done) + " done false", "987654321 - false",
                                      id_text(pending) + " cancelled true",
                                      id_text(dead) + " dead true"}));
  EXPECT_EQ(schema.count("status = 'pending'"), 2);
  EXPECT_EQ(status_of(schema, done), "done");
  const std::string null_ids = ops.error("SELECT * FROM {s}.pgjobd_cancel_many(NULL)");
  EXPECT_TRUE(contains(null_ids, "pgjobd_cancel_many: ids must not be NULL")) << null_ids;
}

// A retried job starts clean: the cancel of its earlier attempt does not stop the next
// (the claim clears the request, which belongs to the attempt it was made during).
TEST(Cancel, ARetriedJobsNextAttemptHasNoCancelRequest) {
  TestSchema schema;
  schema.insert_jobs("a", 1);
  PgJobStore store(schema.config().database, "test");
  auto jobs = store.claim(claim_of(1));
  ASSERT_EQ(jobs.size(), 1u);
  Session app(schema);
  ASSERT_EQ(app.query("SELECT {s}.pgjobd_cancel(" + id_text(jobs[0].id) + ")"), "running");
  store.complete({{{jobs[0].id, 1}, Outcome::kCancelled, "cancelled", Millis(0)}}, "w", false);
  EXPECT_EQ(app.query("SELECT {s}.pgjobd_retry(" + id_text(jobs[0].id) + ")"), "cancelled");
  jobs = store.claim(claim_of(1));
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].attempt, 2);
  EXPECT_TRUE(store.heartbeat({{jobs[0].id, 2}}, "w", kLease).cancel_requested.empty());
  store.complete({{{jobs[0].id, 2}, Outcome::kRetry, "boom", Millis(0)}}, "w", false);
  EXPECT_EQ(status_of(schema, jobs[0].id), "failed");
}

// Who ran each attempt, when and how it ended: kept on the row for every outcome,
// answered by pgjobd_job_attempts with the error of each failed attempt.
TEST(AttemptHistory, EveryAttemptIsRecordedWithItsWorkerTimesAndOutcome) {
  TestSchema schema;
  schema.insert_jobs("a", 1);
  PgJobStore store(schema.config().database, "test");
  const auto first = store.claim(claim_of(1, {"a"}, "host-a:1:x"));
  ASSERT_EQ(first.size(), 1u);
  const std::int64_t id = first[0].id;
  store.complete({{{id, 1}, Outcome::kReleased, {}, Millis(0)}}, "host-a:1:x", false);
  ASSERT_EQ(store.claim(claim_of(1, {"a"}, "host-b:2:y")).size(), 1u);
  store.complete({{{id, 1}, Outcome::kRetry, "timeout talking to the API", Millis(0)}},
                 "host-b:2:y", false);
  ASSERT_EQ(store.claim(claim_of(1, {"a"}, "host-c:3:z")).size(), 1u);
  store.complete({{{id, 2}, Outcome::kDone, {}, Millis(0)}}, "host-c:3:z", false);

  Session ops(schema);
  const auto rows = ops.column(
      "SELECT attempt || ' ' || worker || ' ' || outcome || ' ' || coalesce(error, '-') || ' ' || "
      "(started_at <= ended_at) || ' ' || (seconds >= 0) FROM {s}.pgjobd_job_attempts(" +
      id_text(id) + ")");
  EXPECT_EQ(rows, (std::vector<std::string>{
                      "1 host-a:1:x released - true true",
                      "1 host-b:2:y failed timeout talking to the API true true",
                      "2 host-c:3:z done - true true",
                  }));
  EXPECT_EQ(ops.query("SELECT count(*) FROM {s}.pgjobd_job_attempts(987654321)"), "0");
}

// A done job keeps locked_by: who ran it is known after it finished.
TEST(AttemptHistory, TheSqlHandlersOwnCompletionIsRecordedToo) {
  TestSchema schema;
  schema.insert_jobs("a", 1);
  PgJobStore store(schema.config().database, "test");
  const auto jobs = store.claim(claim_of(1));
  ASSERT_EQ(jobs.size(), 1u);
  ASSERT_TRUE(store.run_and_complete("SELECT $1::jsonb, $2::bigint", jobs[0], "w", false, Millis(0),
                                     0, {}));
  Session ops(schema);
  EXPECT_EQ(ops.column("SELECT attempt || ' ' || worker || ' ' || outcome FROM "
                       "{s}.pgjobd_job_attempts(" +
                       std::to_string(jobs[0].id) + ")"),
            std::vector<std::string>{"1 w done"});
}

// Like errors, the log keeps the last 20 attempts however many a job makes, and a
// non-array value (an application's write) does not stop the completion.
TEST(AttemptHistory, TheLogIsBoundedAndSurvivesANonArrayValue) {
  TestSchema schema;
  schema.insert_jobs("a", 2);
  schema.exec(
      "UPDATE {jobs} SET attempt_log = (SELECT jsonb_agg(jsonb_build_object('attempt', i, "
      "'outcome', 'failed')) FROM generate_series(1, 30) i), max_attempts = 100 "
      "WHERE id = (SELECT min(id) FROM {jobs})");
  schema.exec("UPDATE {jobs} SET attempt_log = '\"junk\"' WHERE id = (SELECT max(id) FROM {jobs})");
  PgJobStore store(schema.config().database, "test");
  const auto jobs = store.claim(claim_of(2));
  ASSERT_EQ(jobs.size(), 2u);
  store.complete({{{jobs[0].id, 1}, Outcome::kRetry, "again", Millis(0)},
                  {{jobs[1].id, 1}, Outcome::kRetry, "again", Millis(0)}},
                 "w", false);
  EXPECT_EQ(schema.query("SELECT jsonb_array_length(attempt_log) || ' ' || "
                         "(attempt_log -> 0 ->> 'attempt') || ' ' || (attempt_log -> -1 ->> "
                         "'outcome') FROM {jobs} WHERE id = " +
                         id_text(std::min(jobs[0].id, jobs[1].id))),
            "20 12 failed");
  EXPECT_EQ(schema.query("SELECT jsonb_array_length(attempt_log) FROM {jobs} WHERE id = " +
                         id_text(std::max(jobs[0].id, jobs[1].id))),
            "1");
}

}  // namespace
}  // namespace pgjobd
