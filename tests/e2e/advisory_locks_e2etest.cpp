// End-to-end: another session holds an advisory lock the daemon takes (any role can take
// one). The limits sync's (README "Limits"): a daemon with a `limits:` section starts and
// runs jobs meanwhile and says what it waits for; a SIGHUP under the lock costs no running
// job its lease; the section, as reloaded, is written once the lock is free. The
// migration's: a daemon migrating at start waits, says for whom, and SIGTERM ends it.
// (Limited claims take their partitions' locks with pg_try_advisory_xact_lock:
// tests/limits_pgtest.cpp, APartitionBeingClaimedInIsLeftOutAndCountedOnceCommitted.)

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <pqxx/pqxx>
#include <string>
#include <utility>

#include "db/sql_text.hpp"
#include "support/daemon_process.hpp"
#include "support/test_database.hpp"
#include "support/wait_until.hpp"

namespace pgjobd::testing {
namespace {

TEST(AdvisoryLocksE2E, AHeldSyncLockNeitherKeepsTheDaemonFromStartingNorCostsALease) {
  TestSchema schema;
  // The holder's session is ended by the server after 45 s idle in its transaction, so a
  // daemon that waits for the lock is not waited for forever.
  auto other = open_connection(schema.config().database, "test");
  pqxx::work held(*other);
  held.exec("SET LOCAL idle_in_transaction_session_timeout = '45s'");
  const std::string holder = held.exec("SELECT pg_backend_pid()")[0][0].c_str();
  held.exec_params("SELECT pg_advisory_xact_lock(hashtext('pgjobd_limits_sync'), hashtext($1))",
                   schema.name());

  const auto config_with = [&](int concurrency) {
    DaemonYaml yaml(schema.name());
    // Jobs of 3 s under a 2 s lease: they finish only if their leases are renewed.
    yaml.set("worker", "{concurrency: 4}")
        .set("lease", "{duration: 2s}")
        .set("limits",
             "{partner: {types: [partner], concurrency: " + std::to_string(concurrency) + "}}")
        .handler("partner", "{builtin: noop}")
        .handler("quick", "{builtin: noop}")
        .shell_handler("slow", "sleep 3");
    return yaml.text();
  };
  DaemonProcess daemon(config_with(1));
  ASSERT_TRUE(daemon.wait_ready(20s)) << "the start waited for the lock\n" << daemon.log();
  EXPECT_TRUE(daemon.wait_for_log(
      "another session holds the advisory lock pgjobd_limits_sync, held by pid " + holder))
      << daemon.log();
  schema.insert_jobs("quick", 200);
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == 200; }, 20s))
      << table_summary(schema);

  schema.insert_jobs("slow", 4);
  ASSERT_TRUE(
      wait_until([&] { return schema.count("type = 'slow' AND status = 'running'") == 4; }, 10s))
      << table_summary(schema);
  std::ofstream(daemon.config_path(), std::ios::trunc) << config_with(2);
  daemon.signal(SIGHUP);
  ASSERT_TRUE(daemon.wait_for_log("configuration reloaded")) << daemon.log();
  ASSERT_TRUE(
      wait_until([&] { return schema.count("type = 'slow' AND status = 'done'") == 4; }, 20s))
      << table_summary(schema);
  EXPECT_EQ(schema.count("type = 'slow' AND attempts <> 1"), 0)
      << "a slow job lost its lease under the reload and ran again\n"
      << daemon.log();
  EXPECT_EQ(schema.query("SELECT count(*) FROM " + schema.qualified("pgjobd_limits")), "0")
      << "written while the lock was held";

  held.commit();
  ASSERT_TRUE(wait_until(
      [&] {
        return schema.query("SELECT concurrency FROM " + schema.qualified("pgjobd_limits") +
                            " WHERE name = 'partner'") == "2";
      },
      10s))
      << "the reloaded section was not written once the lock was free\n"
      << daemon.log();
  EXPECT_TRUE(daemon.wait_for_log("limits: written after")) << daemon.log();
  EXPECT_EQ(count_occurrences(daemon.log(), "another session holds the advisory lock"), 1)
      << "the wait is said once";
  stop_daemon(daemon);
}

// A schema no test created, dropped when the test ends (it must not exist at the start).
struct UnmigratedSchemaForLockTest {
  UnmigratedSchemaForLockTest(TestSchema& owning, std::string schema_name)
      : owner(owning), name(std::move(schema_name)) {
    drop();
  }
  ~UnmigratedSchemaForLockTest() { drop(); }
  UnmigratedSchemaForLockTest(const UnmigratedSchemaForLockTest&) = delete;
  UnmigratedSchemaForLockTest& operator=(const UnmigratedSchemaForLockTest&) = delete;
  void drop() { owner.exec("DROP SCHEMA IF EXISTS " + quote_identifier(name) + " CASCADE"); }
  TestSchema& owner;
  const std::string name;
};

TEST(AdvisoryLocksE2E, SigtermEndsADaemonWaitingForTheMigrationLock) {
  TestSchema schema;
  UnmigratedSchemaForLockTest fresh(schema, schema.name() + "_locked");
  auto other = open_connection(schema.config().database, "test");
  pqxx::work held(*other);
  held.exec("SET LOCAL idle_in_transaction_session_timeout = '45s'");
  const std::string holder = held.exec("SELECT pg_backend_pid()")[0][0].c_str();
  // The migrator's key: its lock class ("pjm") and the schema.
  held.exec_params("SELECT pg_advisory_xact_lock($1, hashtext($2))", 0x706a6d, fresh.name);

  DaemonYaml yaml(fresh.name);
  yaml.set("database", "{url: " + yaml_quote(test_database_url()) + ", schema: " + fresh.name +
                           ", migrate_on_start: true}")
      .handler("ping", "{builtin: noop}");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_for_log("waiting for the migration lock of schema", 15s)) << daemon.log();
  EXPECT_NE(daemon.log().find("held by pid " + holder), std::string::npos) << daemon.log();
  const auto stop_sent = std::chrono::steady_clock::now();
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_for_exit(10s), 0) << daemon.log();
  EXPECT_LT(std::chrono::steady_clock::now() - stop_sent, 5s);
  EXPECT_EQ(schema.query("SELECT count(*) FROM pg_namespace WHERE nspname = '" + fresh.name + "'"),
            "0")
      << "migrated although stopped";

  held.abort();
  DaemonProcess again(yaml.text());
  ASSERT_TRUE(again.wait_ready()) << again.log();
  stop_daemon(again);
}

}  // namespace
}  // namespace pgjobd::testing
