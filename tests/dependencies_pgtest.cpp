// Dependencies between jobs (README "Dependencies", "Workflows"): pgjobd_enqueue's
// depends_on, the triggers that resolve a parent's children when it ends, the cascade of
// cancellations, pgjobd_enqueue_workflow, retention next to blocked children, the repair of
// parents that ended without the trigger, and Job::parents.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <string>
#include <thread>
#include <vector>

#include "db/connection.hpp"
#include "db/pg_job_store.hpp"
#include "db/sql_text.hpp"
#include "support/app_session.hpp"
#include "support/build_paths.hpp"
#include "support/claims.hpp"
#include "support/test_database.hpp"
#include "support/test_text.hpp"
#include "support/wait_until.hpp"

namespace pgjobd {
namespace {

using testing::contains;
using testing::Session;
using testing::TestSchema;

// A job's status, blocked_by and last_error, "|"-separated.
std::string state_of(TestSchema& schema, const std::string& id) {
  return schema.query(
      "SELECT concat_ws('|', status, blocked_by, coalesce(last_error, '')) FROM "
      "{jobs} WHERE id = " +
      id);
}

// A table the schema's jobs write their id to each time one leaves `blocked`, for a test to
// count unblocks; returns its qualified name.
std::string record_unblocks(TestSchema& schema) {
  const std::string unblocks = schema.qualified("test_unblocks");
  schema.exec("CREATE TABLE " + unblocks + " (id bigint)");
  schema.exec("CREATE FUNCTION " + schema.qualified("test_count_unblock") +
              "() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN INSERT INTO " + unblocks +
              " VALUES (NEW.id); RETURN NULL; END$$");
  schema.exec(
      "CREATE TRIGGER test_unblock AFTER UPDATE ON {jobs} FOR EACH ROW WHEN "
      "(OLD.status = 'blocked' AND NEW.status <> 'blocked') EXECUTE FUNCTION " +
      schema.qualified("test_count_unblock") + "()");
  return unblocks;
}

// Ends a job as a completion would (a plain UPDATE of its status).
void finish(TestSchema& schema, const std::string& id, const std::string& status = "done") {
  schema.exec("UPDATE {jobs} SET status = '" + status + "', finished_at = now() WHERE id = " + id);
}

// How a parent ends: the statement that ends it (as the completer, an operator's UPDATE or
// pgjobd_cancel would), the status its edges get (a done parent's are not written: its row
// says it) and the status its children see.
struct Ending {
  const char* name;
  const char* sql;
  const char* edge;
  const char* seen = edge;
};

const Ending kEndings[] = {
    {"done",
     "UPDATE {jobs} SET status = 'done', finished_at = now(), result = '{\"n\": 7}' "
     "WHERE id = $P",
     "", "done"},
    {"dead",
     "UPDATE {jobs} SET status = 'dead', finished_at = now(), last_error = 'x' WHERE id = $P",
     "dead"},
    {"cancelled", "SELECT {s}.pgjobd_cancel($P)", "cancelled"},
    {"deleted", "DELETE FROM {jobs} WHERE id = $P", "deleted"},
};

std::string with_parent(std::string sql, const std::string& parent) {
  for (auto at = sql.find("$P"); at != std::string::npos; at = sql.find("$P", at)) {
    sql.replace(at, 2, parent);
  }
  return sql;
}

// Every parent outcome by every on_parent_failure: a done parent unblocks the child with its
// result in `_parents`; a failed one cancels a 'cancel' child (last_error naming the parent
// and how it ended) and unblocks a 'run' child, which sees the failure in `_parents`.
TEST(Dependencies, EveryParentOutcomeByEveryPolicy) {
  TestSchema schema;
  Session app(schema);
  for (const Ending& ending : kEndings) {
    for (const std::string policy : {"cancel", "run"}) {
      SCOPED_TRACE(std::string(ending.name) + " / " + policy);
      const std::string parent = app.query("SELECT {s}.pgjobd_enqueue('p')");
      const std::string child = app.query(
          "SELECT {s}.pgjobd_enqueue('c', '{\"k\": 1}', run_at => now() - interval "
          "'1 hour', depends_on => ARRAY[" +
          parent + "], on_parent_failure => '" + policy + "')");
      EXPECT_EQ(state_of(schema, child), "blocked|1|");
      EXPECT_EQ(schema.query("SELECT has_children FROM {jobs} WHERE id = " + parent), "t");
      const std::string sql = with_parent(ending.sql, parent);
      if (sql.find("{s}") != std::string::npos) {
        app.query(sql);
      } else {
        schema.exec(sql);
      }
      EXPECT_EQ(
          schema.query("SELECT parent_status FROM " + schema.qualified("pgjobd_dependencies") +
                       " WHERE child_id = " + child),
          ending.edge);
      const bool failed = std::string(ending.name) != "done";
      if (failed && policy == "cancel") {
        EXPECT_EQ(state_of(schema, child),
                  std::string("cancelled|0|cancelled: parent ") + parent + " ended " + ending.edge);
        EXPECT_EQ(schema.query("SELECT finished_at IS NOT NULL AND payload = '{\"k\": 1}' FROM "
                               "{jobs} WHERE id = " +
                               child),
                  "t");
        continue;
      }
      EXPECT_EQ(state_of(schema, child), "pending|0|");
      // Due no earlier than the unblock (its run_at had passed an hour ago).
      EXPECT_EQ(schema.query("SELECT run_at > now() - interval '1 minute' FROM {jobs} WHERE id = " +
                             child),
                "t");
      const auto payload =
          nlohmann::json::parse(schema.query("SELECT payload FROM {jobs} WHERE id = " + child));
      EXPECT_EQ(payload["k"], 1);
      EXPECT_EQ(payload["_parents"][parent]["status"], ending.seen);
      const nlohmann::json expected =
          failed ? nlohmann::json() : nlohmann::json::parse("{\"n\": 7}");
      EXPECT_EQ(payload["_parents"][parent]["result"], expected);
    }
  }
}

// A child enqueued after its parents ended: pending at once when all are done (with
// `_parents`), cancelled at once by a failed one under 'cancel', blocked by the others only.
TEST(Dependencies, ParentsThatEndedBeforeTheChildIsEnqueued) {
  TestSchema schema;
  Session app(schema);
  const std::string done = schema.query(
      "INSERT INTO {jobs} (type, status, finished_at, result) VALUES ('p', 'done', now(), '42') "
      "RETURNING id");
  const std::string dead = schema.query(
      "INSERT INTO {jobs} (type, status, finished_at) VALUES ('p', 'dead', now()) RETURNING id");
  const std::string open = app.query("SELECT {s}.pgjobd_enqueue('p')");
  const std::string ready =
      app.query("SELECT {s}.pgjobd_enqueue('c', depends_on => ARRAY[" + done + "])");
  EXPECT_EQ(state_of(schema, ready), "pending|0|");
  EXPECT_EQ(schema.query("SELECT payload::text FROM {jobs} WHERE id = " + ready),
            "{\"_parents\": {\"" + done + "\": {\"result\": 42, \"status\": \"done\"}}}");
  const std::string cancelled =
      app.query("SELECT {s}.pgjobd_enqueue('c', depends_on => ARRAY[" + open + ", " + dead + "])");
  EXPECT_EQ(state_of(schema, cancelled), "cancelled|0|cancelled: parent " + dead + " ended dead");
  const std::string runs = app.query("SELECT {s}.pgjobd_enqueue('c', depends_on => ARRAY[" + open +
                                     ", " + dead + ", " + done + "], on_parent_failure => 'run')");
  EXPECT_EQ(state_of(schema, runs), "blocked|1|");
  // A repeated parent is one parent.
  const std::string twice =
      app.query("SELECT {s}.pgjobd_enqueue('c', depends_on => ARRAY[" + open + ", " + open + "])");
  EXPECT_EQ(state_of(schema, twice), "blocked|1|");
  finish(schema, open);
  EXPECT_EQ(state_of(schema, runs), "pending|0|");
  EXPECT_EQ(state_of(schema, twice), "pending|0|");
  const auto parents = nlohmann::json::parse(
      schema.query("SELECT payload->'_parents' FROM {jobs} WHERE id = " + runs));
  EXPECT_EQ(parents.size(), 3u);
  EXPECT_EQ(parents[dead]["status"], "dead");
}

TEST(Dependencies, EnqueueRefusesBadDependenciesNamingThem) {
  TestSchema schema;
  Session app(schema);
  const std::string parent = app.query("SELECT {s}.pgjobd_enqueue('p')");
  struct Case {
    std::string args;
    const char* sqlstate;
    std::string message;
  };
  const Case cases[] = {
      {"depends_on => ARRAY[" + parent + ", 987654321, 987654320]", "23503",
       "depends_on names job(s) that do not exist: 987654320, 987654321"},
      {"'[1]', depends_on => ARRAY[" + parent + "]", "22023",
       "a job with depends_on needs an object payload"},
      {"unique_key => 'k', depends_on => ARRAY[" + parent + "]", "22023",
       "unique_key cannot be combined with depends_on"},
      {"depends_on => ARRAY[" + parent + "], on_parent_failure => 'ignore'", "22023",
       "on_parent_failure must be 'cancel' or 'run', not 'ignore'"},
      {"depends_on => ARRAY[" + parent + "], on_parent_failure => NULL", "22023",
       "on_parent_failure must be 'cancel' or 'run', not NULL"},
      {"depends_on => ARRAY[" + parent + ", NULL]", "22004", "depends_on must not hold NULL"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const std::string error = app.error("SELECT {s}.pgjobd_enqueue('c', " + c.args + ")");
    EXPECT_EQ(error.substr(0, 5), c.sqlstate) << error;
    EXPECT_TRUE(contains(error, "pgjobd_enqueue: " + c.message)) << error;
  }
  EXPECT_EQ(schema.count(), 1);
  EXPECT_EQ(schema.query("SELECT has_children FROM {jobs}"), "f");
  // No parents: as before (an empty array too).
  EXPECT_EQ(state_of(schema, app.query("SELECT {s}.pgjobd_enqueue('c', '[1]', depends_on => "
                                       "'{}', unique_key => 'k')")),
            "pending|0|");
}

// Many parents of one child end at the same time, in transactions of their own on several
// connections: the child unblocks exactly once, and its `_parents` holds every parent (the
// last transaction to decrement reads the edges the others committed).
TEST(Dependencies, ConcurrentParentsUnblockTheirChildExactlyOnce) {
  TestSchema schema;
  Session app(schema);
  constexpr int kThreads = 4;
  constexpr int kPerThread = 10;
  const std::string unblocks = record_unblocks(schema);
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE(round);
    const std::vector<std::string> parents =
        app.column("SELECT {s}.pgjobd_enqueue('p') FROM generate_series(1, " +
                   std::to_string(kThreads * kPerThread) + ")");
    std::string list;
    for (const auto& p : parents) list += (list.empty() ? "" : ",") + p;
    const std::string child =
        app.query("SELECT {s}.pgjobd_enqueue('c', depends_on => ARRAY[" + list + "])");
    std::barrier start(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        auto conn = open_connection(schema.config().database, "test");
        pqxx::work txn(*conn);
        std::string mine;
        for (int i = 0; i < kPerThread; ++i) {
          mine += (mine.empty() ? "" : ",") + parents[static_cast<std::size_t>(t * kPerThread + i)];
        }
        start.arrive_and_wait();
        txn.exec("UPDATE " + schema.qualified("jobs") +
                 " SET status = 'done', finished_at = now() WHERE id IN (" + mine + ")");
        txn.commit();
      });
    }
    for (auto& thread : threads) thread.join();
    EXPECT_EQ(state_of(schema, child), "pending|0|");
    EXPECT_EQ(schema.query("SELECT count(*) FROM " + unblocks + " WHERE id = " + child), "1");
    EXPECT_EQ(schema.query("SELECT count(*) FROM jsonb_each((SELECT payload->'_parents' FROM "
                           "{jobs} WHERE id = " +
                           child + ")) e WHERE e.value->>'status' = 'done'"),
              std::to_string(kThreads * kPerThread));
  }
}

