// Migrations and functions: idempotent, safe when run concurrently, the same whichever
// version a schema is upgraded from, and the schema checks `run` relies on.

#include "db/migrator.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <iterator>
#include <pqxx/pqxx>
#include <string>
#include <thread>
#include <utility>

#include "db/migrations.hpp"
#include "db/pooled_functions.hpp"
#include "db/sql_text.hpp"
#include "support/build_paths.hpp"
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

// Every function (its definition and grants), trigger, index and relation (its grants
// and storage options) of a schema, one per line in a stable order, with the schema's
// name written as "S" so that two schemas compare.
std::string definitions(pqxx::connection_base& conn, const std::string& schema) {
  pqxx::nontransaction txn(conn);
  const auto row = txn.exec_params(
      "WITH ns AS (SELECT oid FROM pg_namespace WHERE nspname = $1) "
      "SELECT string_agg(d, E'\n' ORDER BY d) FROM ("
      "  SELECT pg_get_functiondef(p.oid) || ' grants ' || coalesce(p.proacl::text, 'default') "
      "  FROM pg_proc p WHERE p.pronamespace = (SELECT oid FROM ns)"
      "  UNION ALL SELECT pg_get_triggerdef(t.oid) FROM pg_trigger t"
      "  JOIN pg_class c ON c.oid = t.tgrelid"
      "  WHERE c.relnamespace = (SELECT oid FROM ns) AND NOT t.tgisinternal"
      "  UNION ALL SELECT indexdef FROM pg_indexes WHERE schemaname = $1"
      "  UNION ALL SELECT c.relname || ' ' || c.relkind::text || ' grants ' ||"
      "         coalesce(c.relacl::text, 'default') || ' ' || coalesce(c.reloptions::text, '')"
      "  FROM pg_class c WHERE c.relnamespace = (SELECT oid FROM ns)) x(d)",
      schema);
  std::string text = row[0][0].c_str();
  replace_all(text, schema, "S");
  return text;
}

std::string recorded_digest(pqxx::connection_base& conn, const std::string& schema) {
  pqxx::nontransaction txn(conn);
  return txn
      .exec("SELECT functions_digest FROM " + quote_identifier(schema) +
            ".pgjobd_migrations ORDER BY version DESC LIMIT 1")[0][0]
      .c_str();
}

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

// Schema `quoted` (dropped first) at `version`, as a binary of that version would have left
// it, and the search_path set to it for the rest of `txn`.
void create_at_version(pqxx::work& txn, const std::string& quoted, int version) {
  txn.exec("DROP SCHEMA IF EXISTS " + quoted + " CASCADE; CREATE SCHEMA " + quoted +
           "; SET LOCAL search_path TO " + quoted);
  txn.exec(
      "CREATE TABLE pgjobd_migrations (version int PRIMARY KEY, name text NOT NULL, "
      "applied_at timestamptz NOT NULL DEFAULT now())");
  for (const Migration& migration : migrations()) {
    if (migration.version > version) break;
    txn.exec(migration.up_sql);
    txn.exec_params("INSERT INTO pgjobd_migrations (version, name) VALUES ($1, $2)",
                    migration.version, std::string(migration.name));
  }
}

