// The SQL interface (sql/functions/): pgjobd_enqueue, pgjobd_enqueue_ex,
// pgjobd_enqueue_many, pgjobd_retry, pgjobd_pause_queue and pgjobd_resume_queue, called as
// an application would: schema-qualified, from a session whose search_path does not hold
// the schema; the claim's obedience to a pause; and the producer and operator roles of
// sql/grants.sql.

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <pqxx/pqxx>
#include <set>
#include <thread>

#include "db/connection.hpp"
#include "db/pg_job_store.hpp"
#include "db/sql_text.hpp"
#include "db/statements.hpp"
#include "support/app_session.hpp"
#include "support/build_paths.hpp"
#include "support/claims.hpp"
#include "support/grants_roles.hpp"
#include "support/schema_notifications.hpp"
#include "support/statement_plans.hpp"
#include "support/test_database.hpp"
#include "support/test_text.hpp"

namespace pgjobd {
namespace {

using testing::Session;
using testing::TestSchema;
using namespace std::chrono_literals;

using testing::kLease;

using testing::contains;

TEST(SqlInterface, EnqueueWithNamedArgumentsFromAnotherSearchPath) {
  TestSchema schema;
  Session app(schema);
  const std::string id =
      app.query(R"(SELECT {s}.pgjobd_enqueue('send_email', '{"to":"a@b"}', priority => 5,)"
                " run_at => now() + interval '1 hour')");
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(schema.query("SELECT concat_ws('|', type, payload->>'to', queue, priority, "
                         "max_attempts, unique_key IS NULL, status, "
                         "run_at > now() + interval '59 minutes') FROM {jobs} WHERE id = " +
                         id),
            "send_email|a@b|default|5|5|t|pending|t");

  // Only the type: every default.
  const std::string plain = app.query("SELECT {s}.pgjobd_enqueue('ping')");
  EXPECT_EQ(schema.query("SELECT concat_ws('|', payload::text, queue, priority, max_attempts, "
                         "run_at <= now()) FROM {jobs} WHERE id = " +
                         plain),
            "{}|default|0|5|t");
  // Every argument by name, in any order.
  const std::string named = app.query(
      "SELECT {s}.pgjobd_enqueue(unique_key => 'u1', max_attempts => 9, queue => 'mail', "
      "type => 'report', payload => '[1]', priority => -3, run_at => '2031-01-02 03:04:05Z')");
  EXPECT_EQ(schema.query("SELECT concat_ws('|', type, payload::text, queue, priority, "
                         "max_attempts, unique_key, run_at = '2031-01-02 03:04:05Z') "
                         "FROM {jobs} WHERE id = " +
                         named),
            "report|[1]|mail|-3|9|u1|t");
  // One function, not overloads: the enqueue functions have one signature each.
  EXPECT_EQ(app.query("SELECT count(*) FROM pg_proc WHERE pronamespace = '{s}'::regnamespace "
                      "AND proname IN ('pgjobd_enqueue', 'pgjobd_enqueue_ex')"),
            "2");
}

TEST(SqlInterface, EnqueueRefusesBadArgumentsNamingThem) {
  TestSchema schema;
  Session app(schema);
  struct Case {
    const char* args;
    const char* sqlstate;
    const char* message;
  };
  const Case cases[] = {
      {"NULL", "22004", "type must not be NULL"},
      {"''", "22023", "type must be 1..200 characters long, not 0"},
      {"repeat('t', 201)", "22023", "type must be 1..200 characters long, not 201"},
      {"'t', payload => NULL", "22004", "payload must not be NULL"},
      {"'t', queue => NULL", "22004", "queue must not be NULL"},
      {"'t', queue => ''", "22023", "queue must be 1..200 characters long"},
      {"'t', priority => 40000", "22003", "priority must be between -32768 and 32767, not 40000"},
      {"'t', priority => -32769", "22003", "priority must be between -32768 and 32767"},
      {"'t', priority => NULL", "22004", "priority must not be NULL"},
      {"'t', run_at => 'infinity'", "22023", "run_at must be a finite time"},
      {"'t', run_at => '-infinity'", "22023", "run_at must be a finite time"},
      {"'t', run_at => NULL", "22004", "run_at must not be NULL"},
      {"'t', max_attempts => 0", "22003", "max_attempts must be between 1 and 1000000, not 0"},
      {"'t', max_attempts => 1000001", "22003", "max_attempts must be between 1 and 1000000"},
      {"'t', max_attempts => NULL", "22004", "max_attempts must not be NULL"},
      {"'t', unique_key => repeat('k', 1025)", "22023", "unique_key must be at most 1024 bytes"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const std::string error = app.error(std::string("SELECT {s}.pgjobd_enqueue(") + c.args + ")");
    EXPECT_EQ(error.substr(0, 5), c.sqlstate) << error;
    EXPECT_TRUE(contains(error, std::string("pgjobd_enqueue: ") + c.message)) << error;
  }
  EXPECT_EQ(schema.count(), 0);
  // The bounds themselves are accepted.
  EXPECT_EQ(app.error("SELECT {s}.pgjobd_enqueue(repeat('t', 200), queue => repeat('q', 200), "
                      "priority => 32767, max_attempts => 1000000, "
                      "unique_key => repeat('k', 1024))"),
            "");
  EXPECT_EQ(app.error("SELECT {s}.pgjobd_enqueue('t', priority => -32768, max_attempts => 1)"), "");
  EXPECT_EQ(schema.count(), 2);
}

TEST(SqlInterface, EnqueueExSaysWhetherItInserted) {
  TestSchema schema;
  Session app(schema);
  const std::string first = app.query(
      "SELECT id || ' ' || inserted FROM {s}.pgjobd_enqueue_ex('report', '{\"n\": 1}', "
      "unique_key => 'k1')");
  const std::string id = first.substr(0, first.find(' '));
  EXPECT_EQ(first, id + " true");
  // Same key while the first is live (pending, running or failed): its id, nothing inserted.
  for (const char* status : {"pending", "running", "failed"}) {
    SCOPED_TRACE(status);
    schema.exec(std::string("UPDATE {jobs} SET status = '") + status +
                "', locked_by = 'w', locked_until = now() WHERE id = " + id);
    EXPECT_EQ(app.query("SELECT id || ' ' || inserted FROM {s}.pgjobd_enqueue_ex('report', "
                        "'{\"n\": 2}', unique_key => 'k1')"),
              id + " false");
    EXPECT_EQ(app.query("SELECT {s}.pgjobd_enqueue('report', unique_key => 'k1')"), id);
  }
  EXPECT_EQ(schema.count(), 1);
  EXPECT_EQ(schema.query("SELECT payload->>'n' FROM {jobs}"), "1");
  // Another type with the key, or no key: new jobs. Once the holder is done, the key is free.
  EXPECT_TRUE(contains(
      app.query("SELECT inserted FROM {s}.pgjobd_enqueue_ex('other', unique_key => 'k1')"), "t"));
  schema.exec(
      "UPDATE {jobs} SET status = 'done', finished_at = now(), locked_by = NULL, "
      "locked_until = NULL WHERE id = " +
      id);
  const std::string again = app.query(
      "SELECT id || ' ' || inserted FROM {s}.pgjobd_enqueue_ex('report', "
      "unique_key => 'k1')");
  EXPECT_NE(again.substr(0, again.find(' ')), id);
  EXPECT_TRUE(contains(again, "true")) << again;
  EXPECT_EQ(schema.count(), 3);
}

// Several connections enqueue the same key at once, round after round: exactly one row per
// key, and every caller gets its id.
TEST(SqlInterface, ConcurrentUniqueEnqueueInsertsOnce) {
  TestSchema schema;
  constexpr int kThreads = 8;
  constexpr int kRounds = 25;
  std::vector<std::vector<std::string>> ids(kThreads, std::vector<std::string>(kRounds));
  std::vector<std::unique_ptr<Session>> sessions;
  for (int t = 0; t < kThreads; ++t) sessions.push_back(std::make_unique<Session>(schema));
  std::barrier sync(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        sync.arrive_and_wait();  // all callers of a round start together
        ids[t][r] = sessions[t]->query("SELECT {s}.pgjobd_enqueue('once', unique_key => 'key-" +
                                       std::to_string(r) + "')");
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(schema.count(), kRounds);
  EXPECT_EQ(schema.query("SELECT count(DISTINCT unique_key) FROM {jobs}"), std::to_string(kRounds));
  for (int r = 0; r < kRounds; ++r) {
    SCOPED_TRACE(r);
    const std::string holder =
        schema.query("SELECT id FROM {jobs} WHERE unique_key = 'key-" + std::to_string(r) + "'");
    for (int t = 0; t < kThreads; ++t) EXPECT_EQ(ids[t][r], holder) << "thread " << t;
  }
}

TEST(SqlInterface, EnqueueManyReturnsIdsInInputOrder) {
  TestSchema schema;
  Session app(schema);
  const std::string held = app.query("SELECT {s}.pgjobd_enqueue('b', unique_key => 'live')");
  const auto ids = app.column(R"(SELECT * FROM {s}.pgjobd_enqueue_many('[
      {"type": "a", "payload": {"i": 0}},
      {"type": "b", "payload": {"i": 1}, "unique_key": "live"},
      {"type": "c", "payload": {"i": 2}, "queue": "mail", "priority": 7, "max_attempts": 2,
       "run_at": "2031-01-02T03:04:05Z"},
      {"type": "d", "payload": {"i": 3}, "unique_key": "twice"},
      {"type": "d", "payload": {"i": 4}, "unique_key": "twice"},
      {"type": "e", "unique_key": null}
    ]'))");
  ASSERT_EQ(ids.size(), 6u);
  // Element 1's key is held by a live job: its id. Element 4 repeats element 3's key.
  EXPECT_EQ(ids[1], held);
  EXPECT_EQ(ids[4], ids[3]);
  EXPECT_EQ(schema.count(), 5);
  for (const int i : {0, 2, 3}) {
    EXPECT_EQ(schema.query("SELECT payload->>'i' FROM {jobs} WHERE id = " + ids[i]),
              std::to_string(i));
  }
  EXPECT_EQ(schema.query("SELECT concat_ws('|', type, queue, priority, max_attempts, "
                         "run_at = '2031-01-02 03:04:05Z') FROM {jobs} WHERE id = " +
                         ids[2]),
            "c|mail|7|2|t");
  EXPECT_EQ(schema.query("SELECT concat_ws('|', payload::text, queue, priority, max_attempts, "
                         "unique_key IS NULL, run_at <= now()) FROM {jobs} WHERE id = " +
                         ids[5]),
            "{}|default|0|5|t|t");
  EXPECT_TRUE(app.column("SELECT * FROM {s}.pgjobd_enqueue_many('[]')").empty());
}

TEST(SqlInterface, EnqueueManyRefusesBadInputAndInsertsNothing) {
  TestSchema schema;
  Session app(schema);
  struct Case {
    const char* jobs;
    const char* message;
  };
  const Case cases[] = {
      {"NULL", "jobs must be a JSON array of objects, not NULL"},
      {"'{\"type\": \"a\"}'", "jobs must be a JSON array of objects, not object"},
      {"'[{\"type\": \"a\"}, 3]'", "jobs[1] must be an object, not number"},
      {"'[{\"type\": \"a\", \"prio\": 1, \"delay\": 2}]'",
       "jobs[0] has unknown key(s): delay, prio"},
      {"'[{\"type\": 1}]'", "jobs[0].type: must be a string, not number"},
      {"'[{\"type\": \"a\", \"priority\": 1.5}]'", "jobs[0].priority: must be an integer"},
      {"'[{\"type\": \"a\", \"priority\": \"1\"}]'", "jobs[0].priority: must be an integer"},
      {"'[{\"type\": \"a\", \"max_attempts\": 1e12}]'", "jobs[0].max_attempts: must be an integer"},
      {"'[{\"type\": \"a\"}, {\"payload\": {}}]'", "jobs[1]: type must not be NULL"},
      {"'[{\"type\": \"a\", \"priority\": 40000}]'",
       "jobs[0]: priority must be between -32768 and 32767, not 40000"},
      {"'[{\"type\": \"a\", \"run_at\": \"infinity\"}]'", "jobs[0]: run_at must be a finite time"},
      {"'[{\"type\": \"a\", \"queue\": null}]'", "jobs[0]: queue must not be NULL"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.jobs);
    const std::string error =
        app.error(std::string("SELECT * FROM {s}.pgjobd_enqueue_many(") + c.jobs + ")");
    EXPECT_EQ(error.substr(0, 2), "22") << error;
    EXPECT_TRUE(contains(error, std::string("pgjobd_enqueue_many: ") + c.message)) << error;
  }
  EXPECT_EQ(schema.count(), 0);
}

// One statement for the whole array: 10,000 jobs well under a second (the bound asserted is
// only a sanity check, for slow CI machines).
TEST(SqlInterface, EnqueueManyInsertsTenThousandJobsQuickly) {
  TestSchema schema;
  Session app(schema);
  const std::string jobs = app.query(
      "SELECT jsonb_agg(jsonb_build_object('type', 'bulk', 'payload', "
      "jsonb_build_object('i', i), 'unique_key', CASE WHEN i % 10 = 0 THEN 'k' || i END) "
      "ORDER BY i)::text FROM generate_series(0, 9999) i");
  std::string quoted;
  {
    pqxx::nontransaction txn(app.connection());
    quoted = txn.quote(jobs);
  }
  const auto start = std::chrono::steady_clock::now();
  const auto ids = app.column("SELECT * FROM {s}.pgjobd_enqueue_many(" + quoted + "::jsonb)");
  const auto elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start);
  std::cout << "pgjobd_enqueue_many: 10000 jobs in " << elapsed.count() * 1000 << " ms\n";
  EXPECT_LT(elapsed.count(), 10.0);
  ASSERT_EQ(ids.size(), 10000u);
  EXPECT_EQ(schema.count(), 10000);
  // The i-th id is the job of the i-th element.
  std::string list = "{";
  for (std::size_t i = 0; i < ids.size(); ++i) list += (i == 0 ? "" : ",") + ids[i];
  list += "}";
  EXPECT_EQ(schema.query("SELECT count(*) FROM unnest('" + list +
                         "'::bigint[]) WITH ORDINALITY u(id, n) JOIN {jobs} j ON j.id = u.id "
                         "WHERE (j.payload->>'i')::int = u.n - 1"),
            "10000");
}

TEST(SqlInterface, RetryFollowsTheCommandLineRules) {
  TestSchema schema;
  Session app(schema);
  const std::string dead = schema.query(
      "INSERT INTO {jobs} (type, status, attempts, max_attempts, finished_at, last_error, "
      "errors) VALUES ('a', 'dead', 5, 5, now(), 'boom', '[{\"error\": \"boom\"}]') "
      "RETURNING id");
  EXPECT_EQ(app.query("SELECT {s}.pgjobd_retry(" + dead + ")"), "dead");
  EXPECT_EQ(schema.query("SELECT concat_ws('|', status, attempts, max_attempts, "
                         "finished_at IS NULL, run_at <= now(), last_error, "
                         "jsonb_array_length(errors)) FROM {jobs} WHERE id = " +
                         dead),
            "pending|5|6|t|t|boom|1");

  const std::string failed = schema.query(
      "INSERT INTO {jobs} (type, status, attempts, run_at) VALUES ('a', 'failed', 1, "
      "now() + interval '1 hour') RETURNING id");
  EXPECT_EQ(app.query("SELECT {s}.pgjobd_retry(" + failed + ")"), "failed");
  EXPECT_EQ(schema.query("SELECT status || ' ' || (run_at <= now()) || ' ' || max_attempts "
                         "FROM {jobs} WHERE id = " +
                         failed),
            "pending true 5");
  const std::string cancelled = schema.query(
      "INSERT INTO {jobs} (type, status, finished_at) VALUES ('a', 'cancelled', now()) "
      "RETURNING id");
  EXPECT_EQ(app.query("SELECT {s}.pgjobd_retry(" + cancelled + ")"), "cancelled");

  // Wrong state: pending, running, done. Nothing changes.
  const std::string running = schema.query(
      "INSERT INTO {jobs} (type, status, attempts, locked_by, locked_until) VALUES "
      "('a', 'running', 1, 'w', now()) RETURNING id");
  const std::string done = schema.query(
      "INSERT INTO {jobs} (type, status, attempts, finished_at) VALUES ('a', 'done', 1, now()) "
      "RETURNING id");
  for (const auto& [id, status] : std::vector<std::pair<std::string, std::string>>{
           {dead, "pending"}, {running, "running"}, {done, "done"}}) {
    SCOPED_TRACE(status);
    const std::string error = app.error("SELECT {s}.pgjobd_retry(" + id + ")");
    EXPECT_EQ(error.substr(0, 5), "55000") << error;
    EXPECT_TRUE(contains(error, "pgjobd_retry: job " + id + " is " + status +
                                    ": only failed, dead or cancelled jobs can be retried"))
        << error;
    EXPECT_EQ(schema.query("SELECT status FROM {jobs} WHERE id = " + id), status);
  }
  const std::string unknown = app.error("SELECT {s}.pgjobd_retry(987654321)");
  EXPECT_EQ(unknown.substr(0, 5), "P0002") << unknown;
  EXPECT_TRUE(contains(unknown, "pgjobd_retry: job 987654321 does not exist")) << unknown;
  EXPECT_TRUE(contains(app.error("SELECT {s}.pgjobd_retry(NULL)"), "id must not be NULL"));

  // A cancelled job whose unique_key a newer live job holds cannot come back: it says which.
  const std::string old = schema.query(
      "INSERT INTO {jobs} (type, unique_key, status, finished_at) VALUES "
      "('u', 'k', 'cancelled', now()) RETURNING id");
  const std::string holder = app.query("SELECT {s}.pgjobd_enqueue('u', unique_key => 'k')");
  const std::string error = app.error("SELECT {s}.pgjobd_retry(" + old + ")");
  EXPECT_EQ(error.substr(0, 5), "23505") << error;
  EXPECT_TRUE(contains(error, "live job " + holder + " holds its unique_key")) << error;
}

ClaimRequest claim_from(const std::vector<std::string>& queues) {
  ClaimRequest request{{}, {"a"}, 10, "w1", kLease};
  for (const auto& queue : queues) request.slots.push_back({queue, 10});
  return request;
}

// The claim itself skips a paused queue: no notification is involved, any daemon obeys.
TEST(SqlInterface, PausedQueueIsNotClaimedOthersAre) {
  TestSchema schema;
  Session app(schema);
  // Paused before the queue has any job; twice is fine.
  app.query("SELECT {s}.pgjobd_pause_queue('mail')");
  const std::string paused_at = app.query("SELECT updated_at FROM {s}.pgjobd_queues");
  app.query("SELECT {s}.pgjobd_pause_queue('mail')");
  EXPECT_EQ(app.query("SELECT concat_ws('|', queue, paused, updated_at = '" + paused_at +
                      "') FROM {s}.pgjobd_queues"),
            "mail|t|t");
  // Enqueueing still works while paused.
  app.query("SELECT {s}.pgjobd_enqueue('a', queue => 'mail')");
  app.query("SELECT {s}.pgjobd_enqueue('a', queue => 'default')");

  PgJobStore store(schema.config().database, "test");
  const auto claimed = store.claim(claim_from({"mail", "default"}));
  ASSERT_EQ(claimed.size(), 1u);
  EXPECT_EQ(claimed[0].queue, "default");
  EXPECT_TRUE(store.claim(claim_from({"mail"})).empty());
  EXPECT_EQ(schema.count("queue = 'mail' AND status = 'pending'"), 1);
  EXPECT_EQ(store.paused_queues({"mail", "default", "other"}), std::vector<std::string>{"mail"});

  app.query("SELECT {s}.pgjobd_resume_queue('mail')");
  app.query("SELECT {s}.pgjobd_resume_queue('mail')");
  app.query("SELECT {s}.pgjobd_resume_queue('never-paused')");
  EXPECT_TRUE(store.paused_queues({"mail", "default"}).empty());
  const auto resumed = store.claim(claim_from({"mail"}));
  ASSERT_EQ(resumed.size(), 1u);
  EXPECT_EQ(resumed[0].queue, "mail");
}

// A pause stops new claims; a job already running finishes and its completion is written.
TEST(SqlInterface, RunningJobsOfAPausedQueueFinish) {
  TestSchema schema;
  Session app(schema);
  app.query("SELECT {s}.pgjobd_enqueue('a', queue => 'mail')");
  app.query("SELECT {s}.pgjobd_enqueue('a', queue => 'mail')");
  PgJobStore store(schema.config().database, "test");
  ClaimRequest one = claim_from({"mail"});
  one.limit = 1;
  const auto claimed = store.claim(one);
  ASSERT_EQ(claimed.size(), 1u);
  app.query("SELECT {s}.pgjobd_pause_queue('mail')");
  Completion done;
  done.job = {claimed[0].id, claimed[0].attempt};
  store.complete({done}, "w1", false);
  EXPECT_EQ(schema.count("status = 'done'"), 1);
  EXPECT_TRUE(store.claim(claim_from({"mail"})).empty());
  EXPECT_EQ(schema.count("status = 'pending'"), 1);
}

TEST(SqlInterface, PauseAndResumeRefuseBadQueueNames) {
  TestSchema schema;
  Session app(schema);
  for (const char* function : {"pgjobd_pause_queue", "pgjobd_resume_queue"}) {
    SCOPED_TRACE(function);
    for (const auto& [arg, message] : std::vector<std::pair<std::string, std::string>>{
             {"NULL", "queue must not be NULL"},
             {"''", "queue must be 1..200 characters long, not 0"},
             {"repeat('q', 201)", "queue must be 1..200 characters long, not 201"}}) {
      const std::string error = app.error("SELECT {s}." + std::string(function) + "(" + arg + ")");
      EXPECT_EQ(error.substr(0, 2), "22") << error;
      EXPECT_TRUE(contains(error, std::string(function) + ": " + message)) << error;
    }
  }
  EXPECT_EQ(app.query("SELECT count(*) FROM {s}.pgjobd_queues"), "0");
}

// Pause and resume wake the daemons of the schema on the INSERT trigger's channel, so an
// idle daemon claims at once after a resume.
TEST(SqlInterface, PauseAndResumeNotifyTheSchemasDaemons) {
  TestSchema schema;
  Session listener(schema);
  testing::SchemaNotifications receiver(listener.connection(), "pgjobd_jobs", schema.name());
  listener.query("SELECT 1");  // the LISTEN is sent with the next statement
  Session app(schema);
  for (const char* call : {"pgjobd_resume_queue", "pgjobd_pause_queue"}) {
    SCOPED_TRACE(call);
    receiver.reset();
    app.query("SELECT {s}." + std::string(call) + "('mail')");
    receiver.await_first();
    ASSERT_EQ(receiver.count(), 1);
  }
}

// pgjobd_retry and pgjobd_retry_many make a job due now: they wake the schema's daemons on
// the INSERT trigger's channel, through its 2 ms clock, once per call however many jobs
// it retried, so an idle daemon claims at once rather than at its next poll
// (tests/e2e/notify_e2etest.cpp times that). A call that retried nothing wakes no one.
TEST(SqlInterface, RetryAndRetryManyWakeTheSchemasDaemonsOncePerCall) {
  TestSchema schema;
  std::vector<std::string> dead;
  for (int i = 0; i < 4; ++i) {
    dead.push_back(
        schema.query("INSERT INTO {jobs} (type, status, attempts, max_attempts, finished_at) "
                     "VALUES ('a', 'dead', 1, 1, now()) RETURNING id"));
  }
  Session listener(schema);
  testing::SchemaNotifications receiver(listener.connection(), "pgjobd_jobs", schema.name());
  // Notifications arrive in commit order: once the sentinel sent after a call is in, so is
  // every notification of the call.
  testing::SchemaNotifications sentinel(listener.connection(), "pgjobd_test_sentinel",
                                        schema.name());
  listener.query("SELECT 1");  // the LISTENs are sent with the next statement
  Session app(schema);
  const auto notifications_of = [&](const std::string& call) {
    // The last NOTIFY's time set back past the 2 ms window, so the call's own is not skipped.
    schema.query("SELECT setval('" + schema.qualified("pgjobd_notify_clock") + "', 0)");
    receiver.reset();
    sentinel.reset();
    app.query(call);
    app.query("SELECT pg_notify('pgjobd_test_sentinel', '" + schema.name() + "')");
    sentinel.await_first();
    return receiver.count();
  };
  EXPECT_EQ(notifications_of("SELECT {s}.pgjobd_retry(" + dead[0] + ")"), 1);
  EXPECT_EQ(notifications_of("SELECT count(*) FROM {s}.pgjobd_retry_many(ARRAY[" + dead[1] + ", " +
                             dead[2] + ", " + dead[3] + "]::bigint[])"),
            1);
  EXPECT_EQ(schema.count("status = 'pending'"), 4);
  EXPECT_EQ(notifications_of("SELECT count(*) FROM {s}.pgjobd_retry_many(ARRAY[" + dead[0] +
                             "]::bigint[])"),
            0)
      << "a pending job is not retried";
}

// The pause check adds an anti-join over the few `slots` rows; the per-queue scan of jobs
// stays on the claim index. (By hand, EXPLAIN of the claim before and after this check
// differs only in the Hash Anti Join of `slots` with pgjobd_queues.)
TEST(SqlInterface, ClaimWithThePauseCheckStaysOnTheClaimIndex) {
  TestSchema schema;
  schema.exec(
      "INSERT INTO {jobs} (type, queue, status, attempts, started_at, finished_at) "
      "SELECT 'a', 'q' || (i % 10), 'done', 1, now(), now() FROM generate_series(1, 20000) i");
  schema.exec(
      "INSERT INTO {jobs} (type, queue) SELECT 'a', 'q' || (i % 10) "
      "FROM generate_series(1, 200) i");
  schema.exec("INSERT INTO " + quote_identifier(schema.name()) +
              ".pgjobd_queues (queue, paused) VALUES ('q1', true)");
  schema.exec("ANALYZE {jobs}");
  testing::StatementPlans plans(schema);
  for (const auto& [name, due] :
       {std::pair{stmt::kClaim, ""}, std::pair{stmt::kClaimWithDue, ", '{q1,q2}'"}}) {
    for (const char* mode : testing::StatementPlans::kModes) {
      const std::string plan = plans.explain(
          std::string(name) + "('{q1,q2}', '{10,10}', '{a}', 20, 'w', 30000, '', 1000" + due + ")",
          mode);
      EXPECT_TRUE(contains(plan, "jobs_claim_type_idx")) << mode << "\n" << plan;
      EXPECT_TRUE(contains(plan, "Anti Join")) << mode << "\n" << plan;
      EXPECT_TRUE(contains(plan, "pgjobd_queues")) << mode << "\n" << plan;
    }
  }
}

// sql/grants.sql's optional roles: a producer may only enqueue (no table rights); an
// operator may also cancel, retry, pause and resume, and read jobs.
TEST(SqlInterface, ProducerAndOperatorRolesOfTheGrantsFile) {
  TestSchema schema;
  const testing::GrantsRoles roles(schema, "si");
  ASSERT_TRUE(roles.applied()) << roles.command();
  const std::string& runtime = roles.runtime;
  const std::string& producer = roles.producer;
  const std::string& operator_role = roles.operator_role;
  {
    Session app(schema, testing::test_database_url_for_role(producer));
    EXPECT_FALSE(app.query("SELECT {s}.pgjobd_enqueue('a')").empty());
    EXPECT_FALSE(app.query("SELECT id FROM {s}.pgjobd_enqueue_ex('a')").empty());
    EXPECT_EQ(app.column("SELECT * FROM {s}.pgjobd_enqueue_many('[{\"type\": \"a\"}]')").size(),
              1u);
    for (const char* refused :
         {"INSERT INTO {s}.jobs (type) VALUES ('a')", "UPDATE {s}.jobs SET priority = 1",
          "DELETE FROM {s}.jobs", "SELECT count(*) FROM {s}.jobs", "SELECT {s}.pgjobd_retry(1)",
          "SELECT {s}.pgjobd_pause_queue('default')", "SELECT {s}.pgjobd_resume_queue('default')",
          "SELECT {s}.pgjobd_cancel(1)", "SELECT * FROM {s}.pgjobd_job_attempts(1)",
          "SELECT * FROM {s}.pgjobd_cancel_many('{1}')",
          "SELECT * FROM {s}.pgjobd_retry_many('{1}')",
          "SELECT {s}.pgjobd_check_job('x', 'a', '{}', 'q', 0, now(), 1, NULL)"}) {
      SCOPED_TRACE(refused);
      EXPECT_EQ(app.error(refused).substr(0, 5), "42501");
    }
  }
  EXPECT_EQ(schema.count(), 3);
  const std::string dead = schema.query(
      "INSERT INTO {jobs} (type, status, attempts, finished_at) VALUES ('a', 'dead', 5, now()) "
      "RETURNING id");
  {
    Session ops(schema, testing::test_database_url_for_role(operator_role));
    EXPECT_EQ(ops.query("SELECT {s}.pgjobd_retry(" + dead + ")"), "dead");
    EXPECT_EQ(ops.query("SELECT {s}.pgjobd_cancel(" + dead + ", 'by the operator')"), "cancelled");
    EXPECT_EQ(ops.query("SELECT last_error FROM {s}.jobs WHERE id = " + dead),
              "cancelled: by the operator");
    EXPECT_EQ(ops.query("SELECT {s}.pgjobd_retry(" + dead + ")"), "cancelled");
    EXPECT_EQ(ops.query("SELECT count(*) FROM {s}.pgjobd_job_attempts(" + dead + ")"), "0");
    EXPECT_EQ(ops.query("SELECT status FROM {s}.pgjobd_cancel_many(ARRAY[" + dead + "]::bigint[])"),
              "cancelled");
    EXPECT_EQ(ops.query("SELECT retried FROM {s}.pgjobd_retry_many(ARRAY[" + dead + "]::bigint[])"),
              "t");
    EXPECT_EQ(ops.error("SELECT {s}.pgjobd_pause_queue('default')"), "");
    EXPECT_EQ(ops.query("SELECT paused FROM {s}.pgjobd_queues WHERE queue = 'default'"), "t");
    EXPECT_EQ(ops.error("SELECT {s}.pgjobd_resume_queue('default')"), "");
    EXPECT_EQ(ops.query("SELECT count(*) FROM {s}.jobs"), "4");
    EXPECT_FALSE(ops.query("SELECT {s}.pgjobd_enqueue('a')").empty());
    EXPECT_EQ(ops.error("DELETE FROM {s}.jobs").substr(0, 5), "42501");
    EXPECT_EQ(ops.error("INSERT INTO {s}.jobs (type) VALUES ('a')").substr(0, 5), "42501");
  }
  {
    // The runtime role reads pgjobd_queues for the claim.
    DatabaseConfig db = schema.config().database;
    db.url = testing::test_database_url_for_role(runtime);
    PgJobStore store(db, "test");
    EXPECT_TRUE(store.paused_queues({"default"}).empty());
    // 3 enqueued by the producer, 1 by the operator, 1 retried.
    EXPECT_EQ(store.claim(claim_from({"default"})).size(), 5u);
  }
}

}  // namespace
}  // namespace pgjobd