// A chain of 1,000 jobs whose head is cancelled: each cancellation cascades to the next in
// the same statement, without a nested trigger per link.
TEST(Dependencies, AChainOfAThousandIsCancelledAtOnce) {
  TestSchema schema;
  Session app(schema);
  std::string nodes = R"([{"ref": "n0", "type": "t"})";
  for (int i = 1; i <= 1000; ++i) {
    nodes += R"(, {"ref": "n)" + std::to_string(i) + R"(", "type": "t", "depends_on": ["n)" +
             std::to_string(i - 1) + "\"]}";
  }
  nodes += "]";
  const std::string head =
      app.query("SELECT id FROM {s}.pgjobd_enqueue_workflow('" + nodes + "') WHERE ref = 'n0'");
  EXPECT_EQ(schema.count("status = 'blocked'"), 1000);
  EXPECT_EQ(app.query("SELECT {s}.pgjobd_cancel(" + head + ")"), "cancelled");
  EXPECT_EQ(schema.count("status = 'cancelled'"), 1001);
  EXPECT_EQ(schema.query("SELECT last_error FROM {jobs} WHERE id = " + head + " + 1000"),
            "cancelled: parent " + std::to_string(std::stoll(head) + 999) + " ended cancelled");
  // A cancelled blocked job in the middle of another chain cancels only what follows it.
  const std::string again = app.query(
      "SELECT string_agg(id::text, ',' ORDER BY id) FROM {s}.pgjobd_enqueue_workflow('[{\"ref\": "
      "\"a\", \"type\": \"t\"}, {\"ref\": \"b\", \"type\": \"t\", \"depends_on\": [\"a\"]}, "
      "{\"ref\": \"c\", \"type\": \"t\", \"depends_on\": [\"b\"], \"on_parent_failure\": "
      "\"run\"}]')");
  const std::string a = again.substr(0, again.find(','));
  const std::string b = std::to_string(std::stoll(a) + 1);
  const std::string c = std::to_string(std::stoll(a) + 2);
  EXPECT_EQ(app.query("SELECT status FROM {s}.pgjobd_cancel_many(ARRAY[" + b + "]::bigint[])"),
            "cancelled");
  EXPECT_EQ(state_of(schema, a), "pending|0|");
  EXPECT_EQ(state_of(schema, c), "pending|0|");
  EXPECT_EQ(schema.query("SELECT payload->'_parents'->'" + b +
                         "'->>'status' FROM {jobs} WHERE id = " + c),
            "cancelled");
  // a ends later: nothing of b's or c's changes.
  finish(schema, a);
  EXPECT_EQ(state_of(schema, b), "cancelled|1|cancelled");
}

