// A workflow across three daemons killed mid-run (README "Results and workflows"): a root,
// a fan-out of 100 and one fan-in job, enqueued with pgjobd_enqueue_workflow. Two daemons
// are SIGKILLed while nodes run and started again; every node must end done, each run once
// apart from the attempts in flight at a kill, and the fan-in must see all 100 results.

#include <gtest/gtest.h>
#include <signal.h>

#include <nlohmann/json.hpp>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "support/daemon_process.hpp"
#include "support/private_cluster.hpp"
#include "support/test_database.hpp"
#include "support/test_text.hpp"
#include "support/wait_until.hpp"

namespace pgjobd::testing {
namespace {

constexpr int kFanOut = 100;

std::set<std::int64_t> running_ids(TestSchema& schema) {
  std::set<std::int64_t> ids;
  for (const std::string& id : schema.column("SELECT id FROM {jobs} WHERE status = 'running'")) {
    ids.insert(std::stoll(id));
  }
  return ids;
}

// root -> mid1..mid100 -> fanin, as pgjobd_enqueue_workflow's argument.
std::string workflow_nodes() {
  nlohmann::json nodes = nlohmann::json::array();
  nodes.push_back({{"ref", "root"}, {"type", "root"}});
  nlohmann::json mids = nlohmann::json::array();
  for (int i = 1; i <= kFanOut; ++i) {
    const std::string ref = "mid" + std::to_string(i);
    nodes.push_back(
        {{"ref", ref}, {"type", "mid"}, {"payload", {{"i", i}}}, {"depends_on", {"root"}}});
    mids.push_back(ref);
  }
  nodes.push_back({{"ref", "fanin"}, {"type", "fanin"}, {"depends_on", mids}});
  return nodes.dump();
}

TEST(WorkflowKillE2E, ThreeLevelWorkflowSurvivesTwoSigkillsAndTheFanInSeesEveryResult) {
  TestSchema schema;
  TempDir dir;
  const std::string effects = dir.file("effects");
  const std::string fanin_payload = dir.file("fanin.json");
  // Every node records its run, then prints its result; a middle node works 0.3 to 0.7 s
  // first, so that each kill finds some of them running.
  const std::string script =
      "payload=$(cat); echo $PGJOBD_JOB_ID >> " + shell_quote(effects) +
      "; case $PGJOBD_JOB_TYPE in mid) sleep 0.$((PGJOBD_JOB_ID % 5 + 3));; fanin) printf "
      "'%s' \"$payload\" > " +
      shell_quote(fanin_payload) + ";; esac; echo \"{\\\"node\\\": $PGJOBD_JOB_ID}\"";
  DaemonYaml yaml(schema.name());
  yaml.set("worker", "{concurrency: 8}")
      .set("lease", "{duration: 2s}")
      .set("poll", "{min_interval: 20ms, max_interval: 200ms}")
      .shell_handler("root", script)
      .shell_handler("mid", script)
      .shell_handler("fanin", script);

  std::vector<std::unique_ptr<DaemonProcess>> daemons;
  for (int i = 0; i < 3; ++i) {
    daemons.push_back(std::make_unique<DaemonProcess>(yaml.text()));
    ASSERT_TRUE(daemons.back()->wait_ready()) << daemons.back()->log();
  }
  std::map<std::string, std::int64_t> ids;
  {
    const auto refs = schema.column("SELECT ref || '=' || id FROM " +
                                    schema.qualified("pgjobd_enqueue_workflow") + "(" +
                                    sql_literal(workflow_nodes()) + "::jsonb)");
    for (const std::string& pair : refs) {
      const auto eq = pair.find('=');
      ids[pair.substr(0, eq)] = std::stoll(pair.substr(eq + 1));
    }
  }
  ASSERT_EQ(ids.size(), static_cast<std::size_t>(kFanOut + 2));
  const std::string fanin_id = std::to_string(ids.at("fanin"));
  EXPECT_EQ(schema.query("SELECT status FROM {jobs} WHERE id = " + fanin_id), "blocked");

  // Kill daemon 0 once a fifth of the middle nodes are done, daemon 1 at three fifths; each
  // is replaced at once. The attempts running at a kill are the only ones that may rerun.
  std::set<std::int64_t> in_flight;
  const auto kill_at = [&](std::size_t index, int done_mids) {
    ASSERT_TRUE(wait_until(
        [&] {
          return schema.count("type = 'mid' AND status = 'done'") >= done_mids &&
                 schema.count("status = 'running'") > 0;
        },
        60s))
        << table_summary(schema);
    const auto before = running_ids(schema);
    daemons[index]->signal(SIGKILL);
    ASSERT_EQ(daemons[index]->wait_for_exit(10s), 128 + SIGKILL);
    // A claim sent just before the kill may still commit: take the running set again.
    const auto after = running_ids(schema);
    in_flight.insert(before.begin(), before.end());
    in_flight.insert(after.begin(), after.end());
    daemons[index] = std::make_unique<DaemonProcess>(yaml.text());
    ASSERT_TRUE(daemons[index]->wait_ready()) << daemons[index]->log();
  };
  kill_at(0, kFanOut / 5);
  kill_at(1, kFanOut * 3 / 5);

  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == kFanOut + 2; }, 90s))
      << table_summary(schema);
  EXPECT_EQ(schema.count("status <> 'done'"), 0) << table_summary(schema);

  const auto runs = id_counts(effects);
  EXPECT_EQ(runs.size(), static_cast<std::size_t>(kFanOut + 2)) << "a node that never ran";
  for (const auto& [id, n] : runs) {
    if (n > 1) {
      EXPECT_TRUE(in_flight.contains(id))
          << "job " << id << " ran " << n << " times but was not running at a kill";
    }
  }
  EXPECT_EQ(runs.at(ids.at("fanin")), 1) << "the fan-in ran more than once";

  // The fan-in saw every middle node's result, keyed by its id.
  const auto payload = nlohmann::json::parse(read_text_file(fanin_payload));
  ASSERT_TRUE(payload.contains("_parents")) << payload.dump();
  const auto& parents = payload.at("_parents");
  EXPECT_EQ(parents.size(), static_cast<std::size_t>(kFanOut)) << payload.dump();
  for (int i = 1; i <= kFanOut; ++i) {
    const std::string id = std::to_string(ids.at("mid" + std::to_string(i)));
    ASSERT_TRUE(parents.contains(id)) << "no result of mid" << i;
    EXPECT_EQ(parents.at(id).at("status"), "done");
    EXPECT_EQ(parents.at(id).at("result"), (nlohmann::json{{"node", std::stoll(id)}}));
  }
  // And the results stay readable where the producer reads them.
  EXPECT_EQ(schema.query("SELECT result::text FROM " + schema.qualified("pgjobd_job_result") + "(" +
                         fanin_id + ")"),
            "{\"node\": " + fanin_id + "}");
  for (auto& daemon : daemons) stop_daemon(*daemon);
}

}  // namespace
}  // namespace pgjobd::testing
