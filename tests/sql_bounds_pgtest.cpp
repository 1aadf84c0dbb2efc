// The bounds of the SQL functions (README "Bounds of the SQL functions"): every input that
// can grow is refused past its bound with 54000 and a message naming the bound and the
// value, and pgjobd_enqueue_many's server memory stays near that of its input alone.

#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <pqxx/pqxx>
#include <string>

#include "support/app_session.hpp"
#include "support/test_database.hpp"
#include "support/test_text.hpp"

namespace pgjobd {
namespace {

using testing::contains;
using testing::Session;
using testing::TestSchema;

TEST(SqlBounds, EachBoundRefusesItsInputNamingBoundAndValue) {
  TestSchema schema;
  Session app(schema);
  struct Case {
    std::string sql;
    std::string message;
  };
  const std::string big_payload =
      "jsonb_build_object('s', repeat('x', 67108864))";  // 64 MiB of text, over as jsonb
  const Case cases[] = {
      {"SELECT {s}.pgjobd_enqueue_many((SELECT jsonb_agg(jsonb_build_object('type', 't')) "
       "FROM generate_series(1, 100001)))",
       "pgjobd_enqueue_many: jobs has 100001 elements, over the bound of 100000 per call"},
      {"SELECT {s}.pgjobd_enqueue_many(jsonb_build_array(jsonb_build_object('type', 't', "
       "'payload', " +
           big_payload + ")))",
       "pgjobd_enqueue_many: jobs is 67108"},
      {"SELECT {s}.pgjobd_enqueue('t', " + big_payload + ")", "pgjobd_enqueue: payload is 67108"},
      {"SELECT {s}.pgjobd_enqueue('t', depends_on => ARRAY(SELECT generate_series(1, 100001)))",
       "pgjobd_enqueue: depends_on has 100001 elements, over the bound of 100000 per call"},
      {"SELECT {s}.pgjobd_enqueue_workflow((SELECT jsonb_agg(jsonb_build_object('ref', i::text, "
       "'type', 't')) FROM generate_series(1, 100001) i))",
       "pgjobd_enqueue_workflow: nodes has 100001 elements, over the bound of 100000 per call"},
      {"SELECT {s}.pgjobd_enqueue_workflow(jsonb_build_array(jsonb_build_object('ref', 'a', "
       "'type', 't', 'payload', " +
           big_payload + ")))",
       "pgjobd_enqueue_workflow: nodes is 67108"},
      {"SELECT {s}.pgjobd_enqueue_workflow(jsonb_build_array(jsonb_build_object('ref', 'a', "
       "'type', 't'), jsonb_build_object('ref', 'b', 'type', 't', 'depends_on', "
       "(SELECT jsonb_agg('a'::text) FROM generate_series(1, 1000001)))))",
       "pgjobd_enqueue_workflow: nodes have 1000001 depends_on entries in all, over the bound "
       "of 1000000 per call"},
      {"SELECT {s}.pgjobd_cancel_many(ARRAY(SELECT generate_series(1, 100001)::bigint))",
       "pgjobd_cancel_many: ids has 100001 elements, over the bound of 100000 per call"},
      {"SELECT {s}.pgjobd_retry_many(ARRAY(SELECT generate_series(1, 100001)::bigint))",
       "pgjobd_retry_many: ids has 100001 elements, over the bound of 100000 per call"},
      {"SELECT {s}.pgjobd_schedule_upsert('s', 't', every => '1 minute', payload => " +
           big_payload + ")",
       "pgjobd_schedule_upsert: payload is 67108"},
      {"SELECT {s}.pgjobd_schedule_upsert('s', 't', cron => repeat('* ', 500) || '*')",
       "pgjobd_schedule_upsert: cron is 1001 bytes, over the bound of 1000"},
      {"SELECT {s}.pgjobd_limits_sync((SELECT jsonb_object_agg('l' || i, "
       "jsonb_build_object('concurrency', 1)) FROM generate_series(1, 10001) i), 'test')",
       "pgjobd_limits_sync: limits has 10001 limits, over the bound of 10000 per call"},
      {"SELECT {s}.pgjobd_limits_sync(jsonb_build_object('l', jsonb_build_object('key', "
       "repeat('k', 16777216))), 'test')",
       "pgjobd_limits_sync: limits is 16777"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.sql.substr(0, 120));
    const std::string error = app.error(c.sql);
    EXPECT_EQ(error.substr(0, 5), "54000") << error.substr(0, 300);
    EXPECT_TRUE(contains(error, c.message)) << error.substr(0, 300);
    EXPECT_LT(error.size(), 1000u);  // a refused value is never quoted whole
  }
  EXPECT_EQ(schema.count(), 0);
  EXPECT_EQ(app.query("SELECT count(*) FROM {s}.pgjobd_limits"), "0");

  // At the bounds: accepted.
  EXPECT_EQ(app.query("SELECT count(*) FROM {s}.pgjobd_enqueue_many((SELECT jsonb_agg("
                      "jsonb_build_object('type', 't')) FROM generate_series(1, 100000)))"),
            "100000");
  EXPECT_EQ(app.query("SELECT count(*) FROM {s}.pgjobd_cancel_many(ARRAY(SELECT "
                      "generate_series(1, 100000)::bigint))"),
            "100000");
  // A quoted bad value is cut: the error stays short however long the value.
  const std::string name_error =
      app.error("SELECT {s}.pgjobd_schedule_upsert(repeat('n', 10000000), 't', every => '1s')");
  EXPECT_EQ(name_error.substr(0, 5), "22023") << name_error.substr(0, 300);
  EXPECT_LT(name_error.size(), 1000u);
}

// VmHWM (the peak resident set) of a backend, read from /proc on this machine; 0 when the
// server runs elsewhere.
long backend_peak_kib(Session& session) {
  std::ifstream status("/proc/" + session.query("SELECT pg_backend_pid()") + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with("VmHWM:")) return std::stol(line.substr(6));
  }
  return 0;
}

// The server's peak memory, above a fresh backend's, for `sql` with `input` as $1.
long peak_growth_kib(TestSchema& schema, const std::string& sql, const std::string& input) {
  Session session(schema);
  const long before = backend_peak_kib(session);
  {
    pqxx::nontransaction txn(session.connection());
    std::string expanded = sql;
    if (const auto at = expanded.find("{s}"); at != std::string::npos) {
      expanded.replace(at, 3, quote_identifier(schema.name()));
    }
    txn.exec_params(expanded, input);
  }
  return backend_peak_kib(session) - before;
}

TEST(SqlBounds, EnqueueManyServerMemoryStaysNearItsInput) {
  TestSchema schema;
  {
    Session probe(schema);
    if (backend_peak_kib(probe) == 0) GTEST_SKIP() << "the server's /proc is not readable here";
  }
  // One 40 MB element: the form that copied each element into the function's variables
  // and a CTE took 3.8 times the memory of parsing the input (bench/README.md).
  const std::string input =
      "[{\"type\": \"t\", \"payload\": {\"s\": \"" + std::string(40'000'000, 'x') + "\"}}]";
  const long parse = peak_growth_kib(schema, "SELECT pg_column_size($1::jsonb)", input);
  const long many =
      peak_growth_kib(schema, "SELECT count(*) FROM {s}.pgjobd_enqueue_many($1::jsonb)", input);
  std::cout << "server peak growth: parsing the input " << parse / 1024 << " MiB, "
            << "pgjobd_enqueue_many " << many / 1024 << " MiB\n";
  EXPECT_EQ(schema.count(), 1);
  EXPECT_GT(parse, 40'000);
  EXPECT_LT(many, parse * 5 / 2);
}

}  // namespace
}  // namespace pgjobd
