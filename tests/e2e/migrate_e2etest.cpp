// End-to-end: schema migrations through the binary: `run` on an unmigrated schema,
// database.migrate_on_start, and concurrent `pgjobd migrate` processes.
// "Current" is latest_schema_version(): the highest sql/NNN_*.up.sql compiled in.

#include <gtest/gtest.h>
#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include "db/migrations.hpp"
#include "support/daemon_process.hpp"
#include "support/test_database.hpp"

namespace pgjobd::testing {
namespace {

std::string latest() { return std::to_string(latest_schema_version()); }

// A schema name TestSchema did not create, dropped again when the test ends.
class FreshSchema {
 public:
  FreshSchema(TestSchema& owner, const std::string& suffix)
      : owner_(owner), name_(owner.name() + "_" + suffix) {
    drop();
  }
  ~FreshSchema() { drop(); }
  FreshSchema(const FreshSchema&) = delete;
  FreshSchema& operator=(const FreshSchema&) = delete;
  const std::string& name() const { return name_; }

 private:
  void drop() { owner_.exec("DROP SCHEMA IF EXISTS \"" + name_ + "\" CASCADE"); }
  TestSchema& owner_;
  std::string name_;
};

TEST(MigrateE2E, RunRefusesAnUnmigratedSchema) {
  TestSchema schema;
  FreshSchema fresh(schema, "raw");
  DaemonYaml yaml(fresh.name());
  yaml.handler("ping", "{builtin: noop}");
  DaemonProcess daemon(yaml.text());
  EXPECT_EQ(daemon.wait_for_exit(20s), 1) << daemon.log();
  EXPECT_NE(daemon.log().find("pgjobd migrate"), std::string::npos) << daemon.log();
  EXPECT_EQ(
      schema.query("SELECT count(*) FROM pg_namespace WHERE nspname = '" + fresh.name() + "'"), "0")
      << "run created the schema without migrate_on_start";
}

TEST(MigrateE2E, MigrateOnStartMigratesAndRuns) {
  TestSchema schema;
  FreshSchema fresh(schema, "auto");
  DaemonYaml yaml(fresh.name());
  yaml.set("database", "{url: " + yaml_quote(test_database_url()) + ", schema: " + fresh.name() +
                           ", migrate_on_start: true}")
      .handler("ping", "{builtin: noop}");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  EXPECT_EQ(schema.query("SELECT max(version) FROM \"" + fresh.name() + "\".pgjobd_migrations"),
            latest());
  const std::string jobs = "\"" + fresh.name() + "\".jobs";
  schema.exec("INSERT INTO " + jobs + " (type) VALUES ('ping'), ('ping')");
  EXPECT_TRUE(wait_until(
      [&] {
        return schema.query("SELECT count(*) FROM " + jobs + " WHERE status = 'done'") == "2";
      },
      15s));
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_for_exit(10s), 0);

  // A second start finds the schema current and does not migrate again.
  DaemonProcess again(yaml.text());
  ASSERT_TRUE(again.wait_ready()) << again.log();
  again.signal(SIGTERM);
  EXPECT_EQ(again.wait_for_exit(10s), 0);
  EXPECT_EQ(again.log().find("migrated schema"), std::string::npos) << again.log();
  EXPECT_EQ(schema.query("SELECT count(*) FROM \"" + fresh.name() + "\".pgjobd_migrations"),
            latest());
}

TEST(MigrateE2E, ConcurrentMigrateProcessesBothSucceed) {
  TestSchema schema;
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    FreshSchema fresh(schema, "race" + std::to_string(round));
    DaemonYaml yaml(fresh.name());
    yaml.handler("ping", "{builtin: noop}");
    // Both are started before either is waited for.
    std::vector<std::unique_ptr<DaemonProcess>> migrators;
    for (int i = 0; i < 2; ++i) {
      migrators.push_back(
          std::make_unique<DaemonProcess>(yaml.text(), std::vector<std::string>{"migrate"}));
    }
    int migrated = 0;
    for (auto& migrator : migrators) {
      EXPECT_EQ(migrator->wait_for_exit(30s), 0) << migrator->log() << migrator->output();
      if (migrator->output().find("migrated from version 0 to " + latest()) != std::string::npos) {
        ++migrated;
      }
    }
    EXPECT_EQ(migrated, 1) << "exactly one of the two should have applied the migration";
    const std::string table = "\"" + fresh.name() + "\".pgjobd_migrations";
    EXPECT_EQ(schema.query("SELECT max(version) FROM " + table), latest());
    EXPECT_EQ(schema.query("SELECT count(*) FROM " + table), latest());
    EXPECT_EQ(schema.query("SELECT to_regclass('\"" + fresh.name() + "\".jobs') IS NOT NULL"), "t");
  }
}

TEST(MigrateE2E, MigrateIsIdempotent) {
  TestSchema schema;  // already migrated
  TempDir dir;
  DaemonYaml yaml(schema.name());
  yaml.handler("ping", "{builtin: noop}");
  const std::string file = dir.write("pgjobd.yaml", yaml.text());
  const CliResult result = run_cli({"migrate", "-c", file});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("up to date (version " + latest() + ")"), std::string::npos)
      << result.out;
  EXPECT_EQ(schema.query("SELECT count(*) FROM \"" + schema.name() + "\".pgjobd_migrations"),
            latest());
}

}  // namespace
}  // namespace pgjobd::testing