// A parent that dies is retried and then succeeds: its edge was resolved when it died and is
// not resolved again (the child, waiting for another parent too, is not unblocked early).
TEST(Dependencies, ADeadParentRetriedToDoneResolvesItsEdgeOnce) {
  TestSchema schema;
  Session app(schema);
  const std::string first = app.query("SELECT {s}.pgjobd_enqueue('p')");
  const std::string second = app.query("SELECT {s}.pgjobd_enqueue('p')");
  const std::string child = app.query("SELECT {s}.pgjobd_enqueue('c', depends_on => ARRAY[" +
                                      first + ", " + second + "], on_parent_failure => 'run')");
  finish(schema, first, "dead");
  EXPECT_EQ(state_of(schema, child), "blocked|1|");
  EXPECT_EQ(app.query("SELECT {s}.pgjobd_retry(" + first + ")"), "dead");
  finish(schema, first);
  EXPECT_EQ(state_of(schema, child), "blocked|1|");
  finish(schema, second);
  EXPECT_EQ(state_of(schema, child), "pending|0|");
}

// A child cancelled by a failed parent and then retried waits again for the parents still
// open, and runs with every parent's end in `_parents` once they have ended.
TEST(Dependencies, ARetriedCancelledChildWaitsForItsOpenParents) {
  TestSchema schema;
  Session app(schema);
  const std::string failing = app.query("SELECT {s}.pgjobd_enqueue('p')");
  const std::string open = app.query("SELECT {s}.pgjobd_enqueue('p')");
  const std::string child = app.query("SELECT {s}.pgjobd_enqueue('c', depends_on => ARRAY[" +
                                      failing + ", " + open + "])");
  finish(schema, failing, "dead");
  EXPECT_EQ(state_of(schema, child), "cancelled|1|cancelled: parent " + failing + " ended dead");
  EXPECT_EQ(app.query("SELECT {s}.pgjobd_retry(" + child + ")"), "cancelled");
  EXPECT_EQ(schema.query("SELECT status FROM {jobs} WHERE id = " + child), "blocked");
  finish(schema, open);
  EXPECT_EQ(schema.query("SELECT status FROM {jobs} WHERE id = " + child), "pending");
  const auto parents = nlohmann::json::parse(
      schema.query("SELECT payload->'_parents' FROM {jobs} WHERE id = " + child));
  EXPECT_EQ(parents.size(), 2u);
  EXPECT_EQ(parents[failing]["status"], "dead");
  EXPECT_EQ(parents[open]["status"], "done");

  // With every parent ended, the retried child is due at once and carries them.
  const std::string other = app.query("SELECT {s}.pgjobd_enqueue('p')");
  const std::string late =
      app.query("SELECT {s}.pgjobd_enqueue('c', depends_on => ARRAY[" + other + "])");
  finish(schema, other, "dead");
  EXPECT_EQ(app.query("SELECT {s}.pgjobd_retry(" + late + ")"), "cancelled");
  EXPECT_EQ(schema.query("SELECT status || ' ' || (payload->'_parents'->'" + other +
                         "'->>'status') FROM {jobs} WHERE id = " + late),
            "pending dead");

  // A parent that ends while the child is cancelled does not count it down (only blocked
  // children are), so the retry counts the open parents again: none left, it runs.
  const std::string first = app.query("SELECT {s}.pgjobd_enqueue('p')");
  const std::string second = app.query("SELECT {s}.pgjobd_enqueue('p')");
  const std::string meanwhile = app.query("SELECT {s}.pgjobd_enqueue('c', depends_on => ARRAY[" +
                                          first + ", " + second + "])");
  finish(schema, first, "dead");
  finish(schema, second);
  EXPECT_EQ(state_of(schema, meanwhile), "cancelled|1|cancelled: parent " + first + " ended dead");
  EXPECT_EQ(app.query("SELECT {s}.pgjobd_retry(" + meanwhile + ")"), "cancelled");
  EXPECT_EQ(state_of(schema, meanwhile), "pending|0|cancelled: parent " + first + " ended dead");
  EXPECT_EQ(schema.query("SELECT payload->'_parents'->'" + second +
                         "'->>'status' FROM {jobs} "
                         "WHERE id = " +
                         meanwhile),
            "done");
}

