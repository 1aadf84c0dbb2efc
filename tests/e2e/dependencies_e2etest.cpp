// End-to-end: a daemon runs a workflow's child only after its parent, with the parent's end
// in the child's payload (`_parents`).

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "db/sql_text.hpp"
#include "support/daemon_process.hpp"
#include "support/test_database.hpp"

namespace pgjobd::testing {
namespace {

TEST(DependenciesE2E, AChildRunsAfterItsParentWithItsParentsInThePayload) {
  TestSchema schema;
  TempDir dir;
  DaemonYaml yaml(schema.name());
  yaml.set("worker", "{concurrency: 4}")
      .shell_handler("step", "cat > " + shell_quote(dir.path()) + "/$PGJOBD_JOB_ID.payload");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();

  const std::string ids = schema.query(
      "SELECT string_agg(id::text, ' ' ORDER BY id) FROM " + quote_identifier(schema.name()) +
      R"(.pgjobd_enqueue_workflow('[{"ref": "first", "type": "step", "payload": {"n": 1}},
          {"ref": "second", "type": "step", "payload": {"n": 2}, "depends_on": ["first"]}]'))");
  const std::string first = ids.substr(0, ids.find(' '));
  const std::string second = ids.substr(ids.find(' ') + 1);
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == 2; }, 30s))
      << table_summary(schema) << daemon.log();
  stop_daemon(daemon);
  EXPECT_EQ(schema.query("SELECT p.finished_at <= c.started_at FROM {jobs} p, {jobs} c WHERE "
                         "p.id = " +
                         first + " AND c.id = " + second),
            "t");
  const auto payload = nlohmann::json::parse(read_text_file(dir.file(second + ".payload")));
  EXPECT_EQ(payload["n"], 2);
  EXPECT_EQ(payload["_parents"][first]["status"], "done");
}

}  // namespace
}  // namespace pgjobd::testing