// A schema upgraded from an older version, whatever functions that version had, ends with
// the functions, triggers and grants of a schema migrated from scratch: the functions are
// applied after the table migrations, not written into them.
TEST_F(MigratorTest, AnUpgradedSchemaEndsWithTheFunctionsOfAFreshOne) {
  migrate(*conn_, db_.schema);
  const std::string fresh = definitions(*conn_, db_.schema);
  const std::string old_schema = db_.schema + "_old";
  const std::string old = quote_identifier(old_schema);
  {
    // At version 9, with functions of its own: a stale definition, and a trigger that
    // fires per row.
    pqxx::work txn(*conn_);
    create_at_version(txn, old, 9);
    txn.exec(
        "CREATE FUNCTION pgjobd_limits_sync(limits jsonb, writer text) RETURNS TABLE "
        "(limit_name text, change text, previous_writer text) LANGUAGE sql AS "
        "$$SELECT NULL::text, NULL::text, NULL::text$$");
    txn.exec(
        "CREATE FUNCTION pgjobd_notify_insert() RETURNS trigger LANGUAGE plpgsql AS "
        "$$BEGIN RETURN NULL; END$$");
    txn.exec(
        "CREATE TRIGGER jobs_notify_insert AFTER INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION "
        "pgjobd_notify_insert()");
    // A statement's function of a binary of that version (pooled_functions.hpp): no binary
    // of the new version calls it.
    txn.exec(
        "CREATE FUNCTION pgjobd_pooled_claim_000000000000(int) RETURNS TABLE (c1 bigint) "
        "LANGUAGE plpgsql AS $$BEGIN RETURN; END$$");
    txn.commit();
  }
  const MigrationReport report = migrate(*conn_, old_schema);
  EXPECT_EQ(report.from_version, 9);
  EXPECT_EQ(report.to_version, latest_schema_version());
  EXPECT_EQ(definitions(*conn_, old_schema), fresh);
  EXPECT_EQ(recorded_digest(*conn_, old_schema), applied_digest());
  pqxx::nontransaction(*conn_).exec("DROP SCHEMA " + old + " CASCADE");
}

// Schema v16 adds a table the limited claim writes as the runtime role (v17 another):
// migrating a v15 schema grants them to whoever sql/grants.sql let write the limits'
// buckets, so that a daemon migrating on start does not find its limited claims refused.
TEST_F(MigratorTest, TheV16TableGoesToTheRolesThatWroteTheBuckets) {
  const std::string schema = db_.schema + "_v15";
  const std::string quoted = quote_identifier(schema);
  const std::string role = "pgjobd_mig_rt_" + std::to_string(getpid());
  {
    pqxx::work txn(*conn_);
    create_at_version(txn, quoted, 15);
    txn.exec("DROP ROLE IF EXISTS " + role + "; CREATE ROLE " + role);
    txn.exec("GRANT SELECT, INSERT, UPDATE, DELETE ON pgjobd_limits, pgjobd_limit_buckets TO " +
             role);
    txn.commit();
  }
  const MigrationReport report = migrate(*conn_, schema);
  EXPECT_EQ(report.from_version, 15);
  pqxx::nontransaction txn(*conn_);
  for (const char* table : {".pgjobd_limit_parts", ".pgjobd_limit_held"}) {  // v16, v17
    EXPECT_EQ(txn.exec("SELECT has_table_privilege(" + txn.quote(role) + ", " +
                       txn.quote(quoted + table) + ", 'INSERT')")[0][0]
                  .as<bool>(),
              true)
        << table;
    EXPECT_EQ(txn.exec("SELECT has_table_privilege('public', " + txn.quote(quoted + table) +
                       ", 'SELECT')")[0][0]
                  .as<bool>(),
              false)
        << table;
  }
  txn.exec("DROP SCHEMA " + quoted + " CASCADE");
  txn.exec("DROP ROLE " + role);
}

