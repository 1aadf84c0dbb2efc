// JobStore against PostgreSQL: claim order and filters, concurrent claims, fenced
// completions, heartbeat, rescue and retention.

#include "db/pg_job_store.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <pqxx/pqxx>
#include <set>
#include <thread>

#include "db/connection.hpp"
#include "db/sql_text.hpp"
#include "db/statement_set.hpp"
#include "db/statements.hpp"
#include "support/claims.hpp"
#include "support/statement_plans.hpp"
#include "support/test_database.hpp"
#include "support/wait_until.hpp"

namespace pgjobd {
namespace {

using testing::TestSchema;

using testing::kLease;

// The plan an EXPLAIN statement prints, a line per row.
std::string plan_of(pqxx::transaction_base& txn, const std::string& explain) {
  std::string plan;
  for (const auto& row : txn.exec(explain)) plan += row[0].c_str() + std::string("\n");
  return plan;
}

std::vector<std::int64_t> ids_of(const std::vector<Job>& jobs) {
  std::vector<std::int64_t> ids;
  for (const auto& job : jobs) ids.push_back(job.id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

TEST(JobStore, ClaimsInPriorityRunAtIdOrder) {
  TestSchema schema;
  // ids 1..6 with mixed priority and run_at; 7 is not due yet.
  schema.exec(
      "INSERT INTO {jobs} (id, type, priority, run_at) OVERRIDING SYSTEM VALUE VALUES "
      "(1, 'a', 0, now() - interval '1 minute'),"
      "(2, 'a', 5, now() - interval '1 minute'),"
      "(3, 'a', 5, now() - interval '2 minutes'),"
      "(4, 'a', 0, now() - interval '3 minutes'),"
      "(5, 'a', 0, now() - interval '3 minutes'),"
      "(6, 'a', -1, now() - interval '1 hour'),"
      "(7, 'a', 100, now() + interval '1 hour')");
  PgJobStore store(schema.config().database, "test");
  std::vector<std::int64_t> order;
  for (int i = 0; i < 7; ++i) {
    auto jobs = store.claim({{{"default", 1}}, {"a"}, 1, "w1", kLease});
    if (jobs.empty()) break;
    ASSERT_EQ(jobs.size(), 1u);
    order.push_back(jobs[0].id);
  }
  EXPECT_EQ(order, (std::vector<std::int64_t>{3, 2, 4, 5, 1, 6}));
  EXPECT_EQ(schema.query("SELECT status FROM {jobs} WHERE id = 7"), "pending");
}

// connect_ahead() opens the session in the background (the engine's claim session, while
// the other parts start), and the first statement then runs on that session, not on a
// second one.
TEST(JobStore, ConnectAheadOpensTheSessionTheFirstStatementUses) {
  TestSchema schema;
  schema.exec("INSERT INTO {jobs} (type) VALUES ('a')");
  const std::string role = "ahead " + schema.name();
  const auto sessions = [&] {
    return schema.query("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgjobd " +
                        role + "'");
  };
  PgJobStore store(schema.config().database, role, StoreUse::kHotPath);
  ASSERT_EQ(sessions(), "0");
  store.connect_ahead();
  ASSERT_TRUE(testing::wait_until([&] { return sessions() == "1"; }, std::chrono::seconds(20)))
      << "no session opened before the first statement";
  EXPECT_EQ(store.claim({{{"default", 5}}, {"a"}, 5, "w1", kLease}).size(), 1u);
  EXPECT_EQ(sessions(), "1");
}

// A session that could not be opened ahead fails the first statement, as a session opened
// then would have; the next statement tries again.
TEST(JobStore, ConnectAheadThatFailedShowsAtTheFirstStatement) {
  DatabaseConfig config;
  config.url = "postgresql://pgjobd@127.0.0.1:1/pgjobd?connect_timeout=5";  // nothing listens
  PgJobStore store(config, "ahead-refused", StoreUse::kHotPath);
  store.connect_ahead();
  EXPECT_THROW(store.claim({{{"default", 5}}, {"a"}, 5, "w1", kLease}), DbError);
  EXPECT_THROW(store.claim({{{"default", 5}}, {"a"}, 5, "w1", kLease}), DbError);
}

TEST(JobStore, ClaimSetsRunningAttemptAndLease) {
  TestSchema schema;
  schema.exec(
      "INSERT INTO {jobs} (type, payload, queue, max_attempts) VALUES "
      "('a', '{\"x\": [1, 2]}', 'default', 7)");
  PgJobStore store(schema.config().database, "test");
  const auto jobs = store.claim({{{"default", 5}}, {"a"}, 5, "worker-1", kLease});
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].type, "a");
  EXPECT_EQ(jobs[0].queue, "default");
  EXPECT_EQ(jobs[0].payload, "{\"x\": [1, 2]}");
  EXPECT_EQ(jobs[0].attempt, 1);
  EXPECT_EQ(jobs[0].max_attempts, 7);
  EXPECT_EQ(schema.query("SELECT status || ' ' || attempts || ' ' || locked_by FROM {jobs}"),
            "running 1 worker-1");
  EXPECT_EQ(schema.query("SELECT locked_until > now() + interval '29 seconds' "
                         "AND started_at IS NOT NULL FROM {jobs}"),
            "t");
}

// The claim commits without waiting for its WAL flush (a lost claim only leaves the job
// pending), for its own transaction only: the session keeps synchronous_commit as it was,
// so a connection pooler hands on nothing. With database.synchronous_claims ('') the
// session's setting applies.
TEST(JobStore, ClaimCommitsAsynchronouslyWithoutChangingTheSession) {
  TestSchema schema;
  schema.insert_jobs("a", 3);
  auto conn = open_connection(schema.config().database, "test-claim");
  for (const auto& statement : stmt::job_statements(quote_identifier(schema.name()))) {
    if (std::string(statement.name) == stmt::kClaim) conn->prepare(statement.name, statement.sql);
  }
  const auto claim = [&](pqxx::transaction_base& txn, const char* synchronous_commit) {
    return txn
        .exec_prepared(stmt::kClaim, "{default}", "{1}", "{a}", 1, "w", kLease.count(),
                       synchronous_commit, 1024)
        .size();
  };
  const auto setting = [](pqxx::transaction_base& txn) {
    return txn.exec("SHOW synchronous_commit")[0][0].as<std::string>();
  };
  {
    pqxx::work txn(*conn);
    EXPECT_EQ(setting(txn), "on");
    EXPECT_EQ(claim(txn, "off"), 1u);
    EXPECT_EQ(setting(txn), "off");  // what the commit will use
    txn.commit();
  }
  {
    pqxx::nontransaction after(*conn);
    EXPECT_EQ(setting(after), "on");
    EXPECT_EQ(claim(after, "off"), 1u);  // autocommit, as JobStore runs it
    EXPECT_EQ(setting(after), "on");
  }
  {
    pqxx::work txn(*conn);
    EXPECT_EQ(claim(txn, ""), 1u);  // database.synchronous_claims: the session's setting
    EXPECT_EQ(setting(txn), "on");
    txn.commit();
  }
  EXPECT_EQ(schema.count("status = 'running'"), 3);
}

// Completions and heartbeats find their rows by primary key, whatever the statistics say:
// after ANALYZE has seen many finished rows and (almost) no running ones, the partial
// lease index looks nearly empty to the planner, but walking it visits every dead entry
// since the last vacuum (seconds per batch next to 5M done rows).
TEST(JobStore, WritesByIdUseThePrimaryKeyNotTheLeaseIndex) {
  TestSchema schema;
  schema.exec(
      "INSERT INTO {jobs} (type, status, attempts, started_at, finished_at) "
      "SELECT 'a', 'done', 1, now(), now() FROM generate_series(1, 20000)");
  schema.exec("ANALYZE {jobs}");
  testing::StatementPlans plans(schema);
  const std::vector<std::string> executes = {
      // $9: the done rows' common attempt, or 0 when they differ; $10 their results (NULL:
      // none has one); $11 the lock wait.
      std::string(stmt::kComplete) +
          "('{1,2}', '{1,1}', '{3}', '{1}', '{failed}', '{e}', "
          "'{10}', 'w', 1, NULL, '50ms')",
      std::string(stmt::kComplete) +
          "('{1,2}', '{1,2}', '{3}', '{1}', '{failed}', '{e}', "
          "'{10}', 'w', 0, ARRAY['{\"a\": 1}'::jsonb, NULL], '50ms')",
      std::string(stmt::kCompleteDeleteDone) +
          "('{1,2}', '{1,1}', '{3}', '{1}', '{dead}', "
          "'{e}', '{0}', 'w', 1, NULL, '50ms')",
      std::string(stmt::kCompleteDeleteDone) +
          "('{1,2}', '{2,1}', '{3}', '{1}', '{dead}', "
          "'{e}', '{0}', 'w', 0, NULL, '50ms')",
      std::string(stmt::kCompleteSkipLocked) +
          "('{1,2}', '{1,1}', '{3}', '{1}', '{failed}', '{e}', "
          "'{10}', 'w', 1, NULL)",
      std::string(stmt::kCompleteSkipLocked) +
          "('{1,2}', '{1,2}', '{}', '{}', '{}', '{}', '{}', 'w', 0, "
          "ARRAY['{\"a\": 1}'::jsonb, NULL])",
      std::string(stmt::kCompleteDeleteDoneSkipLocked) +
          "('{1,2}', '{2,1}', '{3}', '{1}', '{dead}', "
          "'{e}', '{0}', 'w', 0, NULL)",
      std::string(stmt::kCompleteOneDone) + "(1, 1, 'w', '{\"a\": 1}')",
      std::string(stmt::kCompleteOneDelete) + "(1, 1, 'w', NULL)",
      std::string(stmt::kHeartbeat) + "('{1,2}', '{1,1}', 'w', 30000)",
  };
  for (const char* mode : testing::StatementPlans::kModes) {
    for (const std::string& execute : executes) {
      const std::string plan = plans.explain(execute, mode);
      EXPECT_NE(plan.find("jobs_pkey"), std::string::npos) << mode << " " << execute << "\n"
                                                           << plan;
      EXPECT_EQ(plan.find("jobs_lease_idx"), std::string::npos) << mode << " " << execute << "\n"
                                                                << plan;
    }
  }
}

// A bulk enqueue outruns autovacuum's ANALYZE (a minute apart by default): the claim must
// not trust statistics that say "a few pending rows". Planned on such numbers, a bitmap
// scan of the claim index and a sort of every pending row looks as cheap as the ordered
// index scan, and costs a full sort per claim (60 ms per claim of 64 next to 65,000
// pending rows, in an earlier claim's shape: a daemon ran at under 1,000 jobs/s for a
// minute). The claim takes its LIMIT from the free slots at run time, so the planner
// cannot count on a small result and keeps the ordered index scan, which stops after the
// first rows it can lock; this pins that, for a table never analysed and one analysed
// just before the bulk load, under both plan cache modes. Claims of 1,000 (worker.prefetch)
// too: the UPDATE then reaches the claimed rows by the ctid each was locked at (a TID
// scan), where a join on the picked ids alone was planned as a hash join over a
// sequential scan of the whole table.
TEST(JobStore, ClaimWalksTheClaimIndexInOrderWhateverTheStatisticsSay) {
  const auto check = [](TestSchema& schema, const std::string& when) {
    testing::StatementPlans plans(schema);
    // Both claims: the plain one and the claim session's (whose probes, run only after a
    // short claim, sort nothing).
    for (const auto& [name, due] :
         {std::pair{stmt::kClaim, ""}, std::pair{stmt::kClaimWithDue, ", '{default}'"}}) {
      for (const std::string types : {"{a}", "{a,b}"}) {
        for (const std::string batch : {"64", "1000"}) {
          const std::string execute = std::string(name) + "('{default}', '{" + batch + "}', '" +
                                      types + "', " + batch + ", 'w', 30000, 'off', 1000000" + due +
                                      ")";
          for (const char* mode : testing::StatementPlans::kModes) {
            const std::string plan = plans.explain(execute, mode);
            const std::string context = when + ", " + mode + ", " + execute + "\n" + plan;
            EXPECT_NE(plan.find("Index Scan using jobs_claim_type_idx"), std::string::npos)
                << context;
            EXPECT_NE(plan.find("Tid Scan on jobs"), std::string::npos) << context;
            EXPECT_EQ(plan.find("Bitmap Index Scan on jobs_claim"), std::string::npos) << context;
            EXPECT_EQ(plan.find("Seq Scan on jobs"), std::string::npos) << context;
            // No sort of the pending rows: every walk of the claim index stops at its arm's
            // LIMIT (the sorts above them order at most the slots' rows).
            for (std::size_t at = plan.find("Index Scan using jobs_claim_type_idx");
                 at != std::string::npos;
                 at = plan.find("Index Scan using jobs_claim_type_idx", at + 1)) {
              const std::size_t line = plan.rfind('\n', at);
              const std::size_t above = plan.rfind('\n', line - 1);
              const std::size_t two_above = plan.rfind('\n', above - 1);
              EXPECT_NE(plan.substr(two_above, at - two_above).find("Limit"), std::string::npos)
                  << context;
            }
          }
        }
      }
    }
  };
  const std::string bulk_load =
      "INSERT INTO {jobs} (type, run_at) "
      "SELECT 'a', now() - interval '1 hour' + i * interval '1 millisecond' "
      "FROM generate_series(1, 20000) i";
  {
    TestSchema schema;
    schema.exec(bulk_load);
    check(schema, "never analysed");
  }
  {
    TestSchema schema;
    schema.exec(
        "INSERT INTO {jobs} (type, status, attempts, started_at, finished_at) "
        "SELECT 'a', 'done', 1, now(), now() FROM generate_series(1, 50000)");
    schema.exec("INSERT INTO {jobs} (type) SELECT 'a' FROM generate_series(1, 5)");
    schema.exec("ANALYZE {jobs}");
    schema.exec(bulk_load);
    check(schema, "analysed with 5 pending rows, then 20,000 more");
  }
  {
    TestSchema schema;  // a backlog the statistics know of
    schema.exec(
        "INSERT INTO {jobs} (type, payload) "
        "SELECT 'a', jsonb_build_object('n', i) FROM generate_series(1, 100000) i");
    schema.exec("ANALYZE {jobs}");
    check(schema, "analysed with 100,000 pending rows");
  }
}

TEST(JobStore, ClaimsOnlyServedQueuesAndKnownTypes) {
  TestSchema schema;
  schema.insert_jobs("known", 3, "default");
  schema.insert_jobs("unknown", 3, "default");
  schema.insert_jobs("known", 3, "other-queue");
  PgJobStore store(schema.config().database, "test");
  const auto jobs = store.claim({{{"default", 100}}, {"known"}, 100, "w", kLease});
  EXPECT_EQ(jobs.size(), 3u);
  for (const auto& job : jobs) {
    EXPECT_EQ(job.type, "known");
    EXPECT_EQ(job.queue, "default");
  }
  // Unknown types and other queues stay pending and untouched.
  EXPECT_EQ(schema.count("type = 'unknown' AND status = 'pending' AND attempts = 0 "
                         "AND locked_by IS NULL AND updated_at = created_at"),
            3);
  EXPECT_EQ(schema.count("queue = 'other-queue' AND status = 'pending' AND attempts = 0"), 3);
}

TEST(JobStore, ClaimRespectsPerQueueSlotsAndTotalLimit) {
  TestSchema schema;
  schema.insert_jobs("a", 10, "mail");
  schema.insert_jobs("a", 10, "default");
  PgJobStore store(schema.config().database, "test");
  const auto jobs = store.claim({{{"mail", 2}, {"default", 10}}, {"a"}, 5, "w", kLease});
  ASSERT_EQ(jobs.size(), 5u);
  const auto mail =
      std::count_if(jobs.begin(), jobs.end(), [](const Job& j) { return j.queue == "mail"; });
  EXPECT_LE(mail, 2);
  EXPECT_EQ(schema.count("status = 'running'"), 5);
}

TEST(JobStore, QueueAndTypeNamesAreParametersNotSql) {
  TestSchema schema;
  const std::string hostile = "q'; DROP TABLE jobs; --\"{},\\";
  schema.exec("INSERT INTO {jobs} (type, queue) VALUES ('t\"x', $$" + hostile + "$$)");
  PgJobStore store(schema.config().database, "test");
  const auto jobs = store.claim({{{hostile, 1}}, {"t\"x"}, 1, "w", kLease});
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].queue, hostile);
  EXPECT_EQ(jobs[0].type, "t\"x");
}

