// Migrations: idempotent, safe when run concurrently, and the schema checks `run` relies on.

#include "db/migrator.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <pqxx/pqxx>
#include <string>
#include <thread>
#include <utility>

#include "db/migrations.hpp"
#include "db/sql_text.hpp"
#include "support/log_capture.hpp"
#include "support/schema_notifications.hpp"
#include "support/test_database.hpp"

namespace pgjobd {
namespace {

using namespace std::chrono_literals;

class MigratorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_.url = testing::test_database_url();
    static int counter = 0;
    db_.schema = "mig_" + std::to_string(getpid()) + "_" + std::to_string(counter++);
    conn_ = open_connection(db_, "test");
    drop();
  }
  void TearDown() override { drop(); }
  void drop() {
    pqxx::nontransaction txn(*conn_);
    txn.exec("DROP SCHEMA IF EXISTS " + quote_identifier(db_.schema) + " CASCADE");
  }
  DatabaseConfig db_;
  ConnectionPtr conn_;
};

// The notifications for this test's schema: the channel is shared by every schema on the
// server, and other tests (a bench run, an e2e daemon) may insert jobs meanwhile.
using testing::SchemaNotifications;

// Collects the notifications already committed: until one second of silence.
void drain(pqxx::connection_base& listener) {
  while (listener.await_notification(1, 0) > 0) {
  }
}

TEST_F(MigratorTest, FreshSchemaNeedsMigrationAndSaysHow) {
  EXPECT_EQ(schema_version(*conn_, db_.schema), 0);
  const std::string problem = schema_problem(*conn_, db_.schema);
  EXPECT_NE(problem.find("pgjobd migrate"), std::string::npos) << problem;
}

TEST_F(MigratorTest, MigratesOnceAndIsIdempotent) {
  auto report = migrate(*conn_, db_.schema);
  EXPECT_EQ(report.from_version, 0);
  EXPECT_EQ(report.to_version, latest_schema_version());
  report = migrate(*conn_, db_.schema);
  EXPECT_EQ(report.from_version, latest_schema_version());
  EXPECT_EQ(report.to_version, latest_schema_version());
  EXPECT_EQ(schema_problem(*conn_, db_.schema), "");
  pqxx::nontransaction txn(*conn_);
  EXPECT_EQ(
      txn.exec("SELECT count(*) FROM " + quote_identifier(db_.schema) + ".pgjobd_migrations")[0][0]
          .as<int>(),
      latest_schema_version());
}

// A current schema is only read: a daemon's start does not wait for the migration lock,
// which another daemon or `pgjobd migrate` may hold meanwhile. (Before, every start took
// it and ran the DDL that creates the schema and the migrations table if missing.)
TEST_F(MigratorTest, ACurrentSchemaIsReadWithoutTakingTheMigrationLock) {
  migrate(*conn_, db_.schema);
  auto holder = open_connection(db_, "test");
  pqxx::work held(*holder);
  held.exec_params("SELECT pg_advisory_xact_lock($1, hashtext($2))", 0x706a6d, db_.schema);
  auto starting = open_connection(db_, "test");
  {
    pqxx::nontransaction txn(*starting);
    txn.exec("SET statement_timeout = '3s'");
  }
  const MigrationReport report = migrate(*starting, db_.schema);
  EXPECT_EQ(report.from_version, latest_schema_version());
  EXPECT_EQ(report.to_version, latest_schema_version());
  held.abort();
}

