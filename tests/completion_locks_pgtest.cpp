// A completion batch and rows that another session holds locked: the batch writes what it
// can at once and reports the held rows, for the completer to retry (README, "What an
// application can and cannot break").

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "db/connection.hpp"
#include "db/pg_job_store.hpp"
#include "db/sql_text.hpp"
#include "db/statement_set.hpp"
#include "db/statements.hpp"
#include "support/test_database.hpp"

namespace pgjobd {
namespace {

using testing::TestSchema;
using Clock = std::chrono::steady_clock;

std::vector<std::int64_t> claimed_ids(PgJobStore& store, int n) {
  std::vector<std::int64_t> ids;
  for (const Job& job : store.claim({{{"default", n}}, {"a"}, n, "w", Millis(600000)})) {
    ids.push_back(job.id);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::vector<std::int64_t> sorted_ids(std::vector<JobAttempt> jobs) {
  std::vector<std::int64_t> ids;
  for (const JobAttempt& job : jobs) ids.push_back(job.id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

// An application session holding one row with `SELECT ... FOR UPDATE`, another with an
// uncommitted `UPDATE`, for as long as the test runs: the batch holding them (done rows
// only, which take their locks in the UPDATE itself, and both outcomes, which lock first in
// `ordered`) comes back at once with those two held and the rest written or stale, for a
// kept or a deleted done row, with prepared statements and unnamed ones (a transaction
// pooler). Once the sessions end, the held two are written.
TEST(CompletionLocks, ABatchWritesTheFreeRowsAtOnceAndReportsTheHeldOnes) {
  for (const bool mixed : {false, true}) {
    for (const bool delete_done : {false, true}) {
      for (const char* pooler : {"", "transaction"}) {
        SCOPED_TRACE(std::string(mixed ? "both outcomes" : "done only") +
                     (delete_done ? ", retention.done 0" : "") +
                     (*pooler != '\0' ? ", pooler: transaction" : ""));
        TestSchema schema;
        schema.insert_jobs("a", 6);
        DatabaseConfig db = schema.config().database;
        db.pooler = pooler;
        // A completion that waited for the held rows would fail here after 10 s, instead
        // of hanging the test.
        DatabaseConfig bounded = db;
        bounded.url += std::string(db.url.find('?') == std::string::npos ? "?" : "&") +
                       "options=-c%20statement_timeout%3D10000";
        PgJobStore store(bounded, "completer");
        const auto ids = claimed_ids(store, 6);
        ASSERT_EQ(ids.size(), 6u);
        const std::string jobs = quote_identifier(schema.name()) + ".jobs";
        auto for_update_session = open_connection(db, "app-for-update");
        pqxx::work for_update(*for_update_session);
        for_update.exec("SELECT 1 FROM " + jobs + " WHERE id = " + std::to_string(ids[1]) +
                        " FOR UPDATE");
        auto update_session = open_connection(db, "app-update");
        pqxx::work update(*update_session);
        update.exec("UPDATE " + jobs +
                    " SET priority = priority WHERE id = " + std::to_string(ids[4]));

        const Outcome other = mixed ? Outcome::kRetry : Outcome::kDone;
        const std::vector<Completion> batch = {
            {{ids[0], 1}, Outcome::kDone, {}, Millis(0)},
            {{ids[1], 1}, Outcome::kDone, {}, Millis(0)},
            {{ids[2], 1}, other, "boom", Millis(60000)},
            {{ids[3], 1}, Outcome::kDone, {}, Millis(0)},
            {{ids[4], 1}, other, "boom", Millis(60000)},
            {{ids[5], 2}, Outcome::kDone, {}, Millis(0)},  // not its attempt: stale
        };
        const auto start = Clock::now();
        const CompletionReport report = store.complete(batch, "w", delete_done);
        const auto took = Clock::now() - start;
        // The lock wait is 50 ms; the bound is for a loaded machine, far below the holds.
        EXPECT_LT(took, std::chrono::seconds(3));
        EXPECT_EQ(report.written, 3);
        EXPECT_EQ(report.stale, 1);
        EXPECT_EQ(sorted_ids(report.held), (std::vector<std::int64_t>{ids[1], ids[4]}));
        EXPECT_EQ(schema.count("status = 'running'"), 3);  // ids 1, 4 held, 5 stale
        EXPECT_EQ(schema.count("status = 'failed'"), mixed ? 1 : 0);
        EXPECT_EQ(schema.count("status = 'done'"), delete_done ? 0 : (mixed ? 2 : 3));

        // Held still: sent alone again, it comes back held without waiting.
        const auto again_start = Clock::now();
        const CompletionReport again = store.complete({batch[1]}, "w", delete_done);
        EXPECT_LT(Clock::now() - again_start, std::chrono::seconds(3));
        EXPECT_EQ(again.written, 0);
        EXPECT_EQ(again.stale, 0);
        EXPECT_EQ(sorted_ids(again.held), std::vector<std::int64_t>{ids[1]});

        for_update.commit();
        update.commit();
        const CompletionReport last = store.complete({batch[1], batch[4]}, "w", delete_done);
        EXPECT_EQ(last.written, 2);
        EXPECT_EQ(last.stale, 0);
        EXPECT_TRUE(last.held.empty());
        EXPECT_EQ(schema.count("status = 'running'"), 1);
        // A batch after that waits for nothing and goes the usual way.
        EXPECT_EQ(store.complete({batch[5]}, "w", delete_done).stale, 1);
      }
    }
  }
}

// A held row that is no longer this attempt's (rescued meanwhile, say) is stale, not held:
// the completer must not keep retrying a completion that can never be written.
TEST(CompletionLocks, AHeldRowThatIsNoLongerOursIsStale) {
  TestSchema schema;
  schema.insert_jobs("a", 2);
  PgJobStore store(schema.config().database, "completer");
  const auto ids = claimed_ids(store, 2);
  ASSERT_EQ(ids.size(), 2u);
  schema.exec("UPDATE {jobs} SET locked_by = 'other' WHERE id = " + std::to_string(ids[0]));
  auto session = open_connection(schema.config().database, "app");
  pqxx::work hold(*session);
  hold.exec("SELECT 1 FROM " + quote_identifier(schema.name()) +
            ".jobs WHERE id = " + std::to_string(ids[0]) + " FOR UPDATE");
  const CompletionReport report = store.complete(
      {{{ids[0], 1}, Outcome::kDone, {}, Millis(0)}, {{ids[1], 1}, Outcome::kDone, {}, Millis(0)}},
      "w", false);
  EXPECT_EQ(report.written, 1);
  EXPECT_EQ(report.stale, 1);
  EXPECT_TRUE(report.held.empty());
}

// The lock wait is set inside the statement for its own transaction: the session keeps its
// lock_timeout, so nothing is handed on to the next client of a pooled server session.
TEST(CompletionLocks, TheLockWaitDoesNotOutliveTheStatement) {
  TestSchema schema;
  auto conn = open_connection(schema.config().database, "test-complete");
  const StatementSet statements(stmt::job_statements(quote_identifier(schema.name())), false,
                                Planning::kPinned);
  statements.prepare(*conn);
  pqxx::nontransaction txn(*conn);
  EXPECT_EQ(statements
                .execute(txn, stmt::kComplete, "{1}", "{1}", "{}", "{}", "{}", "{}", "{}", "w", 1,
                         std::optional<std::string>(), "50ms")[0][0]
                .as<int>(),
            0);
  EXPECT_EQ(txn.exec("SHOW lock_timeout")[0][0].as<std::string>(), "0");
}

}  // namespace
}  // namespace pgjobd