TEST(JobStore, FourThreadsClaimTenThousandJobsWithoutDuplicates) {
  TestSchema schema;
  schema.insert_jobs("a", 10000);
  std::mutex mutex;
  std::multiset<std::int64_t> claimed;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      PgJobStore store(schema.config().database, "test");
      while (true) {
        const auto jobs =
            store.claim({{{"default", 50}}, {"a"}, 50, "w" + std::to_string(t), kLease});
        if (jobs.empty()) return;
        std::lock_guard lock(mutex);
        for (const auto& job : jobs) claimed.insert(job.id);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(claimed.size(), 10000u);
  EXPECT_EQ(std::set<std::int64_t>(claimed.begin(), claimed.end()).size(), 10000u);
  EXPECT_EQ(schema.count("status = 'running' AND attempts = 1"), 10000);
}

TEST(JobStore, CompletesDoneFailedDeadAndReleased) {
  TestSchema schema;
  schema.insert_jobs("a", 4);
  PgJobStore store(schema.config().database, "test");
  auto jobs = store.claim({{{"default", 4}}, {"a"}, 4, "w", kLease});
  ASSERT_EQ(jobs.size(), 4u);
  const auto ids = ids_of(jobs);
  const auto report = store.complete({{{ids[0], 1}, Outcome::kDone, "", Millis(0)},
                                      {{ids[1], 1}, Outcome::kRetry, "boom\xff", Millis(60000)},
                                      {{ids[2], 1}, Outcome::kDead, "fatal", Millis(0)},
                                      {{ids[3], 1}, Outcome::kReleased, "", Millis(0)}},
                                     "w", false);
  EXPECT_EQ(report.written, 4);
  EXPECT_EQ(report.stale, 0);
  const auto row = [&](std::int64_t id, const std::string& expr) {
    return schema.query("SELECT " + expr + " FROM {jobs} WHERE id = " + std::to_string(id));
  };
  EXPECT_EQ(row(ids[0],
                "status || ' ' || (finished_at IS NOT NULL) || ' ' || "
                "coalesce(locked_by, 'none') || ' ' || (locked_until IS NULL)"),
            "done true w true");  // a done job keeps who ran it
  EXPECT_EQ(row(ids[1], "status"), "failed");
  EXPECT_EQ(row(ids[1], "last_error"), "boom\xEF\xBF\xBD");  // invalid UTF-8 sanitised
  EXPECT_EQ(row(ids[1], "run_at > now() + interval '50 seconds'"), "t");
  EXPECT_EQ(row(ids[1], "errors->0->>'error' || ' ' || (errors->0->>'attempt')"),
            "boom\xEF\xBF\xBD 1");
  EXPECT_EQ(row(ids[2], "status || ' ' || last_error || ' ' || (finished_at IS NOT NULL)"),
            "dead fatal true");
  EXPECT_EQ(row(ids[3], "status || ' ' || attempts || ' ' || jsonb_array_length(errors)"),
            "pending 0 0");
}

TEST(JobStore, CompletionGuardRefusesAJobAnotherWorkerOwns) {
  TestSchema schema;
  schema.insert_jobs("a", 1);
  PgJobStore store(schema.config().database, "test");
  const auto jobs = store.claim({{{"default", 1}}, {"a"}, 1, "owner", kLease});
  ASSERT_EQ(jobs.size(), 1u);
  const std::int64_t id = jobs[0].id;
  // Another worker, and a stale attempt number, are both fenced off.
  auto report = store.complete({{{id, 1}, Outcome::kDone, "", Millis(0)}}, "intruder", false);
  EXPECT_EQ(report.written, 0);
  EXPECT_EQ(report.stale, 1);
  report = store.complete({{{id, 2}, Outcome::kRetry, "late", Millis(0)}}, "owner", false);
  EXPECT_EQ(report.stale, 1);
  EXPECT_EQ(schema.query("SELECT status || ' ' || locked_by FROM {jobs}"), "running owner");
  report = store.complete({{{id, 1}, Outcome::kDone, "", Millis(0)}}, "owner", false);
  EXPECT_EQ(report.written, 1);
  // A second, late completion of the same attempt changes nothing.
  report = store.complete({{{id, 1}, Outcome::kRetry, "late", Millis(0)}}, "owner", false);
  EXPECT_EQ(report.stale, 1);
  EXPECT_EQ(schema.query("SELECT status FROM {jobs}"), "done");
}

// Done rows are matched to their attempt one of two ways (statements.cpp, kCompleteDoneCte):
// against the batch's common attempt when all of its done rows carry the same one, else
// through each row's slot in the arrays. Both fence off an attempt that is not the row's,
// for a kept or a deleted done row alike.
TEST(JobStore, DoneRowsAreFencedByTheirAttemptInUniformAndMixedBatches) {
  for (const bool delete_done : {false, true}) {
    SCOPED_TRACE(delete_done ? "retention.done 0" : "done rows kept");
    TestSchema schema;
    schema.insert_jobs("a", 4);
    PgJobStore store(schema.config().database, "test");
    const auto ids = ids_of(store.claim({{{"default", 4}}, {"a"}, 4, "w", kLease}));
    ASSERT_EQ(ids.size(), 4u);
    // ids[1] and ids[3] are at attempt 2 now (rescued and claimed again by the same daemon).
    schema.exec("UPDATE {jobs} SET attempts = 2 WHERE id IN (" + std::to_string(ids[1]) + ", " +
                std::to_string(ids[3]) + ")");
    // Uniform: all say attempt 1; ids[1] is no longer at it.
    auto report = store.complete({{{ids[0], 1}, Outcome::kDone, "", Millis(0)},
                                  {{ids[1], 1}, Outcome::kDone, "", Millis(0)}},
                                 "w", delete_done);
    EXPECT_EQ(report.written, 1);
    EXPECT_EQ(report.stale, 1);
    // Mixed: ids[2] at 1 and ids[3] at 2 are right; ids[1] at 3 is not.
    report = store.complete({{{ids[2], 1}, Outcome::kDone, "", Millis(0)},
                             {{ids[3], 2}, Outcome::kDone, "", Millis(0)},
                             {{ids[1], 3}, Outcome::kDone, "", Millis(0)}},
                            "w", delete_done);
    EXPECT_EQ(report.written, 2);
    EXPECT_EQ(report.stale, 1);
    EXPECT_EQ(schema.count("status = 'running'"), 1);
    EXPECT_EQ(schema.query("SELECT id FROM {jobs} WHERE status = 'running'"),
              std::to_string(ids[1]));
    EXPECT_EQ(schema.count("status = 'done'"), delete_done ? 0 : 3);
  }
}

TEST(JobStore, DeleteDoneRemovesTheRow) {
  TestSchema schema;
  schema.insert_jobs("a", 2);
  PgJobStore store(schema.config().database, "test");
  const auto jobs = store.claim({{{"default", 2}}, {"a"}, 2, "w", kLease});
  const auto ids = ids_of(jobs);
  store.complete({{{ids[0], 1}, Outcome::kDone, "", Millis(0)},
                  {{ids[1], 1}, Outcome::kRetry, "x", Millis(0)}},
                 "w", true);
  EXPECT_EQ(schema.count(), 1);
  EXPECT_EQ(schema.query("SELECT status FROM {jobs}"), "failed");
}

// database.pooler: transaction sends every statement unnamed: each method works the same
// (the end-to-end test runs it through a real PgBouncer).
TEST(JobStore, EveryStatementRunsUnnamedForATransactionPooler) {
  TestSchema schema;
  schema.insert_jobs("a", 3);
  DatabaseConfig db = schema.config().database;
  db.pooler = "transaction";
  PgJobStore store(db, "test");
  const auto ids = ids_of(store.claim({{{"default", 3}}, {"a"}, 3, "w", Millis(60000)}));
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(store.heartbeat({{ids[0], 1}}, "w", Millis(60000)).kept.size(), 1u);
  const auto report = store.complete({{{ids[0], 1}, Outcome::kDone, {}, Millis(0)},
                                      {{ids[1], 1}, Outcome::kRetry, "x", Millis(60000)}},
                                     "w", false);
  EXPECT_EQ(report.written, 2);
  EXPECT_TRUE(store.lead_and_rescue("w", Millis(15000), schema.config().retry, 10).leader);
  EXPECT_FALSE(store.queue_stats({"default"}).empty());
  EXPECT_TRUE(store.paused_queues({"default"}).empty());
  EXPECT_EQ(store.prune(schema.config().retention, 10), 0);
  EXPECT_TRUE(store.next_due({"default"}, {"a"}, std::chrono::microseconds(0))
                  .next_in.has_value());  // the retry, a minute away
  EXPECT_EQ(store.schema_problem(), "");
  EXPECT_EQ(schema.query("SELECT string_agg(status, ',' ORDER BY id) FROM {jobs}"),
            "done,failed,running");
}

TEST(JobStore, HeartbeatExtendsOnlyOwnedLeases) {
  TestSchema schema;
  schema.insert_jobs("a", 2);
  PgJobStore store(schema.config().database, "test");
  const auto ids = ids_of(store.claim({{{"default", 2}}, {"a"}, 2, "w", Millis(1000)}));
  schema.exec("UPDATE {jobs} SET locked_by = 'other' WHERE id = " + std::to_string(ids[1]));
  const auto report = store.heartbeat({{ids[0], 1}, {ids[1], 1}}, "w", Millis(60000));
  EXPECT_EQ(report.kept, (std::vector<JobAttempt>{{ids[0], 1}}));
  EXPECT_TRUE(report.cancel_requested.empty());
  EXPECT_EQ(schema.count("locked_until > now() + interval '50 seconds'"), 1);
}

// A job rescued and claimed again by the same daemon while its earlier attempt's completion
// still waits (another session held the row) is in one heartbeat with both attempts: the
// current one is renewed, not taken for lost.
TEST(JobStore, AHeartbeatListingAJobWithTwoAttemptsRenewsTheCurrentOne) {
  TestSchema schema;
  schema.insert_jobs("a", 1);
  PgJobStore store(schema.config().database, "test");
  const auto id = ids_of(store.claim({{{"default", 1}}, {"a"}, 1, "w", Millis(1000)}))[0];
  schema.exec("UPDATE {jobs} SET attempts = 2 WHERE id = " + std::to_string(id));
  const auto report = store.heartbeat({{id, 1}, {id, 2}}, "w", Millis(60000));
  EXPECT_EQ(report.kept, (std::vector<JobAttempt>{{id, 2}}));
}

TEST(JobStore, RescueReturnsExpiredJobsOrKillsExhaustedOnes) {
  TestSchema schema;
  schema.exec("INSERT INTO {jobs} (type, max_attempts) VALUES ('a', 5), ('a', 1), ('a', 5)");
  PgJobStore store(schema.config().database, "test");
  const auto ids = ids_of(store.claim({{{"default", 3}}, {"a"}, 3, "crashed", kLease}));
  // Two leases expired; the third is still valid.
  schema.exec("UPDATE {jobs} SET locked_until = now() - interval '1 second' WHERE id IN (" +
              std::to_string(ids[0]) + "," + std::to_string(ids[1]) + ")");
  const auto report = store.lead_and_rescue("rescuer", Millis(15000), schema.config().retry, 100);
  EXPECT_TRUE(report.leader);
  EXPECT_EQ(report.failed, 1);
  EXPECT_EQ(report.dead, 1);
  EXPECT_EQ(schema.query("SELECT status || ' ' || (last_error LIKE 'rescued: lease expired%') "
                         "|| ' ' || coalesce(locked_by, 'none') FROM {jobs} WHERE id = " +
                         std::to_string(ids[0])),
            "failed true none");
  EXPECT_EQ(schema.query("SELECT status FROM {jobs} WHERE id = " + std::to_string(ids[1])), "dead");
  EXPECT_EQ(schema.query("SELECT status FROM {jobs} WHERE id = " + std::to_string(ids[2])),
            "running");
  // The late owner's completion is fenced off.
  EXPECT_EQ(store.complete({{{ids[0], 1}, Outcome::kDone, "", Millis(0)}}, "crashed", false).stale,
            1);
}

TEST(JobStore, OneLeaderAtATimeUntilItResignsOrExpires) {
  TestSchema schema;
  PgJobStore a(schema.config().database, "test");
  PgJobStore b(schema.config().database, "test");
  const RetryConfig retry = schema.config().retry;
  EXPECT_TRUE(a.lead_and_rescue("a", Millis(60000), retry, 10).leader);
  EXPECT_FALSE(b.lead_and_rescue("b", Millis(60000), retry, 10).leader);
  EXPECT_TRUE(a.lead_and_rescue("a", Millis(60000), retry, 10).leader);  // renewal
  a.resign("a");
  EXPECT_TRUE(b.lead_and_rescue("b", Millis(1), retry, 10).leader);
  // b's leadership lapses after 1 ms without renewal; a takes over.
  EXPECT_TRUE(
      testing::wait_until([&] { return a.lead_and_rescue("a", Millis(60000), retry, 10).leader; },
                          std::chrono::milliseconds(5000)));
  EXPECT_FALSE(b.lead_and_rescue("b", Millis(60000), retry, 10).leader);
}

TEST(JobStore, OnlyTheLeaderRescues) {
  TestSchema schema;
  schema.insert_jobs("a", 1);
  PgJobStore store(schema.config().database, "test");
  store.claim({{{"default", 1}}, {"a"}, 1, "crashed", kLease});
  schema.exec("UPDATE {jobs} SET locked_until = now() - interval '1 second'");
  PgJobStore leader(schema.config().database, "test");
  ASSERT_TRUE(leader.lead_and_rescue("leader", Millis(60000), schema.config().retry, 0).leader);
  const auto report = store.lead_and_rescue("follower", Millis(60000), schema.config().retry, 10);
  EXPECT_FALSE(report.leader);
  EXPECT_EQ(report.failed + report.dead, 0);
  EXPECT_EQ(schema.query("SELECT status FROM {jobs}"), "running");
}

TEST(JobStore, PruneDeletesOnlyExpiredFinishedJobsInBatches) {
  TestSchema schema;
  schema.exec(
      "INSERT INTO {jobs} (type, status, finished_at) SELECT 'a', 'done', now() - interval '2 "
      "days' "
      "FROM generate_series(1, 25)");
  schema.exec(
      "INSERT INTO {jobs} (type, status, finished_at) VALUES "
      "('a', 'done', now()), ('a', 'dead', now() - interval '2 days'), "
      "('a', 'cancelled', now() - interval '2 days'), ('a', 'pending', NULL)");
  PgJobStore store(schema.config().database, "test");
  RetentionConfig retention;  // done 24h, dead 7d
  EXPECT_EQ(store.prune(retention, 10), 10);
  EXPECT_EQ(store.prune(retention, 100), 16);  // 15 old done + 1 old cancelled
  EXPECT_EQ(store.prune(retention, 100), 0);
  EXPECT_EQ(schema.count(), 3);  // recent done, recent-enough dead, pending
}

// Retention next to millions of finished rows: each slice is an ordered range scan of
// jobs_finished_idx from where the last one stopped, whatever the statistics say (analysed
// with the backlog, or while nothing had expired yet) and in both plan cache modes; never a
// sequential scan (the whole table for a pass's last slice), a bitmap or a sort (every
// expired row for each slice) of jobs. (The check for blocked children of a parent is a
// subplan that runs for rows with has_children only; on an empty pgjobd_dependencies it is
// a bitmap scan of its parent index.) The slices delete exactly the expired rows, done ones
// first, and a row locked meanwhile is deleted by the next pass.
TEST(JobStore, PruneReadsTheFinishedIndexInOrderNextToMillionsOfFinishedRows) {
  const auto check_plans = [](TestSchema& schema, const std::string& when) {
    testing::StatementPlans plans(schema);
    for (const std::string cursors :
         {"'-infinity', '-infinity'", "now() - interval '47 hours', now() - interval '8 days'"}) {
      const std::string execute =
          std::string(stmt::kPrune) + "(86400000, 604800000, " + cursors + ", 1000)";
      for (const char* mode : testing::StatementPlans::kModes) {
        const std::string plan = plans.explain(execute, mode);
        const std::string context = when + ", " + mode + ", " + execute + "\n" + plan;
        std::size_t ordered = 0;
        for (std::size_t at = plan.find("Index Scan using jobs_finished_idx");
             at != std::string::npos;
             at = plan.find("Index Scan using jobs_finished_idx", at + 1)) {
          ++ordered;
        }
        EXPECT_EQ(ordered, 2u) << context;  // one per branch
        EXPECT_EQ(plan.find("Seq Scan"), std::string::npos) << context;
        EXPECT_EQ(plan.find("Bitmap Heap Scan on jobs"), std::string::npos) << context;
        EXPECT_EQ(plan.find("Sort"), std::string::npos) << context;
        EXPECT_NE(plan.find("SubPlan"), std::string::npos) << context;
      }
    }
  };
  constexpr int kExpiredDone = 500'000;
  constexpr int kRecent = 1'000'000;
  constexpr int kExpiredDead = 10'000;
  const std::string expired_done =
      "INSERT INTO {jobs} (type, status, attempts, started_at, finished_at) "
      "SELECT 'a', (ARRAY['done', 'cancelled'])[1 + (g % 50 = 0)::int], 1, now(), "
      "now() - interval '2 days' + g * interval '1 millisecond' FROM generate_series(1, " +
      std::to_string(kExpiredDone) + ") g";
  const auto recent = [](int n) {
    return "INSERT INTO {jobs} (type, status, attempts, started_at, finished_at) "
           "SELECT 'a', 'done', 1, now(), now() - interval '20 hours' + g * interval '50 ms' "
           "FROM generate_series(1, " +
           std::to_string(n) + ") g";
  };
  // Dead rows: as many older than retention.dead (7 days) as not.
  const std::string dead =
      "INSERT INTO {jobs} (type, status, attempts, started_at, finished_at) "
      "SELECT 'a', 'dead', 1, now(), now() - age + g * interval '1 second' "
      "FROM generate_series(1, " +
      std::to_string(kExpiredDead) +
      ") g, (VALUES (interval '8 days'), (interval '6 days')) a(age)";
  {
    TestSchema schema;
    schema.exec(recent(kRecent / 5));
    schema.exec("ANALYZE {jobs}");
    schema.exec(expired_done);
    schema.exec(dead);
    check_plans(schema, "analysed before anything expired");
  }
  TestSchema schema;
  schema.exec(recent(kRecent));
  schema.exec(expired_done);
  schema.exec(dead);
  schema.exec("ANALYZE {jobs}");
  check_plans(schema, "analysed with the backlog");

  // Another session holds one expired row: the pass skips it, the next one deletes it.
  const std::string held = schema.query(
      "SELECT id FROM {jobs} WHERE status = 'done' ORDER BY finished_at OFFSET 250000 LIMIT 1");
  auto holder = open_connection(schema.config().database, "holder");
  pqxx::work lock(*holder);
  lock.exec("SELECT 1 FROM " + quote_identifier(schema.name()) + ".jobs WHERE id = " + held +
            " FOR UPDATE");
  PgJobStore store(schema.config().database, "test");
  const RetentionConfig retention;  // done 24h, dead 7d
  int deleted = 0;
  int slices = 0;
  for (int n = 1000; n == 1000 && slices < 10'000; ++slices) {
    n = store.prune(retention, 1000);
    deleted += n;
  }
  EXPECT_EQ(deleted, kExpiredDone + kExpiredDead - 1);
  EXPECT_EQ(schema.count("id = " + held), 1);
  lock.abort();
  EXPECT_EQ(store.prune(retention, 1000), 1);
  EXPECT_EQ(schema.count("finished_at < now() - interval '24 hours' AND status <> 'dead'"), 0);
  EXPECT_EQ(schema.count("status = 'dead'"), kExpiredDead);
  EXPECT_EQ(schema.count(), kRecent + kExpiredDead);
}

TEST(JobStore, QueueStatsCountLiveJobsAndAgeTheOldestDueOne) {
  TestSchema schema;
  schema.exec(
      "INSERT INTO {jobs} (type, queue, run_at) VALUES "
      "('a', 'q1', now() - interval '100 seconds'), ('a', 'q1', now()),"
      "('a', 'q2', now() + interval '1 hour')");
  schema.exec(
      "INSERT INTO {jobs} (type, queue, status, finished_at) VALUES "
      "('a', 'q1', 'done', now()), ('a', 'q1', 'dead', now()), ('a', 'q2', 'cancelled', now())");
  schema.exec(
      "INSERT INTO {jobs} (type, queue, status, attempts, run_at) VALUES "
      "('a', 'q2', 'failed', 1, now() - interval '300 seconds'), "
      "('a', 'q2', 'failed', 1, now() + interval '1 hour')");
  schema.exec(
      "INSERT INTO {jobs} (type, queue, status, attempts, locked_by, locked_until) VALUES "
      "('a', 'q1', 'running', 1, 'w', now() + interval '1 minute'), "
      "('a', 'q1', 'running', 1, 'w', now() + interval '1 minute')");
  // Queues this daemon does not serve are not counted (nor, in a test, the one it
  // serves that has nothing live).
  schema.exec(
      "INSERT INTO {jobs} (type, queue, status, attempts, run_at, locked_by, locked_until) "
      "VALUES ('a', 'q3', 'pending', 0, now() - interval '1 hour', NULL, NULL), "
      "('a', 'q3', 'running', 1, now(), 'w', now() + interval '1 minute')");
  PgJobStore store(schema.config().database, "test");
  std::map<std::string, QueueStatsRow> rows;
  for (const auto& row : store.queue_stats({"q1", "q2", "q4"})) {
    rows[row.queue + "/" + row.status] = row;
  }
  ASSERT_EQ(rows.size(), 4u);  // finished jobs and q3 are not counted
  EXPECT_EQ(rows["q1/running"].count, 2);
  EXPECT_EQ(rows["q1/running"].oldest_due_age_seconds, 0.0);  // running jobs are not due
  EXPECT_EQ(rows["q2/failed"].count, 2);
  EXPECT_GE(rows["q2/failed"].oldest_due_age_seconds, 299.0);
  EXPECT_EQ(rows["q1/pending"].count, 2);
  EXPECT_GE(rows["q1/pending"].oldest_due_age_seconds, 99.0);
  EXPECT_LT(rows["q1/pending"].oldest_due_age_seconds, 200.0);
  EXPECT_EQ(rows["q2/pending"].count, 1);
  EXPECT_EQ(rows["q2/pending"].oldest_due_age_seconds, 0.0);  // nothing due
}

// Blocked jobs (waiting for their parents) are counted apart, for pgjobd_queue_blocked; they
// are never due, however old their run_at.
TEST(JobStore, QueueStatsCountBlockedJobsOfTheServedQueues) {
  TestSchema schema;
  schema.exec(
      "INSERT INTO {jobs} (type, queue, status, blocked_by, run_at) VALUES "
      "('a', 'q1', 'blocked', 1, now() - interval '1 hour'), ('a', 'q1', 'blocked', 2, now()), "
      "('a', 'q3', 'blocked', 1, now())");
  PgJobStore store(schema.config().database, "test");
  const auto rows = store.queue_stats({"q1", "q2"});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].queue + "/" + rows[0].status, "q1/blocked");
  EXPECT_EQ(rows[0].count, 2);
  EXPECT_EQ(rows[0].oldest_due_age_seconds, 0.0);
}