// Another session holds the migration lock (a daemon migrating, or any role taking that
// advisory lock): a migration waits, says so after a second with the holder's pid, and
// leaves at once when a stop is requested, having written nothing; once the lock is free it
// migrates. The server ends the holder's session after 8 s idle in its transaction, so a
// migration that cannot be stopped returns then, and fails the bounds below.
TEST_F(MigratorTest, AMigrationWaitingForTheLockSaysSoAndLeavesOnAStopRequest) {
  auto holder = open_connection(db_, "test");
  pqxx::work held(*holder);
  held.exec("SET LOCAL idle_in_transaction_session_timeout = '8s'");
  const std::string holder_pid = held.exec("SELECT pg_backend_pid()")[0][0].c_str();
  held.exec_params("SELECT pg_advisory_xact_lock($1, hashtext($2))", 0x706a6d, db_.schema);
  auto starting = open_connection(db_, "test");
  std::atomic<bool> stop{false};
  MigrationReport report;
  std::chrono::steady_clock::time_point returned_at;
  {
    testing::LogCapture log;
    std::thread migrating([&] {
      report = migrate(*starting, db_.schema, [&] { return stop.load(); });
      returned_at = std::chrono::steady_clock::now();
    });
    const bool said = testing::wait_until(
        [&] { return log.contains("waiting for the migration lock of schema"); }, 5s);
    const auto stop_at = std::chrono::steady_clock::now();
    stop = true;
    migrating.join();
    EXPECT_TRUE(said) << log.all();
    EXPECT_TRUE(log.contains("held by pid " + holder_pid)) << log.all();
    EXPECT_LT(returned_at - stop_at, 1s) << "the stop request was not heard";
  }
  EXPECT_TRUE(report.stopped);
  EXPECT_EQ(schema_version(*conn_, db_.schema), 0) << "nothing is written when stopped";
  held.abort();
  EXPECT_EQ(migrate(*starting, db_.schema, [] { return false; }).to_version,
            latest_schema_version());
}