// A run_at later than the unblock is kept; a child deleted by hand takes its edges along.
TEST(Dependencies, ALaterRunAtIsKeptAndADeletedChildTakesItsEdges) {
  TestSchema schema;
  Session app(schema);
  const std::string parent = app.query("SELECT {s}.pgjobd_enqueue('p')");
  const std::string later =
      app.query("SELECT {s}.pgjobd_enqueue('c', run_at => '2099-01-01Z', depends_on => ARRAY[" +
                parent + "])");
  const std::string gone =
      app.query("SELECT {s}.pgjobd_enqueue('c', depends_on => ARRAY[" + parent + "])");
  schema.exec("DELETE FROM {jobs} WHERE id = " + gone);
  const std::string edges = "SELECT count(*) FROM " + schema.qualified("pgjobd_dependencies");
  EXPECT_EQ(schema.query(edges), "1");
  finish(schema, parent);
  EXPECT_EQ(schema.query("SELECT concat_ws('|', status, run_at = '2099-01-01Z') FROM {jobs} "
                         "WHERE id = " +
                         later),
            "pending|t");
  schema.exec("DELETE FROM {jobs} WHERE id = " + later);
  EXPECT_EQ(schema.query(edges), "0");
}

TEST(Dependencies, WorkflowsRefuseCyclesAndUnknownOrDuplicateRefsNamingThem) {
  TestSchema schema;
  Session app(schema);
  struct Case {
    const char* nodes;
    const char* message;
  };
  const Case cases[] = {
      {R"([{"ref": "a", "type": "t", "depends_on": ["c"]}, {"ref": "b", "type": "t",
           "depends_on": ["a"]}, {"ref": "c", "type": "t", "depends_on": ["b"]},
          {"ref": "ok", "type": "t"}])",
       "depends_on forms a cycle; these refs are on it or wait for it: a, b, c"},
      {R"([{"ref": "self", "type": "t", "depends_on": ["self"]}])",
       "depends_on forms a cycle; these refs are on it or wait for it: self"},
      {R"([{"ref": "a", "type": "t", "depends_on": ["x", "y"]}, {"ref": "b", "type": "t",
           "depends_on": ["x"]}])",
       "depends_on names unknown ref(s): x (in a), x (in b), y (in a)"},
      {R"([{"ref": "a", "type": "t"}, {"ref": "b", "type": "t"}, {"ref": "a", "type": "u"}])",
       "duplicate ref(s): a"},
      {R"([{"ref": "a", "type": "t"}, {"type": "t"}])", "nodes[1].ref: must be a non-empty string"},
      {R"([{"ref": "a", "type": "t", "payload": [1]}])", "nodes[0].payload: must be an object"},
      {R"([{"ref": "a", "type": "t", "depends_on": [1]}])",
       "nodes[0].depends_on: must be an array of refs"},
      {R"([{"ref": "a", "type": "t", "on_parent_failure": "skip"}])",
       "nodes[0].on_parent_failure: must be 'cancel' or 'run', not 'skip'"},
      {R"([{"ref": "a", "type": "t", "unique_key": "k"}])",
       "nodes[0] has unknown key(s): unique_key"},
      {R"([{"ref": "a"}])", "nodes[0]: type must not be NULL"},
      {R"({"ref": "a"})", "nodes must be a JSON array of objects, not object"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.nodes);
    const std::string error =
        app.error(std::string("SELECT * FROM {s}.pgjobd_enqueue_workflow('") + c.nodes + "')");
    EXPECT_TRUE(contains(error, std::string("pgjobd_enqueue_workflow: ") + c.message)) << error;
  }
  EXPECT_EQ(schema.count(), 0);
  EXPECT_EQ(schema.query("SELECT count(*) FROM " + schema.qualified("pgjobd_dependencies")), "0");
}