// Rows older than schema v3 may hold run_at = '-infinity' (the constraint is dropped here
// to write one): the
// age of such a job is capped at 100 years, where `now() - min(run_at)` failed the whole
// query with "cannot subtract infinite timestamps" and blinded every queue's gauges.
TEST(JobStore, QueueStatsSurviveAnInfiniteRunAt) {
  TestSchema schema;
  schema.exec("ALTER TABLE {jobs} DROP CONSTRAINT jobs_run_at_finite");
  schema.exec(
      "INSERT INTO {jobs} (type, queue, run_at) VALUES "
      "('a', 'q1', '-infinity'), ('a', 'q1', now() - interval '10 seconds'), "
      "('a', 'q2', 'infinity'), ('a', 'q2', now() - interval '20 seconds')");
  PgJobStore store(schema.config().database, "test");
  std::map<std::string, QueueStatsRow> rows;
  for (const auto& row : store.queue_stats({"q1", "q2"})) rows[row.queue + "/" + row.status] = row;
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows["q1/pending"].count, 2);
  const double hundred_years = 100 * 365.25 * 86400;
  EXPECT_TRUE(std::isfinite(rows["q1/pending"].oldest_due_age_seconds));
  EXPECT_GE(rows["q1/pending"].oldest_due_age_seconds, hundred_years - 60);
  EXPECT_LE(rows["q1/pending"].oldest_due_age_seconds, hundred_years + 60);
  EXPECT_EQ(rows["q2/pending"].count, 2);  // 'infinity' is never due
  EXPECT_GE(rows["q2/pending"].oldest_due_age_seconds, 19.0);
  EXPECT_LT(rows["q2/pending"].oldest_due_age_seconds, 120.0);
}

