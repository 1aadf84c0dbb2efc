// jobs.result: what each kind of handler returned, written by the completion (the sql
// handler's in its own transaction), bounded by worker.max_result_bytes.

#include <gtest/gtest.h>

#include "pgjobd/engine.hpp"
#include "support/test_database.hpp"
#include "support/wait_until.hpp"

namespace pgjobd {
namespace {

using testing::TestSchema;
using namespace std::chrono_literals;

HandlerConfig shell_handler(const std::string& script) {
  HandlerConfig config;
  config.kind = HandlerConfig::Kind::kExec;
  config.exec_argv = {"/bin/sh", "-c", script};
  return config;
}

HandlerConfig sql_handler(const std::string& sql) {
  HandlerConfig config;
  config.kind = HandlerConfig::Kind::kSql;
  config.sql = sql;
  return config;
}

using TypedHandlers = std::vector<std::pair<std::string, HandlerConfig>>;

// Runs one job of each type of `handlers` (and of `in_process`) through an engine with
// worker.max_result_bytes `max_result_bytes`, and returns each one's result (jsonb::text,
// "" for NULL), in the order given, the in-process ones last.
std::vector<std::string> results_of(TestSchema& schema, int max_result_bytes,
                                    const TypedHandlers& handlers,
                                    const std::map<std::string, Handler>& in_process = {}) {
  Config config = schema.config();
  config.worker.max_result_bytes = max_result_bytes;
  std::vector<std::string> types;
  for (const auto& [type, handler] : handlers) {
    config.handlers[type] = handler;
    types.push_back(type);
  }
  for (const auto& [type, handler] : in_process) types.push_back(type);
  for (const std::string& type : types) {
    schema.exec("INSERT INTO {jobs} (type) VALUES ('" + type + "')");
  }
  Engine engine(config);
  for (const auto& [type, handler] : in_process) engine.register_handler(type, handler);
  engine.start();
  const auto all = static_cast<std::int64_t>(types.size());
  const bool finished =
      testing::wait_until([&] { return schema.count("status = 'done'") == all; }, 30s);
  engine.drain();
  EXPECT_TRUE(finished) << testing::table_summary(schema);
  std::vector<std::string> results;
  for (const std::string& type : types) {
    results.push_back(schema.query("SELECT result::text FROM {jobs} WHERE type = '" + type + "'"));
  }
  return results;
}

constexpr int kDefaultResultBytes = 65536;

TEST(Results, EachHandlerKindsResultEndsInJobsResult) {
  TestSchema schema;
  const auto results = results_of(
      schema, kDefaultResultBytes,
      {{"exec_json", shell_handler(R"(printf '{"from": "exec"}')")},
       {"exec_text", shell_handler("echo hello")},
       {"exec_quiet", shell_handler("true")},
       {"sql_rows",
        sql_handler("SELECT * FROM (VALUES (1, 'a', true, 1.50, NULL::int, '{\"k\": [1]}'::jsonb), "
                    "(2, 'b', false, 'NaN'::numeric, 7, 'null'::jsonb)) v(n, t, b, x, z, j) "
                    "ORDER BY n")},
       {"sql_none", sql_handler("SELECT 1 WHERE false")},
       {"sql_command", sql_handler("CREATE TEMP TABLE t_results (a int)")}},
      {{"inproc",
        [](const Job&, std::stop_token) { return JobResult::done(R"({"from": "in-process"})"); }}});
  EXPECT_EQ(results[0], R"({"from": "exec"})");
  EXPECT_EQ(results[1], R"("hello\n")");
  EXPECT_EQ(results[2], "");
  EXPECT_EQ(results[3], R"([{"b": true, "j": {"k": [1]}, "n": 1, "t": "a", "x": 1.50, "z": null}, )"
                        R"({"b": false, "j": null, "n": 2, "t": "b", "x": "NaN", "z": 7}])");
  EXPECT_EQ(results[4], "");
  EXPECT_EQ(results[5], "");
  EXPECT_EQ(results[6], R"({"from": "in-process"})");
}

// At the bound the value is kept; above it the truncated form, and the job is done.
TEST(Results, AtTheBoundKeptAboveItTruncated) {
  TestSchema schema;
  const auto results =
      results_of(schema, 8,
                 {{"at", shell_handler("printf 12345678")},
                  {"above", shell_handler("printf 123456789")},
                  {"sql_above", sql_handler("SELECT 1 AS n")}});  // [{"n":1}]: 9 bytes
  EXPECT_EQ(results[0], "12345678");
  EXPECT_EQ(results[1], R"({"head": "12345678", "bytes": 9, "truncated": true})");
  EXPECT_EQ(results[2], R"({"head": "[{\"n\":1}", "bytes": 9, "truncated": true})");
}

// 10 MB of stdout with the default 64 KiB bound: the job is done, the head kept.
TEST(Results, TenMegabytesOfStdoutAreStoredTruncated) {
  TestSchema schema;
  results_of(schema, kDefaultResultBytes,
             {{"loud", shell_handler("head -c 10485760 /dev/zero | tr '\\0' x")}});
  EXPECT_EQ(schema.query("SELECT (result->>'truncated') || ' ' || (result->>'bytes') || ' ' || "
                         "length(result->>'head') FROM {jobs}"),
            "true 10485760 65536");
}

TEST(Results, NoBoundKeepsNoResult) {
  TestSchema schema;
  EXPECT_EQ(results_of(schema, 0,
                       {{"exec", shell_handler("echo 1")}, {"sql", sql_handler("SELECT 1 AS n")}}),
            (std::vector<std::string>{"", ""}));
}

}  // namespace
}  // namespace pgjobd