TEST_F(MigratorTest, ConcurrentMigrationsAllSucceed) {
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      try {
        auto conn = open_connection(db_, "test");
        migrate(*conn, db_.schema);
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
        ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(schema_version(*conn_, db_.schema), latest_schema_version());
}

TEST_F(MigratorTest, RefusesASchemaNewerThanTheBinary) {
  migrate(*conn_, db_.schema);
  {
    pqxx::nontransaction txn(*conn_);
    txn.exec("INSERT INTO " + quote_identifier(db_.schema) +
             ".pgjobd_migrations (version, name) VALUES (999, 'future')");
  }
  EXPECT_NE(schema_problem(*conn_, db_.schema).find("upgrade pgjobd"), std::string::npos);
  EXPECT_THROW(migrate(*conn_, db_.schema), std::runtime_error);
}

TEST_F(MigratorTest, SchemaNamesAreQuoted) {
  db_.schema = "Mixed Case";
  drop();
  migrate(*conn_, db_.schema);
  EXPECT_EQ(schema_version(*conn_, db_.schema), latest_schema_version());
  {
    // The INSERT trigger finds its clock sequence by the schema's name (sql/010).
    auto listener = open_connection(db_, "test");
    SchemaNotifications receiver(*listener, "pgjobd_jobs", db_.schema);
    pqxx::nontransaction txn(*conn_);
    txn.exec("INSERT INTO \"Mixed Case\".jobs (type) VALUES ('a')");
    drain(*listener);
    EXPECT_EQ(receiver.count(), 1);
  }
  drop();
}

TEST_F(MigratorTest, CreatesEveryDocumentedColumnAndTheNotifyTrigger) {
  migrate(*conn_, db_.schema);
  pqxx::nontransaction txn(*conn_);
  const auto columns = txn.exec_params(
      "SELECT string_agg(column_name, ',' ORDER BY column_name) FROM information_schema.columns "
      "WHERE table_schema = $1 AND table_name = 'jobs'",
      db_.schema);
  EXPECT_EQ(std::string(columns[0][0].c_str()),
            "attempt_log,attempts,cancel_reason,cancel_requested_at,created_at,errors,finished_at,"
            "id,last_error,locked_by,locked_until,max_attempts,payload,priority,queue,run_at,"
            "started_at,status,type,unique_key,updated_at");
  const std::string table = quote_identifier(db_.schema) + ".jobs";
  EXPECT_THROW(txn.exec("INSERT INTO " + table + " (type, status) VALUES ('a', 'bogus')"),
               pqxx::check_violation);
  // The unique key is unique among live jobs only.
  txn.exec("INSERT INTO " + table + " (type, unique_key) VALUES ('a', 'k')");
  EXPECT_THROW(txn.exec("INSERT INTO " + table + " (type, unique_key) VALUES ('a', 'k')"),
               pqxx::unique_violation);
  txn.exec("UPDATE " + table + " SET status = 'done'");
  txn.exec("INSERT INTO " + table + " (type, unique_key) VALUES ('a', 'k')");
}

TEST_F(MigratorTest, BulkInsertOfOneHundredThousandRowsSendsOneNotification) {
  migrate(*conn_, db_.schema);
  auto listener = open_connection(db_, "test");
  SchemaNotifications receiver(*listener, "pgjobd_jobs", db_.schema);
  const std::string s = quote_identifier(db_.schema);
  {
    pqxx::nontransaction txn(*conn_);
    txn.exec("INSERT INTO " + s + ".jobs (type) SELECT 'bulk' FROM generate_series(1, 100000)");
    // The last NOTIFY's time set back past the 2 ms window (sql/010), so that the next
    // INSERT notifies however soon it follows.
    txn.exec("SELECT setval('" + s + ".pgjobd_notify_clock', 0)");
    txn.exec("INSERT INTO " + s + ".jobs (type) VALUES ('single')");
  }
  drain(*listener);
  EXPECT_EQ(receiver.count(), 2);  // one per INSERT statement, not one per row
}

// sql/010: a NOTIFY serialises commits server-wide, so the trigger sends none within 2 ms
// of the last (the fetcher's follow-up poll picks up what relied on that one); a clock
// that was set back does not silence it; producers need no right on the sequence.
TEST_F(MigratorTest, NoNotifyWithinTwoMillisecondsOfTheLastOneAndOneAfterTheClockWentBack) {
  migrate(*conn_, db_.schema);
  auto listener = open_connection(db_, "test");
  SchemaNotifications receiver(*listener, "pgjobd_jobs", db_.schema);
  const std::string s = quote_identifier(db_.schema);
  const std::string clock = "'" + s + ".pgjobd_notify_clock'";
  const std::string now_ms = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint";
  pqxx::nontransaction txn(*conn_);
  // A NOTIFY recorded by the statement itself, microseconds before its trigger runs. On a
  // loaded machine the trigger may run over 2 ms later (it did, with CI's two cores busy),
  // and then it rightly notifies: a few tries, one of which must send nothing.
  int notified = 0;
  bool skipped = false;
  for (int attempt = 0; attempt < 5 && !skipped; ++attempt) {
    txn.exec("INSERT INTO " + s + ".jobs (type) SELECT 'a' FROM (SELECT setval(" + clock + ", " +
             now_ms + ")) c");
    drain(*listener);
    skipped = receiver.count() == notified;
    notified = receiver.count();
  }
  EXPECT_TRUE(skipped) << "each of 5 INSERTs notified, within 2 ms of the last NOTIFY";

  // One recorded an hour ahead: the system clock was set back since. It notifies, and
  // records the present time.
  txn.exec("SELECT setval(" + clock + ", " + now_ms + " + 3600000)");
  txn.exec("INSERT INTO " + s + ".jobs (type) VALUES ('b')");
  drain(*listener);
  EXPECT_EQ(receiver.count(), notified + 1);
  EXPECT_EQ(txn.exec("SELECT pg_sequence_last_value(" + clock + ") BETWEEN " + now_ms +
                     " - 60000 AND " + now_ms)[0][0]
                .as<bool>(),
            true);

  // A producer with INSERT on jobs and nothing on the sequence.
  const std::string role = "pgjobd_ins_" + std::to_string(getpid());
  txn.exec("DROP ROLE IF EXISTS " + quote_identifier(role));
  txn.exec("CREATE ROLE " + quote_identifier(role) + " LOGIN");
  txn.exec("GRANT USAGE ON SCHEMA " + s + " TO " + quote_identifier(role));
  txn.exec("GRANT INSERT ON " + s + ".jobs TO " + quote_identifier(role));
  txn.exec("SELECT setval(" + clock + ", 0)");
  {
    pqxx::connection producer(testing::test_database_url_for_role(role));
    pqxx::nontransaction insert(producer);
    insert.exec("INSERT INTO " + s + ".jobs (type) VALUES ('c')");
    EXPECT_THROW(insert.exec("SELECT setval(" + clock + ", 0)"), pqxx::insufficient_privilege);
  }
  drain(*listener);
  EXPECT_EQ(receiver.count(), notified + 2);
  txn.exec("DROP OWNED BY " + quote_identifier(role));
  txn.exec("DROP ROLE " + quote_identifier(role));
}

}  // namespace
}  // namespace pgjobd