// The queue gauges' statement every 30 s on every daemon: each (queue, status) is counted
// up to StatisticsStore::kQueueDepthCounted on its partial index, never to the end (10M
// pending jobs took a parallel scan of 3.6 s on three processes, over the call timeout),
// and never by a sequential scan (a custom plan expecting the rows spread evenly would
// read the done rows before them); a larger group gets the planner's estimate, which
// jobs_queue_status_stats keeps close when queues hold different mixes of statuses (the
// product of the queue's and the status's shares is 0.3 of the truth here). Fails with
// the statement that counted every row (a Parallel Seq Scan) or without the statistics.
TEST(JobStore, QueueStatsCountABoundedRangeAndEstimateLargerQueues) {
  constexpr long long kBound = StatisticsStore::kQueueDepthCounted;
  constexpr int kDone = 600'000, kPending = 250'000, kOtherPending = 3;
  TestSchema schema;
  schema.exec(
      "INSERT INTO {jobs} (type, queue, status, attempts, started_at, finished_at) "
      "SELECT 'a', 'archive', 'done', 1, now(), now() FROM generate_series(1, " +
      std::to_string(kDone) + ")");
  schema.exec(
      "INSERT INTO {jobs} (type, queue, run_at) SELECT 'a', 'big', "
      "now() - interval '1 minute' FROM generate_series(1, " +
      std::to_string(kPending) + ")");
  schema.exec(
      "INSERT INTO {jobs} (type, queue, status, attempts, run_at) VALUES "
      "('a', 'small', 'pending', 0, now() + interval '1 hour'), "
      "('a', 'small', 'pending', 0, now()), ('a', 'small', 'pending', 0, now()), "
      "('a', 'small', 'failed', 1, now() - interval '5 minutes')");
  schema.exec("ANALYZE {jobs}");

  // The plan as the store makes it: kQueueStatsPlanning first, in the same transaction.
  const auto conn = open_connection(schema.config().database, "test-plans");
  for (const auto& statement : stmt::job_statements(quote_identifier(schema.name()))) {
    if (statement.name == std::string(stmt::kQueueStats) ||
        statement.name == std::string(stmt::kQueueStatsPlanning)) {
      pqxx::nontransaction(*conn).exec(std::string("PREPARE ") + statement.name + " AS " +
                                       statement.sql);
    }
  }
  for (const char* mode : testing::StatementPlans::kModes) {
    pqxx::work txn(*conn);
    txn.exec(std::string("SET LOCAL plan_cache_mode = ") + mode);
    txn.exec(std::string("EXECUTE ") + stmt::kQueueStatsPlanning);
    const std::string plan =
        plan_of(txn, std::string("EXPLAIN EXECUTE ") + stmt::kQueueStats +
                         "('{big,small,archive}', " + std::to_string(kBound) + ")");
    const std::string context = std::string(mode) + "\n" + plan;
    EXPECT_EQ(plan.find("Seq Scan"), std::string::npos) << context;
    EXPECT_EQ(plan.find("Bitmap"), std::string::npos) << context;
    EXPECT_EQ(plan.find("Sort Key: j"), std::string::npos) << context;  // a sort of jobs rows
    EXPECT_EQ(plan.find("Gather"), std::string::npos) << context;
    EXPECT_EQ(plan.find("JIT"), std::string::npos) << context;  // compiled at each round
    EXPECT_NE(plan.find("jobs_claim_idx"), std::string::npos) << context;
    EXPECT_NE(plan.find("jobs_queue_status_idx"), std::string::npos) << context;  // failed
  }

  PgJobStore store(schema.config().database, "test");
  std::map<std::string, QueueStatsRow> rows;
  for (const auto& row : store.queue_stats({"big", "small", "archive"})) {
    rows[row.queue + "/" + row.status] = row;
  }
  ASSERT_EQ(rows.size(), 3u);  // done jobs are not counted
  EXPECT_GE(rows["big/pending"].count, static_cast<double>(kBound));
  EXPECT_NEAR(rows["big/pending"].count, kPending, kPending * 0.15);
  EXPECT_GE(rows["big/pending"].oldest_due_age_seconds, 59.0);
  EXPECT_EQ(rows["small/pending"].count, kOtherPending);         // exact below the bound
  EXPECT_EQ(rows["small/pending"].oldest_due_age_seconds, 0.0);  // the failed job is older
  EXPECT_EQ(rows["small/failed"].count, 1);
  EXPECT_GE(rows["small/failed"].oldest_due_age_seconds, 299.0);
}