// Schema v22 has autovacuum visit jobs after 1% of its rows changed (a claim reads the claim
// indexes' entries of every job claimed since their last vacuum); a value an administrator
// gave the table before is kept, and the down migration takes back only v22's own.
TEST_F(MigratorTest, JobsIsVacuumedAfterOnePercentUnlessItsAdministratorSaidOtherwise) {
  const auto scale_factor = [this](const std::string& schema) {
    pqxx::nontransaction txn(*conn_);
    return std::string(
        txn.exec("SELECT coalesce((SELECT o FROM pg_class c CROSS JOIN unnest(c.reloptions) o "
                 "WHERE c.oid = " +
                 txn.quote(quote_identifier(schema) + ".jobs") +
                 "::regclass AND o LIKE 'autovacuum_vacuum_scale_factor=%'), 'default')")[0][0]
            .c_str());
  };
  migrate(*conn_, db_.schema);
  EXPECT_EQ(scale_factor(db_.schema), "autovacuum_vacuum_scale_factor=0.01");

  const std::string admin = db_.schema + "_v21";
  const std::string quoted = quote_identifier(admin);
  {
    pqxx::work txn(*conn_);
    create_at_version(txn, quoted, 21);
    txn.exec("ALTER TABLE jobs SET (autovacuum_vacuum_scale_factor = 0.05)");
    txn.commit();
  }
  EXPECT_EQ(migrate(*conn_, admin).from_version, 21);
  EXPECT_EQ(scale_factor(admin), "autovacuum_vacuum_scale_factor=0.05");

  std::ifstream in(testing::source_path("sql/022_jobs_vacuum.down.sql"));
  const std::string down(std::istreambuf_iterator<char>(in), {});
  ASSERT_FALSE(down.empty());
  for (const std::string& schema : {db_.schema, admin}) {
    pqxx::work txn(*conn_);
    txn.exec("SET LOCAL search_path TO " + quote_identifier(schema));
    txn.exec(down);
    txn.commit();
  }
  EXPECT_EQ(scale_factor(db_.schema), "default");
  EXPECT_EQ(scale_factor(admin), "autovacuum_vacuum_scale_factor=0.05");
  pqxx::nontransaction(*conn_).exec("DROP SCHEMA " + quoted + " CASCADE");
}

// Applying the functions again (another binary of this version applied its own meanwhile)
// re-creates them in place: nothing changes, and the grants given to roles stay.
TEST_F(MigratorTest, ReapplyingTheFunctionsChangesNothingAndKeepsTheirGrants) {
  migrate(*conn_, db_.schema);
  const std::string s = quote_identifier(db_.schema);
  const std::string role = quote_identifier("pgjobd_fn_" + std::to_string(getpid()));
  const auto exec = [&](const std::string& sql) { pqxx::nontransaction(*conn_).exec(sql); };
  exec("DROP ROLE IF EXISTS " + role + "; CREATE ROLE " + role);
  exec("GRANT EXECUTE ON FUNCTION " + s +
       ".pgjobd_enqueue(text, jsonb, text, int, timestamptz, int, text, bigint[], text) TO " +
       role);
  const std::string before = definitions(*conn_, db_.schema);
  EXPECT_NE(before.find("pgjobd_fn_"), std::string::npos) << "the grant is not compared";
  exec("UPDATE " + s + ".pgjobd_migrations SET functions_digest = 'another binary'");
  migrate(*conn_, db_.schema);
  EXPECT_EQ(recorded_digest(*conn_, db_.schema), applied_digest());
  EXPECT_EQ(definitions(*conn_, db_.schema), before);
  exec("DROP OWNED BY " + role + "; DROP ROLE " + role);
}

// At this binary's version, another binary's functions are not a problem (two binaries of
// one version may take turns at a rolling upgrade; the schema check must not flap between
// them): a warning says what to run. migrate then takes the lock, as for a migration, and
// puts back what differs, including a function dropped, without the grant PostgreSQL gives
// PUBLIC on a new function.
// At one version, the statements' functions of another binary (pooled_functions.hpp) stay
// when this one applies its own: that binary's daemons may still run and call them.
TEST_F(MigratorTest, AnotherBinarysStatementFunctionsStayAtTheSameVersion) {
  migrate(*conn_, db_.schema);
  const std::string s = quote_identifier(db_.schema);
  const auto exec = [&](const std::string& sql) { pqxx::nontransaction(*conn_).exec(sql); };
  exec("CREATE FUNCTION " + s +
       ".pgjobd_pooled_claim_000000000000(int) RETURNS TABLE (c1 bigint) LANGUAGE plpgsql AS "
       "$$BEGIN RETURN; END$$");
  exec("UPDATE " + s + ".pgjobd_migrations SET functions_digest = 'another binary'");
  migrate(*conn_, db_.schema);
  EXPECT_EQ(recorded_digest(*conn_, db_.schema), applied_digest());
  pqxx::nontransaction txn(*conn_);
  EXPECT_EQ(txn.exec("SELECT count(*) FROM pg_proc WHERE pronamespace = to_regnamespace(" +
                     txn.quote(s) + ") AND proname LIKE 'pgjobd\\_pooled\\_%'")[0][0]
                .as<std::size_t>(),
            pooled_functions().size() + 1);
}