// A workflow's jobs: roots pending, the others blocked with their parents' count; each
// node's values; ids in the array's order. A fan-out of 10,000 is inserted set-based.
TEST(Dependencies, AWorkflowInsertsItsGraphInOneCall) {
  TestSchema schema;
  Session app(schema);
  const std::vector<std::string> rows = app.column(
      R"(SELECT ref || '=' || id FROM {s}.pgjobd_enqueue_workflow('[
           {"ref": "fetch", "type": "fetch", "payload": {"url": "u"}, "queue": "io"},
           {"ref": "resize", "type": "resize", "depends_on": ["fetch"], "priority": 3},
           {"ref": "notify", "type": "mail", "depends_on": ["fetch", "resize", "fetch"],
            "on_parent_failure": "run", "max_attempts": 2}]'))");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].substr(0, 6), "fetch=");
  const std::string fetch = rows[0].substr(6);
  const std::string notify = rows[2].substr(7);
  EXPECT_EQ(schema.query("SELECT string_agg(concat_ws('|', type, queue, priority, max_attempts, "
                         "status, blocked_by, has_children, on_parent_failure, payload::text), "
                         "' / ' ORDER BY id) FROM {jobs}"),
            "fetch|io|0|5|pending|0|t|{\"url\": \"u\"} / resize|default|3|5|blocked|1|t|cancel|{} "
            "/ mail|default|0|2|blocked|2|f|run|{}");
  finish(schema, fetch);
  schema.exec("UPDATE {jobs} SET status = 'dead', finished_at = now() WHERE type = 'resize'");
  EXPECT_EQ(state_of(schema, notify), "pending|0|");

  std::string fan = R"([{"ref": "root", "type": "split"})";
  for (int i = 0; i < 10'000; ++i) {
    fan +=
        R"(, {"ref": "leaf)" + std::to_string(i) + R"(", "type": "work", "depends_on": ["root"]})";
  }
  fan += "]";
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(app.query("SELECT count(*) FROM {s}.pgjobd_enqueue_workflow('" + fan + "')"), "10001");
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
  EXPECT_LT(took.count(), 2.0) << "10,000 nodes took " << took.count() << " s";
  std::cout << "a workflow of 10,001 nodes: " << took.count() << " s\n";
  const auto unblocking = std::chrono::steady_clock::now();
  schema.exec("UPDATE {jobs} SET status = 'done', finished_at = now() WHERE type = 'split'");
  const std::chrono::duration<double> unblocked = std::chrono::steady_clock::now() - unblocking;
  std::cout << "its root's completion, unblocking 10,000: " << unblocked.count() << " s\n";
  // A statement per child made this 36 s (the `_parents` of each planned alone).
  EXPECT_LT(unblocked.count(), 5.0);
  EXPECT_EQ(schema.count("type = 'work' AND status = 'pending' AND payload ? '_parents'"), 10'000);
}

// Retention never deletes a parent while a child of it is blocked (its result would be
// missing from the child's `_parents`); once the child is unblocked, the parent goes.
TEST(Dependencies, RetentionKeepsAParentWhileAChildOfItIsBlocked) {
  TestSchema schema;
  Session app(schema);
  const std::string old_parent = app.query("SELECT {s}.pgjobd_enqueue('p')");
  const std::string open = app.query("SELECT {s}.pgjobd_enqueue('p')");
  const std::string child = app.query("SELECT {s}.pgjobd_enqueue('c', depends_on => ARRAY[" +
                                      old_parent + ", " + open + "])");
  schema.exec(
      "UPDATE {jobs} SET status = 'done', result = '\"kept\"', finished_at = now() - "
      "interval '30 days' WHERE id = " +
      old_parent);
  EXPECT_EQ(state_of(schema, child), "blocked|1|");
  schema.exec(
      "INSERT INTO {jobs} (type, status, finished_at) VALUES ('x', 'done', now() - "
      "interval '30 days'), ('x', 'dead', now() - interval '30 days')");
  PgJobStore store(schema.config().database, "test");
  const RetentionConfig retention;
  EXPECT_EQ(store.prune(retention, 100), 2);
  EXPECT_EQ(schema.count("id = " + old_parent), 1);
  finish(schema, open);
  EXPECT_EQ(schema.query("SELECT payload->'_parents'->'" + old_parent +
                         "'->>'result' FROM {jobs} WHERE id = " + child),
            "kept");
  EXPECT_EQ(store.prune(retention, 100), 1);
  EXPECT_EQ(schema.count("id = " + old_parent), 0);
}

// Parents that ended or were deleted while the triggers were off (a restore with
// session_replication_role = replica): the repair resolves their children as the trigger
// would have, and a second call finds nothing.
TEST(Dependencies, TheRepairResolvesParentsThatEndedWithoutTheTrigger) {
  TestSchema schema;
  Session app(schema);
  const std::string done = app.query("SELECT {s}.pgjobd_enqueue('p')");
  const std::string deleted = app.query("SELECT {s}.pgjobd_enqueue('p')");
  const std::string open = app.query("SELECT {s}.pgjobd_enqueue('p')");
  const std::string waits =
      app.query("SELECT {s}.pgjobd_enqueue('c', depends_on => ARRAY[" + done + "])");
  const std::string cancelled =
      app.query("SELECT {s}.pgjobd_enqueue('c', depends_on => ARRAY[" + deleted + "])");
  const std::string grandchild =
      app.query("SELECT {s}.pgjobd_enqueue('c', depends_on => ARRAY[" + cancelled + "])");
  const std::string still =
      app.query("SELECT {s}.pgjobd_enqueue('c', depends_on => ARRAY[" + open + "])");
  schema.exec(
      "SET session_replication_role = replica; UPDATE {jobs} SET status = 'done', "
      "finished_at = now() WHERE id = " +
      done + "; DELETE FROM {jobs} WHERE id = " + deleted +
      "; SET session_replication_role = DEFAULT");
  EXPECT_EQ(state_of(schema, waits), "blocked|1|");
  PgJobStore store(schema.config().database, "test");
  EXPECT_EQ(store.repair_dependencies(1), 1);
  EXPECT_EQ(store.repair_dependencies(100), 1);
  EXPECT_EQ(store.repair_dependencies(100), 0);
  EXPECT_EQ(state_of(schema, waits), "pending|0|");
  EXPECT_EQ(schema.query("SELECT payload->'_parents'->'" + done +
                         "'->>'status' FROM {jobs} "
                         "WHERE id = " +
                         waits),
            "done");
  EXPECT_EQ(state_of(schema, cancelled),
            "cancelled|0|cancelled: parent " + deleted + " ended deleted");
  EXPECT_EQ(state_of(schema, grandchild),
            "cancelled|0|cancelled: parent " + cancelled + " ended cancelled");
  EXPECT_EQ(state_of(schema, still), "blocked|1|");
}

// The runtime role ends parents with plain UPDATEs (the completer) and deletes them
// (retention); a producer enqueues children and workflows; neither has rights beyond
// sql/grants.sql's, and the triggers still resolve the children.
TEST(Dependencies, TheTriggersWorkForTheRuntimeAndProducerRoles) {
  TestSchema schema;
  const std::string suffix = std::to_string(getpid());
  const std::string runtime = "pgjobd_rt_dep_" + suffix;
  const std::string producer = "pgjobd_pr_dep_" + suffix;
  for (const auto& role : {runtime, producer}) {
    schema.exec("DROP ROLE IF EXISTS " + quote_identifier(role));
    schema.exec("CREATE ROLE " + quote_identifier(role) + " LOGIN");
  }
  const std::string command = "psql -q -X '" + testing::test_database_url() +
                              "' -v schema=" + schema.name() + " -v runtime_role=" + runtime +
                              " -v producer_role=" + producer + " -f " +
                              testing::source_path("sql/grants.sql");
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  {
    Session app(schema, testing::test_database_url_for_role(producer));
    Session daemon(schema, testing::test_database_url_for_role(runtime));
    const std::string parent = app.query("SELECT {s}.pgjobd_enqueue('p')");
    const std::string child =
        app.query("SELECT {s}.pgjobd_enqueue('c', depends_on => ARRAY[" + parent + "])");
    const std::string flow = app.query(
        "SELECT string_agg(id::text, ',' ORDER BY id) FROM {s}.pgjobd_enqueue_workflow('[{\"ref\": "
        "\"a\", \"type\": \"t\"}, {\"ref\": \"b\", \"type\": \"t\", \"depends_on\": [\"a\"]}]')");
    EXPECT_EQ(daemon.error("UPDATE {s}.jobs SET status = 'done', finished_at = now() WHERE id = " +
                           parent),
              "");
    EXPECT_EQ(state_of(schema, child), "pending|0|");
    const std::string a = flow.substr(0, flow.find(','));
    EXPECT_EQ(daemon.error("DELETE FROM {s}.jobs WHERE id = " + a), "");
    EXPECT_EQ(state_of(schema, flow.substr(flow.find(',') + 1)),
              "cancelled|0|cancelled: parent " + a + " ended deleted");
    EXPECT_EQ(app.error("SELECT {s}.pgjobd_resolve_parents('{1}', '{done}')").substr(0, 5),
              "42501");
  }
  for (const auto& role : {runtime, producer}) {
    schema.exec("DROP OWNED BY " + quote_identifier(role) + "; DROP ROLE " +
                quote_identifier(role));
  }
}

// A claimed child carries its parents' ends as Job::parents; a job without them has "".
TEST(Dependencies, AClaimedChildCarriesItsParents) {
  TestSchema schema;
  Session app(schema);
  const std::string parent = app.query("SELECT {s}.pgjobd_enqueue('p')");
  schema.exec(
      "UPDATE {jobs} SET status = 'done', finished_at = now(), result = '[1, 2]' "
      "WHERE id = " +
      parent);
  const std::string child =
      app.query("SELECT {s}.pgjobd_enqueue('a', '{\"note\": \"_parents\"}', depends_on => ARRAY[" +
                parent + "])");
  app.query("SELECT {s}.pgjobd_enqueue('a', '{\"note\": \"_parents\"}')");
  PgJobStore store(schema.config().database, "test");
  auto jobs = store.claim(testing::claim_of(5));
  ASSERT_EQ(jobs.size(), 2u);
  if (std::to_string(jobs[0].id) != child) std::swap(jobs[0], jobs[1]);
  EXPECT_EQ(jobs[0].parents(), "{\"" + parent + "\":{\"result\":[1,2],\"status\":\"done\"}}");
  EXPECT_EQ(jobs[1].parents(), "");
}

// With retention.done 0 a daemon deletes a done job as it completes it: its children see it
// done (without a result: none is kept), not deleted by hand, and run.
TEST(Dependencies, AParentDeletedAsItCompletesIsDone) {
  TestSchema schema;
  Session app(schema);
  const std::string parent = app.query("SELECT {s}.pgjobd_enqueue('a')");
  const std::string child =
      app.query("SELECT {s}.pgjobd_enqueue('c', depends_on => ARRAY[" + parent + "])");
  PgJobStore store(schema.config().database, "test");
  const auto jobs = store.claim(testing::claim_of(5));
  ASSERT_EQ(jobs.size(), 1u);
  const auto report =
      store.complete({{{jobs[0].id, jobs[0].attempt}, Outcome::kDone, {}, {}}}, "w", true);
  EXPECT_EQ(report.written, 1);
  // The row triggers unblocked the child and sent the NOTIFY: not to be ignored.
  EXPECT_TRUE(report.unblocked.empty());
  EXPECT_EQ(report.notify_pid, 0);
  EXPECT_EQ(schema.count("id = " + parent), 0);
  EXPECT_EQ(state_of(schema, child), "pending|0|");
  EXPECT_EQ(schema.query("SELECT payload->'_parents'->'" + parent +
                         "'->>'status' FROM {jobs} "
                         "WHERE id = " +
                         child),
            "done");
  // A job deleted by hand is still a failure for its children.
  const std::string other = app.query("SELECT {s}.pgjobd_enqueue('p')");
  const std::string orphan =
      app.query("SELECT {s}.pgjobd_enqueue('c', depends_on => ARRAY[" + other + "])");
  schema.exec("DELETE FROM {jobs} WHERE id = " + other);
  EXPECT_EQ(state_of(schema, orphan), "cancelled|0|cancelled: parent " + other + " ended deleted");
}

// A daemon's completion batch names the parents it ended itself (src/db/statements.cpp,
// kCompleteNoted): the row trigger, a PL/pgSQL call per parent, stays quiet while the
// statement's trigger resolves them, with done and failed parents in one batch, a child
// counting each of its parents once, across batches, and seeing every parent's result.
TEST(Dependencies, ADaemonsBatchNamesItsParentsWithoutARowTriggerCall) {
  TestSchema schema;
  Session app(schema);
  const std::string p1 = app.query("SELECT {s}.pgjobd_enqueue('a')");
  const std::string p2 = app.query("SELECT {s}.pgjobd_enqueue('a')");
  const std::string p3 = app.query("SELECT {s}.pgjobd_enqueue('a')");
  const std::string all = "ARRAY[" + p1 + ", " + p2 + ", " + p3 + "]";
  const std::string cancelled =
      app.query("SELECT {s}.pgjobd_enqueue('c', depends_on => " + all + ")");
  const std::string runs = app.query("SELECT {s}.pgjobd_enqueue('c', depends_on => " + all +
                                     ", on_parent_failure => 'run')");
  const std::string waits =
      app.query("SELECT {s}.pgjobd_enqueue('c', depends_on => ARRAY[" + p1 + "])");
  Config config = schema.config();
  config.database.url += (config.database.url.find('?') == std::string::npos ? "?" : "&");
  config.database.url += "options=-c%20track_functions%3Dpl";
  {
    PgJobStore store(config.database, "test");
    auto jobs = store.claim(testing::claim_of(3));
    ASSERT_EQ(jobs.size(), 3u);
    std::sort(jobs.begin(), jobs.end(), [](const Job& a, const Job& b) { return a.id < b.id; });
    // p1 and p2 done in one batch: `runs` and `cancelled` still wait for p3 (counted once
    // each), `waits` runs.
    auto report =
        store.complete({{{jobs[0].id, jobs[0].attempt}, Outcome::kDone, {}, {}, "{\"n\": 1}"},
                        {{jobs[1].id, jobs[1].attempt}, Outcome::kDone, {}, {}, "{\"n\": 2}"}},
                       "w", false);
    EXPECT_EQ(report.written, 2);
    EXPECT_EQ(state_of(schema, runs), "blocked|1|");
    EXPECT_EQ(state_of(schema, cancelled), "blocked|1|");
    EXPECT_EQ(state_of(schema, waits), "pending|0|");
    // The report names the child the batch unblocked, for the daemon to claim by id, and
    // the session whose NOTIFY of it the daemon's listener ignores.
    EXPECT_EQ(report.unblocked, std::vector<std::int64_t>{std::stoll(waits)});
    EXPECT_FALSE(report.other_due);
    EXPECT_EQ(schema.query("SELECT application_name FROM pg_stat_activity WHERE pid = " +
                           std::to_string(report.notify_pid)),
              "pgjobd test");
    report =
        store.complete({{{jobs[2].id, jobs[2].attempt}, Outcome::kDead, "boom", {}}}, "w", false);
    EXPECT_EQ(report.written, 1);
    // `runs` became pending through the trigger's resolution of a dead parent, which the
    // report does not name: it says the daemon must claim as for a NOTIFY.
    EXPECT_TRUE(report.unblocked.empty());
    EXPECT_TRUE(report.other_due);
  }
  EXPECT_EQ(state_of(schema, cancelled), "cancelled|0|cancelled: parent " + p3 + " ended dead");
  EXPECT_EQ(state_of(schema, runs), "pending|0|");
  const auto parents = nlohmann::json::parse(
      schema.query("SELECT payload->'_parents' FROM {jobs} WHERE id = " + runs));
  EXPECT_EQ(parents[p1]["status"], "done");
  EXPECT_EQ(parents[p1]["result"], nlohmann::json::parse("{\"n\": 1}"));
  EXPECT_EQ(parents[p2]["result"], nlohmann::json::parse("{\"n\": 2}"));
  EXPECT_EQ(parents[p3]["status"], "dead");
  // The store's session has ended, so its function statistics are written: the statement
  // trigger ran for each batch, the row trigger never.
  const auto calls = [&](const std::string& function) {
    return schema.query(
        "SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions "
        "WHERE schemaname = '" +
        schema.name() + "' AND funcname = '" + function + "'");
  };
  ASSERT_TRUE(testing::wait_until(
      [&] {
        schema.exec("SELECT pg_stat_clear_snapshot()");
        return calls("pgjobd_dependencies_resolve") != "0";
      },
      std::chrono::seconds(10)));
  EXPECT_EQ(calls("pgjobd_dependencies_end"), "0");
  // The done batch counted its parents off their children itself: only the dead one went
  // through the function.
  EXPECT_EQ(calls("pgjobd_resolve_ends"), "1");
}

// The claim by id (ClaimStore::claim_ids) takes of the ids it is given only what the claim
// in claim order could: due jobs of a served queue that is not paused, of a served type,
// not held by another session, within the queue's free slots (the first in claim order).
TEST(Dependencies, AClaimByIdTakesOnlyWhatAClaimCould) {
  TestSchema schema;
  Session app(schema);
  const auto enqueue = [&](const std::string& args) {
    return std::stoll(app.query("SELECT {s}.pgjobd_enqueue(" + args + ")"));
  };
  const std::int64_t low = enqueue("'a'");
  const std::int64_t high = enqueue("'a', priority => 5");
  const std::int64_t other_queue = enqueue("'a', queue => 'q2'");
  const std::int64_t later = enqueue("'a', run_at => now() + interval '1 hour'");
  const std::int64_t unserved = enqueue("'zz'");
  const std::int64_t paused = enqueue("'a', queue => 'q3'");
  const std::int64_t held = enqueue("'a', queue => 'q4'");
  const std::int64_t not_asked = enqueue("'a', priority => 9");
  schema.exec("SELECT " + schema.qualified("pgjobd_pause_queue") + "('q3')");
  pqxx::connection holder_conn(schema.config().database.url);
  pqxx::work holder(holder_conn);
  holder.exec("SELECT 1 FROM " + schema.qualified("jobs") + " WHERE id = " + std::to_string(held) +
              " FOR UPDATE");
  PgJobStore store(schema.config().database, "test");
  ClaimRequest request{{{"default", 1}, {"q3", 5}, {"q4", 5}}, {"a"}, 10, "w", kLease};
  const std::vector<std::int64_t> ids = {low, high, other_queue, later, unserved, paused, held};
  std::vector<Job> jobs = store.claim_ids(request, ids);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].id, high);  // one free slot in default: the first in claim order
  EXPECT_EQ(jobs[0].attempt, 1);
  EXPECT_EQ(state_of(schema, std::to_string(high)), "running|0|");
  holder.abort();
  request.slots = {{"default", 5}, {"q4", 5}};
  jobs = store.claim_ids(request, ids);
  std::vector<std::int64_t> claimed;
  for (const Job& job : jobs) claimed.push_back(job.id);
  std::sort(claimed.begin(), claimed.end());
  EXPECT_EQ(claimed, (std::vector<std::int64_t>{low, held}));
  EXPECT_EQ(state_of(schema, std::to_string(not_asked)), "pending|0|");
  EXPECT_EQ(state_of(schema, std::to_string(later)), "pending|0|");
  EXPECT_EQ(state_of(schema, std::to_string(paused)), "pending|0|");
}