// A generic plan is made once, after five executions, for the table as it is then, and
// kept until an ANALYZE or VACUUM of the table invalidates it: made on a new, nearly empty
// table it reads rows with a sequential scan, however large the table grows (a stream into
// a new schema fell to about 100 jobs/s through the claim; the completion scanned every
// row of the table for each batch). So a session either plans each execution or pins its
// plans to the indexes (StatementSet). Here every statement of the claim's and the
// completions' sessions runs past five executions on a table analysed while empty; once
// it holds 50,000 rows nobody has analysed, the same session still reads them through
// jobs_claim_idx and jobs_pkey. Without enable_seqscan = off, the pinned session fails
// (its one plan, made on the empty table, scans it); without force_custom_plan, the other
// fails on the completion.
TEST(JobStore, NoSessionKeepsAPlanMadeWhileTheTableWasEmpty) {
  struct Run {
    const char* name;  // the statement
    std::vector<std::string> args;
    std::vector<const char*> indexes;      // that its plan must use
    std::vector<const char*> unused = {};  // and must not
  };
  const char* const kOneResult = R"({"{\"a\": 1}"})";  // a jsonb[] of one result
  const std::vector<Run> runs = {
      {stmt::kClaim,
       {"{default}", "{1}", "{a,b}", "1", "w", "30000", "", "100000"},
       {"jobs_claim_type_idx", "Tid Scan on jobs"}},
      {stmt::kClaimWithDue,
       {"{default}", "{1}", "{a}", "1", "w", "30000", "", "100000", "{default}"},
       {"jobs_claim_type_idx", "jobs_claim_idx", "Tid Scan on jobs"}},
      {stmt::kNextDue, {"{default}", "{a}", "1000000"}, {"jobs_claim_idx"}},
      // By id alone: the claim indexes' dead entries are what it is for (claim_store.hpp).
      {stmt::kClaimIds,
       {"{default}", "{1}", "{a,b}", "1", "w", "30000", "", "100000", "{1,2}"},
       {"jobs_pkey", "Tid Scan on jobs"},
       {"jobs_claim_type_idx", "jobs_claim_idx"}},
      {stmt::kClaimInRoom,
       {"{default}", "{1}", "{a,b}", "1", "w", "30000", "", "100000"},
       {"jobs_claim_type_idx", "Tid Scan on jobs"}},
      {stmt::kComplete,
       {"{1}", "{1}", "{2}", "{1}", "{failed}", "{e}", "{1000}", "w", "1", kOneResult, "50ms"},
       {"jobs_pkey"}},
      {stmt::kCompleteDeleteDone,
       {"{1}", "{1}", "{2}", "{1}", "{failed}", "{e}", "{1000}", "w", "1", "{}", "50ms"},
       {"jobs_pkey"}},
      {stmt::kCompleteSkipLocked,
       {"{1}", "{1}", "{2}", "{1}", "{failed}", "{e}", "{1000}", "w", "1", kOneResult},
       {"jobs_pkey"}},
      {stmt::kCompleteDeleteDoneSkipLocked,
       {"{1}", "{1}", "{2}", "{1}", "{failed}", "{e}", "{1000}", "w", "1", "{}"},
       {"jobs_pkey"}},
      {stmt::kHeartbeat, {"{1}", "{1}", "w", "30000"}, {"jobs_pkey"}}};
  for (const Planning planning : {Planning::kEachExecution, Planning::kPinned}) {
    SCOPED_TRACE(planning == Planning::kPinned ? "pinned" : "planned at each execution");
    TestSchema schema;
    schema.exec("ALTER TABLE {jobs} SET (autovacuum_enabled = false)");  // no ANALYZE meanwhile
    schema.exec("ANALYZE {jobs}");  // the planner knows the table is empty
    pqxx::connection conn(schema.config().database.url);
    const StatementSet statements(stmt::job_statements(quote_identifier(schema.name())), false,
                                  planning);
    statements.prepare(conn);
    std::vector<std::string> executions;
    {
      pqxx::work txn(conn);
      for (const Run& run : runs) {
        for (int i = 0; i < 7; ++i)
          txn.exec_prepared(run.name, pqxx::prepare::make_dynamic_params(run.args));
        std::string execute = std::string(run.name) + "(";
        for (const std::string& arg : run.args)
          execute += (execute.back() == '(' ? "" : ", ") + txn.quote(arg);
        executions.push_back(execute + ")");
      }
      txn.commit();
    }
    schema.exec(
        "INSERT INTO {jobs} (type, status, attempts, started_at, finished_at) "
        "SELECT 'a', 'done', 1, now(), now() FROM generate_series(1, 50000)");
    schema.insert_jobs("a", 3);
    pqxx::nontransaction txn(conn);
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const std::string plan = plan_of(txn, "EXPLAIN EXECUTE " + executions[i]);
      for (const char* index : runs[i].indexes)
        EXPECT_NE(plan.find(index), std::string::npos) << executions[i] << "\n" << plan;
      for (const char* index : runs[i].unused)
        EXPECT_EQ(plan.find(index), std::string::npos) << executions[i] << "\n" << plan;
      EXPECT_EQ(plan.find("Seq Scan on jobs"), std::string::npos) << executions[i] << "\n" << plan;
      EXPECT_EQ(plan.find("Bitmap Index Scan on jobs_claim"), std::string::npos)
          << executions[i] << "\n"
          << plan;
    }
  }
}