TEST_F(MigratorTest, AnotherBinarysFunctionsAreAWarningAndMigrateReplacesThem) {
  migrate(*conn_, db_.schema);
  const std::string before = definitions(*conn_, db_.schema);
  const std::string s = quote_identifier(db_.schema);
  {
    pqxx::nontransaction txn(*conn_);
    txn.exec("CREATE OR REPLACE FUNCTION " + s +
             ".pgjobd_check_queue(context text, queue text) RETURNS void LANGUAGE plpgsql AS "
             "$$BEGIN END$$");
    txn.exec("DROP FUNCTION " + s + ".pgjobd_schedule_delete(text)");
    txn.exec("UPDATE " + s + ".pgjobd_migrations SET functions_digest = 'another binary'");
  }
  {
    testing::LogCapture log;
    EXPECT_EQ(schema_version(*conn_, db_.schema), latest_schema_version());
    EXPECT_TRUE(log.contains("`pgjobd migrate` applies this one's")) << log.all();
  }
  EXPECT_EQ(schema_problem(*conn_, db_.schema), "");
  {
    auto holder = open_connection(db_, "test");
    pqxx::work held(*holder);
    held.exec_params("SELECT pg_advisory_xact_lock($1, hashtext($2))", 0x706a6d, db_.schema);
    EXPECT_TRUE(migrate(*conn_, db_.schema, [] { return true; }).stopped)
        << "the functions were compared without the migration lock";
  }
  migrate(*conn_, db_.schema);
  EXPECT_EQ(definitions(*conn_, db_.schema), before);
  // Only a trigger function, which cannot be called but as a trigger, writes as the
  // owner for PUBLIC.
  pqxx::nontransaction txn(*conn_);
  EXPECT_STREQ(txn.exec_params("SELECT coalesce(string_agg(p.proname, ','), '') FROM pg_proc p, "
                               "aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a "
                               "WHERE p.pronamespace = $1::regnamespace AND p.prosecdef "
                               "AND a.grantee = 0 AND p.prorettype <> 'trigger'::regtype",
                               s)[0][0]
                   .c_str(),
               "");
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
    // The INSERT trigger finds its clock sequence by the schema's name
    // (sql/functions/pgjobd_notify_insert.sql).
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
            "attempt_log,attempts,blocked_by,cancel_reason,cancel_requested_at,created_at,"
            "dead_letter_of,errors,finished_at,has_children,id,last_error,locked_by,locked_until,"
            "max_attempts,on_parent_failure,payload,prefetched,priority,queue,result,run_at,"
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
    // The last NOTIFY's time set back past the 2 ms window (pgjobd_notify_insert), so
    // that the next INSERT notifies however soon it follows.
    txn.exec("SELECT setval('" + s + ".pgjobd_notify_clock', 0)");
    txn.exec("INSERT INTO " + s + ".jobs (type) VALUES ('single')");
  }
  drain(*listener);
  EXPECT_EQ(receiver.count(), 2);  // one per INSERT statement, not one per row
}

// pgjobd_notify_insert: a NOTIFY serialises commits server-wide, so the trigger sends none
// within 2 ms of the last (the fetcher's follow-up poll picks up what relied on that one);
// a clock that was set back does not silence it; producers need no right on the sequence.
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