// Daemons completing parents of one child at once, each in its own batches: the child is
// counted down once per parent and unblocked once, with every parent's result.
TEST(Dependencies, ConcurrentDaemonBatchesUnblockTheirChildExactlyOnce) {
  TestSchema schema;
  Session app(schema);
  constexpr int kDaemons = 4;
  constexpr int kPerDaemon = 10;
  const std::string unblocks = record_unblocks(schema);
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE(round);
    const std::vector<std::string> parents =
        app.column("SELECT {s}.pgjobd_enqueue('a') FROM generate_series(1, " +
                   std::to_string(kDaemons * kPerDaemon) + ")");
    std::string list;
    for (const auto& p : parents) list += (list.empty() ? "" : ",") + p;
    const std::string child =
        app.query("SELECT {s}.pgjobd_enqueue('c', depends_on => ARRAY[" + list + "])");
    std::vector<std::unique_ptr<PgJobStore>> stores;
    std::vector<std::vector<Job>> claimed;
    for (int d = 0; d < kDaemons; ++d) {
      stores.push_back(std::make_unique<PgJobStore>(schema.config().database, "test"));
      claimed.push_back(stores.back()->claim(testing::claim_of(kPerDaemon)));
      ASSERT_EQ(claimed.back().size(), static_cast<std::size_t>(kPerDaemon));
    }
    std::barrier start(kDaemons);
    std::vector<std::thread> threads;
    for (int d = 0; d < kDaemons; ++d) {
      threads.emplace_back([&, d] {
        std::vector<Completion> batch;
        for (const Job& job : claimed[static_cast<std::size_t>(d)]) {
          batch.push_back({{job.id, job.attempt},
                           Outcome::kDone,
                           {},
                           {},
                           "{\"by\": " + std::to_string(d) + "}"});
        }
        start.arrive_and_wait();
        stores[static_cast<std::size_t>(d)]->complete(batch, "w", false);
      });
    }
    for (auto& thread : threads) thread.join();
    EXPECT_EQ(state_of(schema, child), "pending|0|");
    EXPECT_EQ(schema.query("SELECT count(*) FROM " + unblocks + " WHERE id = " + child), "1");
    EXPECT_EQ(schema.query("SELECT count(*) FROM jsonb_each((SELECT payload->'_parents' FROM "
                           "{jobs} WHERE id = " +
                           child +
                           ")) e WHERE e.value->>'status' = 'done' "
                           "AND e.value->'result' ? 'by'"),
              std::to_string(kDaemons * kPerDaemon));
  }
}

}  // namespace
}  // namespace pgjobd