// Two statements writing the same running rows must lock them in one order, or they
// deadlock, and PostgreSQL breaks a deadlock only after a second (short leases ran out
// and their jobs ran twice when the completion and the heartbeat met). Both lock in id
// order: here another transaction holds job 1 while the statement writes jobs 1 and 2;
// the statement must wait for job 1 before it takes job 2, so job 2 stays free. Job 2 is
// written first, so that in the heap it comes before job 1.
class LockOrderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    schema_.exec(
        "INSERT INTO {jobs} (id, type, status, attempts, locked_by, locked_until, started_at) "
        "SELECT i, 'a', 'running', 1, 'w', now() + interval '1 hour', now() "
        "FROM generate_series(2, 1, -1) i");  // job 2 first in the heap
  }

  // Runs `statement` on `conn` while another transaction holds job 1, and returns whether
  // job 2 was free while the statement waited.
  bool job_2_free_while_waiting(pqxx::connection& conn,
                                const std::function<void(pqxx::connection&)>& statement) {
    pqxx::connection holder(schema_.config().database.url);
    pqxx::work hold(holder);
    hold.exec("SELECT 1 FROM " + jobs() + " WHERE id = 1 FOR UPDATE");
    const int waiter = conn.backendpid();
    std::string failure;
    std::thread writer([&] {
      try {
        statement(conn);
      } catch (const std::exception& e) {
        failure = e.what();
      }
    });
    pqxx::connection observer(schema_.config().database.url);
    const bool waiting = testing::wait_until(
        [&] {
          pqxx::nontransaction txn(observer);
          return txn
              .exec_params(
                  "SELECT coalesce(wait_event_type = 'Lock', false) FROM pg_stat_activity "
                  "WHERE pid = $1",
                  waiter)[0][0]
              .as<bool>();
        },
        std::chrono::seconds(10));
    bool free = false;
    if (waiting) {
      try {
        pqxx::work probe(observer);
        probe.exec("SELECT 1 FROM " + jobs() + " WHERE id = 2 FOR UPDATE NOWAIT");
        free = true;
      } catch (const pqxx::sql_error&) {  // lock_not_available: the statement holds it
      }
    }
    hold.abort();
    writer.join();
    EXPECT_EQ(failure, "");
    EXPECT_TRUE(waiting) << "the statement never waited for job 1";
    return free;
  }

  std::string jobs() const { return quote_identifier(schema_.name()) + ".jobs"; }

  TestSchema schema_;
};

