// AdminSession against PostgreSQL: the CLI's actions, and its failures as DbError.

#include "db/admin/admin_session.hpp"

#include <gtest/gtest.h>

#include "db/migrations.hpp"
#include "store/db_error.hpp"
#include "support/test_database.hpp"

namespace pgjobd {
namespace {

using testing::TestSchema;

TEST(AdminSession, UnreachableServerIsConnectionLostWithoutThePassword) {
  DatabaseConfig db;
  db.url = "postgresql://nobody:secret@127.0.0.1:1/none?connect_timeout=2";
  try {
    AdminSession session(db, "test");
    FAIL() << "connected to a closed port";
  } catch (const DbError& e) {
    EXPECT_TRUE(e.connection_lost());
    EXPECT_EQ(std::string(e.what()).find("secret"), std::string::npos) << e.what();
  }
}

TEST(AdminSession, MigratedSchemaIsUpToDate) {
  TestSchema schema;
  AdminSession session(schema.config().database, "test");
  EXPECT_EQ(session.schema_version(), latest_schema_version());
  const MigrationReport report = session.migrate();
  EXPECT_EQ(report.from_version, latest_schema_version());
  EXPECT_EQ(report.to_version, latest_schema_version());
}

TEST(AdminSession, EnqueueStatsCancelRetry) {
  TestSchema schema;
  AdminSession session(schema.config().database, "test");
  EnqueueRequest request;
  request.type = "mail";
  request.queue = "q1";
  request.unique_key = "k";
  const EnqueueResult first = session.enqueue(request);
  EXPECT_TRUE(first.created);
  const EnqueueResult again = session.enqueue(request);
  EXPECT_FALSE(again.created);
  EXPECT_EQ(again.id, first.id);

  const auto rows = session.stats();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].queue, "q1");
  EXPECT_EQ(rows[0].status, "pending");
  EXPECT_EQ(rows[0].count, 1);

  EXPECT_NE(session.cancel(first.id, "not wanted").find("cancelled"), std::string::npos);
  EXPECT_EQ(schema.query("SELECT last_error FROM {jobs} WHERE id = " + std::to_string(first.id)),
            "cancelled: not wanted");
  EXPECT_EQ(session.cancel(first.id), "job " + std::to_string(first.id) + " cancelled");
  EXPECT_THROW(session.cancel(987654321), std::runtime_error);
  EXPECT_NE(session.retry(first.id).find("pending"), std::string::npos);
  EXPECT_THROW(session.retry(987654321), std::runtime_error);
  EXPECT_EQ(schema.query("SELECT status FROM {jobs} WHERE id = " + std::to_string(first.id)),
            "pending");
}

// The CLI turns a data exception into a usage error: the SQLSTATE must survive translation.
TEST(AdminSession, RejectedValueIsDbErrorWithItsSqlstate) {
  TestSchema schema;
  AdminSession session(schema.config().database, "test");
  EnqueueRequest request;
  request.type = "mail";
  request.run_at = "next tuesday-ish";
  try {
    session.enqueue(request);
    FAIL() << "an unparseable run_at was accepted";
  } catch (const DbError& e) {
    EXPECT_FALSE(e.connection_lost());
    EXPECT_EQ(e.sqlstate().substr(0, 2), "22") << e.sqlstate() << " " << e.what();
  }
  EXPECT_EQ(schema.count(), 0);
}

}  // namespace
}  // namespace pgjobd