// The heartbeat takes no part in that order: it skips a row another session holds
// instead of waiting (lease_renewer_pgtest.cpp), whatever its plan, so it can neither
// deadlock with a completion nor wait behind one.
TEST_F(LockOrderTest, TheHeartbeatNeverWaitsWhateverItsPlan) {
  pqxx::connection conn(schema_.config().database.url);
  const StatementSet statements(stmt::job_statements(quote_identifier(schema_.name())), false,
                                Planning::kEachExecution);
  statements.prepare(conn);
  // The plan that met the completion: a bitmap scan, which reads the heap in its order.
  conn.set_variable("enable_indexscan", "off");
  conn.set_variable("enable_seqscan", "off");
  conn.set_variable("lock_timeout", "'5s'");  // the old statement's wait shows as an error
  {
    pqxx::nontransaction txn(conn);
    // libpqxx prepares a statement at its first execution.
    ASSERT_EQ(statements.execute(txn, stmt::kHeartbeat, "{1,2}", "{1,1}", "w", 30000).size(), 2u);
    const std::string plan = plan_of(
        txn, std::string("EXPLAIN EXECUTE ") + stmt::kHeartbeat + "('{1,2}', '{1,1}', 'w', 30000)");
    ASSERT_NE(plan.find("Bitmap Heap Scan"), std::string::npos) << plan;
  }
  pqxx::connection holder(schema_.config().database.url);
  pqxx::work hold(holder);
  hold.exec("SELECT 1 FROM " + jobs() + " WHERE id = 1 FOR UPDATE");
  pqxx::nontransaction txn(conn);
  const auto rows = statements.execute(txn, stmt::kHeartbeat, "{1,2}", "{1,1}", "w", 30000);
  std::map<std::int64_t, bool> renewed;
  for (const auto& row : rows) renewed[row[0].as<std::int64_t>()] = row[3].as<bool>();
  EXPECT_EQ(renewed, (std::map<std::int64_t, bool>{{1, false}, {2, true}}));
}

// A batch with both outcomes: job 2 done, job 1 failed. Without `ordered`, the done rows
// were written (and locked) before the others.
TEST_F(LockOrderTest, ACompletionOfMixedOutcomesLocksInIdOrder) {
  pqxx::connection conn(schema_.config().database.url);
  const StatementSet statements(stmt::job_statements(quote_identifier(schema_.name())), false,
                                Planning::kPinned);
  statements.prepare(conn);
  int written = 0;
  EXPECT_TRUE(job_2_free_while_waiting(conn, [&](pqxx::connection& c) {
    pqxx::nontransaction txn(c);
    written = statements
                  .execute(txn, stmt::kComplete, "{2}", "{1}", "{1}", "{1}", "{failed}", "{e}",
                           "{1000}", "w", 1, std::optional<std::string>(),
                           "0")[0][0]  // lock_timeout 0: waits
                  .as<int>();
  }));
  EXPECT_EQ(written, 2);
  EXPECT_EQ(schema_.count("id = 2 AND status = 'done'"), 1);
  EXPECT_EQ(schema_.count("id = 1 AND status = 'failed'"), 1);
}

// Switched off, a sequential scan still happens where nothing replaces it (the limited
// claim reads the small pgjobd_limits whole), costed at 10^10: enough for PostgreSQL to
// compile the statement to machine code at every execution (155 ms for the first limited
// claim of a burst). A pinned session switches JIT off with the scans.
TEST(JobStore, APinnedSessionCompilesNoStatement) {
  TestSchema schema;
  pqxx::connection conn(schema.config().database.url);
  StatementSet(stmt::job_statements(quote_identifier(schema.name())), false, Planning::kPinned)
      .prepare(conn);
  pqxx::nontransaction txn(conn);
  const std::string plan = plan_of(txn, "EXPLAIN SELECT bool_or(key IS NOT NULL) FROM " +
                                            quote_identifier(schema.name()) + ".pgjobd_limits");
  EXPECT_NE(plan.find("Seq Scan on pgjobd_limits  (cost=10000000000"), std::string::npos) << plan;
  EXPECT_EQ(plan.find("JIT"), std::string::npos) << plan;
}

// The statistics run on every daemon every 30 s: each branch stays on its partial index
// (claim: pending/failed, lease: running, jobs_blocked_idx: blocked) with the queue filter, never
// scanning finished rows. (By hand at 1M done rows in 1,000 queues: 0.2 ms for one queue, 9 ms for
// all.)
TEST(JobStore, QueueStatsUseThePartialIndexes) {
  TestSchema schema;
  schema.exec(
      "INSERT INTO {jobs} (type, queue, status, attempts, started_at, finished_at) "
      "SELECT 'a', 'q' || (i % 100), 'done', 1, now(), now() FROM generate_series(1, 20000) i");
  schema.exec(
      "INSERT INTO {jobs} (type, queue) SELECT 'a', 'q' || i FROM generate_series(1, 50) i");
  schema.exec("ANALYZE {jobs}");
  testing::StatementPlans plans(schema);
  for (const char* mode : testing::StatementPlans::kModes) {
    const std::string plan =
        plans.explain(std::string(stmt::kQueueStats) + "('{q1,q2,default}', 100000)", mode);
    EXPECT_NE(plan.find("jobs_claim"), std::string::npos) << mode << "\n" << plan;  // either
    EXPECT_NE(plan.find("jobs_lease_idx"), std::string::npos) << mode << "\n" << plan;
    EXPECT_NE(plan.find("jobs_blocked_idx"), std::string::npos) << mode << "\n" << plan;
    EXPECT_EQ(plan.find("Seq Scan"), std::string::npos) << mode << "\n" << plan;
  }
}

TEST(JobStore, ConnectionErrorsBecomeDbError) {
  DatabaseConfig db;
  db.url = "postgresql://nobody:secret@127.0.0.1:1/none?connect_timeout=2";
  PgJobStore store(db, "test");
  try {
    store.connect();
    FAIL() << "connected to a closed port";
  } catch (const DbError& e) {
    EXPECT_TRUE(e.connection_lost());
    EXPECT_EQ(std::string(e.what()).find("secret"), std::string::npos) << e.what();
  }
}

// ---- next_due: when the next job this daemon could claim becomes due -----------------

double seconds_of(std::optional<std::chrono::microseconds> wait) {
  return std::chrono::duration<double>(wait.value()).count();
}

// The wait for the next job not due yet, as next_due answers it.
std::optional<std::chrono::microseconds> next_in(PgJobStore& store,
                                                 const std::vector<std::string>& queues,
                                                 const std::vector<std::string>& types) {
  return store.next_due(queues, types, std::chrono::seconds(1)).next_in;
}

// Rows older than schema v3 may hold an infinite run_at (the constraint is dropped here
// to write them): neither fails the query.
TEST(JobStore, NextDueIsTheEarliestFutureJobTheDaemonCouldClaim) {
  TestSchema schema;
  schema.exec("ALTER TABLE {jobs} DROP CONSTRAINT jobs_run_at_finite");
  schema.exec("INSERT INTO " + quote_identifier(schema.name()) +
              ".pgjobd_queues (queue, paused) VALUES ('paused', true), ('q2', false)");
  // Sooner than the answer, but not for this daemon: another type, a queue it does not
  // serve, a paused queue, a finished or running row, a job already due (which the claim
  // would have taken, or another session holds).
  schema.exec(
      "INSERT INTO {jobs} (type, queue, priority, run_at, status, locked_by, locked_until) "
      "VALUES ('other', 'default', 0, now() + interval '1 second', 'pending', NULL, NULL),"
      "('a', 'unserved', 0, now() + interval '1 second', 'pending', NULL, NULL),"
      "('a', 'paused', 0, now() + interval '1 second', 'pending', NULL, NULL),"
      "('a', 'default', 0, now() + interval '1 second', 'done', NULL, NULL),"
      "('a', 'default', 0, now() + interval '1 second', 'running', 'w', now()),"
      "('a', 'default', 9, now() - interval '1 minute', 'pending', NULL, NULL),"
      "('a', 'default', 0, '-infinity', 'pending', NULL, NULL),"
      // Candidates, over several priorities (each is probed on its own) and both statuses.
      "('a', 'default', 5, now() + interval '30 seconds', 'pending', NULL, NULL),"
      "('a', 'default', 0, now() + interval '20 seconds', 'pending', NULL, NULL),"
      "('a', 'default', -3, 'infinity', 'pending', NULL, NULL),"
      "('b', 'q2', 1, now() + interval '12 seconds', 'failed', NULL, NULL),"
      "('a', 'q2', 1, now() + interval '40 seconds', 'pending', NULL, NULL)");
  PgJobStore store(schema.config().database, "test");
  const std::vector<std::string> queues = {"default", "q2", "paused"};
  const double wait = seconds_of(next_in(store, queues, {"a", "b"}));
  EXPECT_GT(wait, 11.0);  // the failed 'b' in q2: a retry waiting for its backoff
  EXPECT_LE(wait, 12.0);
  EXPECT_NEAR(seconds_of(next_in(store, queues, {"a"})), 20.0, 1.0);
  EXPECT_NEAR(seconds_of(next_in(store, {"q2"}, {"a"})), 40.0, 1.0);
  // Resumed, the queue's job counts.
  schema.exec("UPDATE " + quote_identifier(schema.name()) +
              ".pgjobd_queues SET paused = false WHERE queue = 'paused'");
  EXPECT_LE(seconds_of(next_in(store, queues, {"a"})), 1.0);
  // Only 'infinity' left: a day (the fetcher waits at most poll.max_interval anyway).
  schema.exec("DELETE FROM {jobs} WHERE run_at > now() AND run_at < 'infinity'");
  EXPECT_NEAR(seconds_of(next_in(store, queues, {"a", "b"})), 86400.0, 60.0);
  schema.exec("DELETE FROM {jobs} WHERE run_at = 'infinity'");
  EXPECT_FALSE(next_in(store, queues, {"a", "b"}).has_value());
  EXPECT_FALSE(next_in(store, {}, {"a"}).has_value());
}

// The second answer: how long ago the last job this daemon could claim came due, within
// the look-back (the fetcher claims again if that may have been after its claim looked).
TEST(JobStore, NextDueTellsHowLongAgoTheLastDueJobCameDueWithinTheLookBack) {
  TestSchema schema;
  schema.exec("INSERT INTO " + quote_identifier(schema.name()) +
              ".pgjobd_queues (queue, paused) VALUES ('paused', true)");
  // Due more recently than the answer, but not for this daemon (as above), and the answer
  // in a lower priority than an older due job.
  schema.exec(
      "INSERT INTO {jobs} (type, queue, priority, run_at, status, locked_by, locked_until) "
      "VALUES ('other', 'default', 0, now() - interval '1 second', 'pending', NULL, NULL),"
      "('a', 'unserved', 0, now() - interval '1 second', 'pending', NULL, NULL),"
      "('a', 'paused', 0, now() - interval '1 second', 'pending', NULL, NULL),"
      "('a', 'default', 0, now() - interval '1 second', 'done', NULL, NULL),"
      "('a', 'default', 0, now() - interval '1 second', 'running', 'w', now()),"
      "('a', 'default', 7, now() - interval '50 seconds', 'pending', NULL, NULL),"
      "('a', 'default', 2, now() - interval '30 seconds', 'failed', NULL, NULL),"
      "('a', 'default', 2, now() - interval '40 seconds', 'pending', NULL, NULL),"
      "('a', 'default', 0, now() + interval '20 seconds', 'pending', NULL, NULL)");
  PgJobStore store(schema.config().database, "test");
  const std::vector<std::string> queues = {"default", "paused"};
  const DueTimes due = store.next_due(queues, {"a"}, std::chrono::minutes(1));
  EXPECT_NEAR(seconds_of(due.last_due_ago), 30.0, 1.0);
  EXPECT_NEAR(seconds_of(due.next_in), 20.0, 1.0);  // both at once
  // Older than the look-back: not looked at.
  EXPECT_FALSE(store.next_due(queues, {"a"}, std::chrono::seconds(25)).last_due_ago.has_value());
  EXPECT_NEAR(seconds_of(store.next_due(queues, {"a"}, std::chrono::seconds(45)).last_due_ago),
              30.0, 1.0);
  // Nothing due: only the wait.
  schema.exec("DELETE FROM {jobs} WHERE run_at <= now() AND type = 'a' AND queue = 'default'");
  const DueTimes later = store.next_due(queues, {"a"}, std::chrono::minutes(1));
  EXPECT_FALSE(later.last_due_ago.has_value());
  EXPECT_TRUE(later.next_in.has_value());
}

// The claim's own answer (JobStore::claim_with_due): after a short claim, when the next
// job this daemon could claim is due, by the same rules as next_due and from the claim's
// own snapshot, so a due job it left (locked by another session) is not reported as come
// due; nothing after a full claim, nor when no queue is asked about.
TEST(JobStore, AShortClaimSaysWhenTheNextJobIsDue) {
  TestSchema schema;
  schema.exec("INSERT INTO " + quote_identifier(schema.name()) +
              ".pgjobd_queues (queue, paused) VALUES ('paused', true)");
  schema.exec(
      "INSERT INTO {jobs} (type, queue, priority, run_at) VALUES "
      "('a', 'default', 0, now() - interval '2 seconds'),"
      "('a', 'default', 0, now() - interval '1 second'),"
      // Sooner than the answer, but not for this daemon.
      "('other', 'default', 0, now() + interval '1 second'),"
      "('a', 'paused', 0, now() + interval '1 second'),"
      "('a', 'unserved', 0, now() + interval '1 second'),"
      // The answers: in another priority than the claimed jobs, and in another queue.
      "('a', 'default', 3, now() + interval '20 seconds'),"
      "('a', 'q2', 0, now() + interval '30 seconds')");
  PgJobStore store(schema.config().database, "test");
  const std::vector<std::string> served = {"default", "q2", "paused"};
  const ClaimRequest request{{{"default", 3}}, {"a"}, 3, "w", kLease};
  // The first due job is another session's: the claim skips it and takes the second.
  pqxx::connection other(schema.config().database.url);
  pqxx::work holder(other);
  holder.exec("SELECT id FROM " + quote_identifier(schema.name()) +
              ".jobs WHERE run_at < now() - interval '1500 milliseconds' FOR UPDATE");
  const ClaimWithDue first = store.claim_with_due(request, served);
  ASSERT_EQ(first.jobs.size(), 1u);
  ASSERT_TRUE(first.due.has_value());
  EXPECT_NEAR(seconds_of(first.due->next_in), 20.0, 1.0);
  EXPECT_FALSE(first.due->last_due_ago.has_value());
  holder.abort();
  EXPECT_NEAR(seconds_of(store.claim_with_due(request, {"q2"}).due->next_in), 30.0, 1.0);
  // Full: nothing asked.
  schema.exec("INSERT INTO {jobs} (type, run_at) VALUES ('a', now() - interval '1 second')");
  const ClaimWithDue full = store.claim_with_due({{{"default", 1}}, {"a"}, 1, "w", kLease}, served);
  EXPECT_EQ(full.jobs.size(), 1u);
  EXPECT_FALSE(full.due.has_value());
  EXPECT_FALSE(store.claim_with_due(request, {}).due.has_value());  // no queue: no question
  // No job due later: an answer without a wait.
  schema.exec("DELETE FROM {jobs} WHERE run_at > now()");
  const ClaimWithDue none = store.claim_with_due(request, served);
  ASSERT_TRUE(none.due.has_value());
  EXPECT_FALSE(none.due->next_in.has_value());
  EXPECT_EQ(schema.count("status = 'running'"), 3);
}

// Asked after every short claim: each probe stays on the claim index, whatever the table
// holds besides. (By hand, PostgreSQL 15, 2M done rows, 200,000 future jobs and 200,000
// due ones, nine in ten of a type not served, in 3 queues and 5 priorities, see
// kNextDueSql: EXPLAIN ANALYZE shows only Index Scans (Index Only for the priorities,
// Backward for the last due) on jobs_claim_idx, 0.45-0.7 ms in all (0.33 without the
// last due); a look-back of 100 s instead of the fetcher's second, reading past the
// unserved due jobs, 2.9 ms.)
TEST(JobStore, NextDueProbesTheClaimIndex) {
  TestSchema schema;
  schema.exec(
      "INSERT INTO {jobs} (type, queue, status, attempts, started_at, finished_at) "
      "SELECT 'a', 'q' || (i % 3), 'done', 1, now(), now() FROM generate_series(1, 20000) i");
  schema.exec(
      "INSERT INTO {jobs} (type, queue, priority, run_at) "
      "SELECT 'a', 'q' || (i % 3), i % 5, now() + i * interval '1 second' "
      "FROM generate_series(1, 5000) i");
  schema.exec("ANALYZE {jobs}");
  testing::StatementPlans plans(schema);
  for (const char* mode : testing::StatementPlans::kModes) {
    const std::string plan =
        plans.explain(std::string(stmt::kNextDue) + "('{q0,q1,q2}', '{a}', 5000)", mode);
    EXPECT_NE(plan.find("jobs_claim_idx"), std::string::npos) << mode << "\n" << plan;
    EXPECT_EQ(plan.find("Seq Scan on jobs"), std::string::npos) << mode << "\n" << plan;
    EXPECT_EQ(plan.find("Bitmap"), std::string::npos) << mode << "\n" << plan;  // reads all
    EXPECT_EQ(plan.find("Sort"), std::string::npos) << mode << "\n" << plan;
    // The run_at bounds are index conditions, not filters over the queue's entries: the
    // future one, and the past one (the look-back) read backwards.
    EXPECT_NE(plan.find("(run_at > now()))"), std::string::npos) << mode << "\n" << plan;
    EXPECT_NE(plan.find("(run_at <= now()) AND (run_at > (now() - "), std::string::npos)
        << mode << "\n"
        << plan;
    EXPECT_NE(plan.find("Index Scan Backward using jobs_claim_idx"), std::string::npos)
        << mode << "\n"
        << plan;
  }
  // The claim's own answer (JobStore::claim_with_due) makes the same probes for the future,
  // and only those: nothing is read backwards.
  for (const char* mode : testing::StatementPlans::kModes) {
    const std::string plan =
        plans.explain(std::string(stmt::kClaimWithDue) +
                          "('{q0}', '{64}', '{a}', 64, 'w', 30000, 'off', 1000000, '{q0,q1,q2}')",
                      mode);
    EXPECT_EQ(plan.find("Seq Scan on jobs"), std::string::npos) << mode << "\n" << plan;
    EXPECT_EQ(plan.find("Bitmap"), std::string::npos) << mode << "\n" << plan;
    EXPECT_NE(plan.find("(run_at > now()))"), std::string::npos) << mode << "\n" << plan;
    EXPECT_EQ(plan.find("Index Scan Backward"), std::string::npos) << mode << "\n" << plan;
  }
  PgJobStore store(schema.config().database, "test");
  EXPECT_NEAR(seconds_of(next_in(store, {"q0", "q1", "q2"}, {"a"})), 1.0, 1.0);
}

}  // namespace
}  // namespace pgjobd
