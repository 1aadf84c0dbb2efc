// Hostile rows through the real binary: an application with INSERT/UPDATE rights on jobs
// writes values meant to break the daemon (README "What an application can and cannot
// break"). Each test puts 1,000 normal jobs around one kind of hostile row and checks that
// they all finish, that the hostile row is refused at INSERT with the constraint's name or
// ends with a clear reason, that the daemon is still alive and claiming, and that its
// memory (and, where it has one, its /metrics) stays bounded.

#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <iostream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "support/daemon_process.hpp"
#include "support/hostile_load.hpp"
#include "support/test_database.hpp"

namespace pgjobd::testing {
namespace {

struct RefusedValue {
  std::string column;
  std::string value;  // an SQL expression
  std::string constraint;
};

// Each value no daemon could handle, and the constraint that must refuse it by name.
const std::vector<RefusedValue>& refused_values() {
  static const std::vector<RefusedValue> values = {
      {"run_at", "'-infinity'", "jobs_run_at_finite"},
      {"run_at", "'infinity'", "jobs_run_at_finite"},
      {"attempts", "2147483647", "jobs_attempts_range"},
      {"max_attempts", "2147483647", "jobs_max_attempts_range"},
      {"type", "repeat('t', 201)", "jobs_type_length"},
      {"queue", "''", "jobs_queue_length"},
      {"errors", "'{}'", "jobs_errors_array"},
      {"unique_key", "repeat('k', 2000)", "jobs_unique_key_length"},
  };
  return values;
}

// The error of `sql`, or "" when it succeeded.
std::string error_of(TestSchema& schema, const std::string& sql) {
  try {
    schema.exec(sql);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(HostileInputRowsE2E, ValuesNoDaemonCouldHandleAreRefusedByNamedConstraints) {
  TestSchema schema;
  DaemonYaml yaml(schema.name());
  add_normal_handler(yaml).set("worker", "{concurrency: 8}");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  // A row the attacker UPDATEs instead, parked in a queue no daemon serves.
  const std::string target = schema.query("INSERT INTO {jobs} (type, queue) VALUES (" +
                                          sql_quote(kNormalType) + ", 'parked') RETURNING id");

  insert_normal_half(schema);
  for (const RefusedValue& refused : refused_values()) {
    SCOPED_TRACE(refused.column + " = " + refused.value);
    const std::string quoted_name = "\"" + refused.constraint + "\"";
    // `type` itself is the hostile column in one case: the others keep a served type.
    const std::string insert = refused.column == "type"
                                   ? "INSERT INTO {jobs} (type) VALUES (" + refused.value + ")"
                                   : "INSERT INTO {jobs} (type, " + refused.column + ") VALUES (" +
                                         sql_quote(kNormalType) + ", " + refused.value + ")";
    const std::string inserted = error_of(schema, insert);
    EXPECT_NE(inserted.find("violates check constraint " + quoted_name), std::string::npos)
        << "INSERT: " << (inserted.empty() ? "accepted" : inserted);
    const std::string updated = error_of(schema, "UPDATE {jobs} SET " + refused.column + " = " +
                                                     refused.value + " WHERE id = " + target);
    EXPECT_NE(updated.find("violates check constraint " + quoted_name), std::string::npos)
        << "UPDATE: " << (updated.empty() ? "accepted" : updated);
  }
  insert_normal_half(schema);

  EXPECT_TRUE(normal_jobs_done(schema));
  // Nothing hostile got in: the normal jobs and the untouched parked row are all there is.
  EXPECT_EQ(schema.count(), 2 * kNormalHalf + 1) << summary_by_type(schema);
  EXPECT_EQ(schema.count("id = " + target +
                         " AND status = 'pending' AND queue = 'parked' AND attempts = 0 AND "
                         "max_attempts = 5 AND errors = '[]' AND unique_key IS NULL"),
            1)
      << schema.query("SELECT row_to_json(j)::text FROM {jobs} j WHERE id = " + target);
  EXPECT_TRUE(still_claims(schema, daemon));
  expect_rss_bounded(daemon.pid(), "after 1,000 jobs");
  stop_daemon(daemon);
}

TEST(HostileInputRowsE2E, RowsWrittenBeforeTheConstraintsAreRunOrRescued) {
  TestSchema schema;
  // The table as it was before schema v3 bounded these columns, so the rows below can be
  // written the way an older installation could hold them.
  schema.exec(
      "ALTER TABLE {jobs} DROP CONSTRAINT jobs_run_at_finite, "
      "DROP CONSTRAINT jobs_attempts_range, DROP CONSTRAINT jobs_max_attempts_range, "
      "DROP CONSTRAINT jobs_errors_array, "
      "ADD CONSTRAINT jobs_attempts_check CHECK (attempts >= 0), "
      "ADD CONSTRAINT jobs_max_attempts_check CHECK (max_attempts >= 1)");
  DaemonYaml yaml(schema.name());
  // A long max_delay keeps the rescued row waiting (failed) instead of being run again at
  // once, so its rescue can be checked; the normal jobs never retry.
  add_normal_handler(yaml)
      .set("worker", "{concurrency: 8}")
      .set("retry", "{base: 10ms, max_delay: 1h, jitter: 0}")
      .set("metrics", "{listen: \"127.0.0.1:0\"}")
      .handler("hostile_ok", "{builtin: noop}")
      .shell_handler("fail", "echo boom >&2; exit 1");

  insert_normal_half(schema);
  // Claimed first (earliest run_at): one bad row in a claim batch once made every claim
  // fail, on every daemon.
  const std::string minus_infinity = schema.query(
      "INSERT INTO {jobs} (type, run_at) VALUES ('hostile_ok', '-infinity') RETURNING id");
  // The same in a queue no daemon serves: never claimed, so the queue statistics, which
  // also cover every queue of the table, meet it on every pass.
  const std::string parked = schema.query(
      "INSERT INTO {jobs} (type, queue, run_at) VALUES ('hostile_ok', 'parked', '-infinity') "
      "RETURNING id");
  const std::string max_int = schema.query(
      "INSERT INTO {jobs} (type, attempts, max_attempts) VALUES ('hostile_ok', 2147483647, "
      "2147483647) RETURNING id");
  const std::string not_array = schema.query(
      "INSERT INTO {jobs} (type, errors, max_attempts) VALUES ('fail', '\"not an array\"', 1) "
      "RETURNING id");
  // Its owner is gone; 2^(2000-1) in the backoff overflows a float8.
  const std::string expired = schema.query(
      "INSERT INTO {jobs} (type, status, locked_by, locked_until, attempts, max_attempts, "
      "started_at) VALUES ('hostile_ok', 'running', 'gone', now() - interval '1 minute', 2000, "
      "5000, now() - interval '2 minutes') RETURNING id");

  DaemonProcess daemon(yaml.text());
  const int port = daemon.metrics_port();
  ASSERT_GT(port, 0) << daemon.log();
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  insert_normal_half(schema);
  // The first statistics pass runs at start: it has ended once it published a depth (the
  // rescued row is in the served queue) or counted its failure.
  std::string metrics;
  EXPECT_TRUE(wait_until(
      [&] {
        metrics = http_get(port, "/metrics").body;
        return metric_value(metrics, "pgjobd_queue_depth", {{"queue", "default"}}).has_value() ||
               metric_value(metrics, "pgjobd_db_errors_total", {{"operation", "stats"}})
                   .has_value();
      },
      15s))
      << metrics.substr(0, 3000);
  EXPECT_EQ(metric_value(metrics, "pgjobd_db_errors_total", {{"operation", "stats"}}).value_or(0),
            0)
      << daemon.log();

  EXPECT_TRUE(normal_jobs_done(schema)) << daemon.log();
  EXPECT_TRUE(wait_until(
      [&] {
        return schema.count("id IN (" + minus_infinity + ", " + max_int +
                            ") AND status = 'done'") == 2 &&
               schema.count("id = " + not_array + " AND status = 'dead'") == 1 &&
               schema.count("id = " + expired + " AND status = 'failed'") == 1;
      },
      20s))
      << schema.query(
             "SELECT string_agg(id || ' ' || status || ' ' || coalesce(last_error, '-'), ' | ') "
             "FROM {jobs} WHERE type <> 'ok'");
  // attempts stops counting at the bound instead of overflowing the int.
  EXPECT_EQ(schema.query("SELECT attempts FROM {jobs} WHERE id = " + max_int), "1000000");
  EXPECT_EQ(schema.count("id = " + parked + " AND status = 'pending' AND attempts = 0"), 1);
  // The failure is recorded, and errors is an array again.
  EXPECT_EQ(schema.query("SELECT last_error FROM {jobs} WHERE id = " + not_array), "exit 1: boom");
  EXPECT_EQ(schema.query("SELECT CASE jsonb_typeof(errors) WHEN 'array' THEN 'array ' || "
                         "jsonb_array_length(errors) || ' ' || (errors->0->>'error') ELSE "
                         "errors::text END FROM {jobs} WHERE id = " +
                         not_array),
            "array 1 exit 1: boom");
  // Rescued with the backoff capped at max_delay, not an overflow.
  EXPECT_EQ(schema.query("SELECT last_error FROM {jobs} WHERE id = " + expired),
            "rescued: lease expired while gone ran attempt 2000");
  EXPECT_EQ(schema.query("SELECT attempts::text || ' ' || (locked_by IS NULL) || ' ' || "
                         "(run_at BETWEEN now() + interval '55 minutes' AND now() + interval "
                         "'1 hour') FROM {jobs} WHERE id = " +
                         expired),
            "2000 true true")
      << schema.query("SELECT run_at - now() FROM {jobs} WHERE id = " + expired);

  EXPECT_TRUE(still_claims(schema, daemon));
  const std::string log = daemon.log();
  EXPECT_EQ(count_occurrences(log, "claim failed"), 0) << log;
  EXPECT_EQ(count_occurrences(log, "rescue failed"), 0) << log;
  EXPECT_EQ(count_occurrences(log, "stats failed"), 0) << log;
  // Nothing else went wrong either: the only warnings are the rescue and the failed job.
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(" info  ") == 23 || line.find(" debug ") == 23) continue;
    EXPECT_TRUE(line.find("rescued 1 job(s) with an expired lease") != std::string::npos ||
                line.find("job " + not_array + " dead after attempt 1 of 1") != std::string::npos)
        << "unexpected: " << line;
  }
  expect_rss_bounded(daemon.pid(), "after 1,000 jobs");
  stop_daemon(daemon);
}

// No constraint bounds locked_by (a worker id), and the rescue quotes it in the job's error:
// a 1 MB one must still leave an error of at most 8 KiB (README: each error text).
TEST(HostileInputRowsE2E, RunningRowWithAHugeLockedByIsRescuedWithABoundedError) {
  TestSchema schema;
  DaemonYaml yaml(schema.name());
  add_normal_handler(yaml).set("worker", "{concurrency: 8}");
  insert_normal_half(schema);
  const std::string huge = schema.query(
      "INSERT INTO {jobs} (type, status, locked_by, locked_until, attempts, started_at) VALUES "
      "('ok', 'running', repeat('g', 1024 * 1024), now() - interval '1 minute', 1, "
      "now() - interval '2 minutes') RETURNING id");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  insert_normal_half(schema);

  EXPECT_TRUE(normal_jobs_done(schema));
  // Rescued, then run again (done keeps the rescue's last_error).
  EXPECT_TRUE(wait_until(
      [&] { return schema.count("id = " + huge + " AND status = 'done' AND attempts = 2") == 1; },
      20s))
      << summary_by_type(schema);
  const std::string error_bytes =
      stored_error_bytes(schema, huge, "rescue error for a 1 MB locked_by");
  EXPECT_EQ(schema.count("id = " + huge +
                         " AND last_error LIKE 'rescued: lease expired while ggg%' AND "
                         "octet_length(last_error) <= 8256 AND errors->0->>'error' = last_error"),
            1)
      << error_bytes
      << " bytes: " << schema.query("SELECT left(last_error, 100) FROM {jobs} WHERE id = " + huge);
  EXPECT_EQ(count_occurrences(daemon.log(), "rescue failed"), 0) << daemon.log();
  EXPECT_TRUE(still_claims(schema, daemon));
  expect_rss_bounded(daemon.pid(), "after 1,000 jobs");
  stop_daemon(daemon);
}

TEST(HostileInputRowsE2E, OversizedPayloadsEndDeadWithoutRunning) {
  TestSchema schema;
  TempDir dir;
  DaemonYaml yaml(schema.name());
  // The handler would leave a marker if it ever ran (default max_payload_bytes: 4 MiB).
  add_normal_handler(yaml)
      .set("worker", "{concurrency: 8}")
      .shell_handler("big",
                     "cat > /dev/null; touch " + shell_quote(dir.path()) + "/ran.$PGJOBD_JOB_ID");
  // 6 MiB of JSON text, built by the server.
  const std::string big_row = "('big', jsonb_build_object('blob', repeat('x', 6 * 1024 * 1024)))";

  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  insert_normal_half(schema);
  const std::string big =
      schema.query("INSERT INTO {jobs} (type, payload) VALUES " + big_row + " RETURNING id");
  insert_normal_half(schema);
  EXPECT_TRUE(normal_jobs_done(schema));
  ASSERT_TRUE(
      wait_until([&] { return schema.count("id = " + big + " AND status = 'dead'") == 1; }, 20s))
      << summary_by_type(schema);
  const std::string bytes =
      schema.query("SELECT octet_length(payload::text) FROM {jobs} WHERE id = " + big);
  EXPECT_GT(std::stol(bytes), 6L * 1024 * 1024);
  EXPECT_EQ(schema.query("SELECT last_error FROM {jobs} WHERE id = " + big),
            "payload is " + bytes + " bytes of JSON text, over worker.max_payload_bytes: not run");
  EXPECT_EQ(schema.query("SELECT attempts FROM {jobs} WHERE id = " + big), "1");
  expect_rss_bounded(daemon.pid(), "after one 6 MiB payload");

  // Twenty at once, more than the 8 slots: none is read into memory, none runs.
  std::string rows;
  for (int i = 0; i < 20; ++i) rows += (i > 0 ? ", " : "") + big_row;
  schema.exec("INSERT INTO {jobs} (type, payload) VALUES " + rows);
  EXPECT_TRUE(
      wait_until([&] { return schema.count("type = 'big' AND status = 'dead'") == 21; }, 30s))
      << summary_by_type(schema);
  EXPECT_EQ(schema.count("type = 'big' AND last_error = 'payload is ' || "
                         "octet_length(payload::text) || ' bytes of JSON text, over "
                         "worker.max_payload_bytes: not run'"),
            21);
  std::vector<std::string> markers;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    markers.push_back(entry.path().filename().string());
  }
  EXPECT_TRUE(markers.empty()) << "the handler of an oversized job ran: " << markers.front();
  EXPECT_TRUE(still_claims(schema, daemon));
  expect_rss_bounded(daemon.pid(), "after 21 payloads of 6 MiB");
  stop_daemon(daemon);
}

TEST(HostileInputRowsE2E, ThousandsOfUnservedQueueNamesAddNoMetricSeries) {
  constexpr int kQueues = 5000;
  TestSchema schema;
  DaemonYaml yaml(schema.name());
  add_normal_handler(yaml)
      .set("worker", "{concurrency: 8}")
      .set("metrics", "{listen: \"127.0.0.1:0\"}");
  insert_normal_half(schema);
  // One job in each of 5,000 queues no daemon serves, with a type it has a handler for.
  schema.exec("INSERT INTO {jobs} (type, queue) SELECT " + sql_quote(kNormalType) +
              ", 'unserved-' || g || '-' || md5(random()::text) FROM generate_series(1, " +
              std::to_string(kQueues) + ") g");
  insert_normal_half(schema);
  // Pending in the served queue but not due for a day: every statistics pass publishes a
  // depth for it, however fast the normal jobs are done.
  schema.exec("INSERT INTO {jobs} (type, run_at) VALUES (" + sql_quote(kNormalType) +
              ", now() + interval '1 day')");

  // The statistics refresh runs at start (then every 30 s): once the served queue's depth
  // is published, that pass has seen every unserved queue.
  DaemonProcess daemon(yaml.text());
  const int port = daemon.metrics_port();
  ASSERT_GT(port, 0) << daemon.log();
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  EXPECT_TRUE(normal_jobs_done(schema));
  std::string metrics;
  EXPECT_TRUE(wait_until(
      [&] {
        metrics = http_get(port, "/metrics").body;
        return metric_value(metrics, "pgjobd_queue_depth",
                            {{"queue", "default"}, {"status", "pending"}})
            .has_value();
      },
      15s))
      << metrics.substr(0, 3000);
  EXPECT_EQ(count_occurrences(metrics, "unserved-"), 0)
      << "series for unserved queues, e.g. "
      << metrics.substr(metrics.find("unserved-") == std::string::npos
                            ? 0
                            : metrics.rfind('\n', metrics.find("unserved-")) + 1,
                        200);
  // Series per served queue and handled type: a few hundred lines, not one per queue name.
  std::cout << "[ METRICS  ] /metrics has " << line_count(metrics) << " lines" << std::endl;
  EXPECT_LT(line_count(metrics), 400);
  EXPECT_EQ(schema.count("queue LIKE 'unserved-%' AND status = 'pending' AND attempts = 0"),
            kQueues);
  EXPECT_TRUE(still_claims(schema, daemon));
  expect_rss_bounded(daemon.pid(), "after 1,000 jobs and a stats pass over 5,000 queues");
  stop_daemon(daemon);
}

TEST(HostileInputRowsE2E, ControlCharactersInTypeAndQueueCannotForgeLogLines) {
  TestSchema schema;
  // Names that try to end the log record and start a forged one, move the cursor, ring the
  // bell and clear the terminal.
  const std::string forged = "2026-11-29 08:00:00.000 error  forged record";
  const std::string type = "evil\ntype\r\n" + forged + "\x1b[2J\x07\t\x01\x7f";
  const std::string queue = "q\n" + forged + "\r\x1b[31m";
  DaemonYaml yaml(schema.name());
  // debug: "job N done" is logged for every job, with its type and queue.
  add_normal_handler(yaml)
      .set("worker", "{concurrency: 8, queues: {default: {}, " + yaml_quote(queue) + ": {}}}")
      .set("log", "{level: debug, format: text}")
      .handler(yaml_quote(type), "{builtin: noop}")
      .shell_handler(yaml_quote(type + " exec"),
                     "printf 'out\\n" + forged + "\\r\\033[2J' >&2; exit 1");

  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  insert_normal_half(schema);
  const std::string runs =
      schema.query("INSERT INTO {jobs} (type, queue) VALUES (" + sql_quote(type) + ", " +
                   sql_quote(queue) + ") RETURNING id");
  const std::string fails =
      schema.query("INSERT INTO {jobs} (type, queue, max_attempts) VALUES (" +
                   sql_quote(type + " exec") + ", " + sql_quote(queue) + ", 1) RETURNING id");
  insert_normal_half(schema);

  EXPECT_TRUE(normal_jobs_done(schema));
  EXPECT_TRUE(wait_until(
      [&] {
        return schema.count("id = " + runs + " AND status = 'done'") == 1 &&
               schema.count("id = " + fails + " AND status = 'dead'") == 1;
      },
      20s))
      << summary_by_type(schema);
  EXPECT_EQ(schema.query("SELECT last_error FROM {jobs} WHERE id = " + fails),
            "exit 1: out\n" + forged + "\r\x1b[2J");
  EXPECT_TRUE(still_claims(schema, daemon));
  expect_rss_bounded(daemon.pid(), "after 1,000 jobs");
  stop_daemon(daemon);

  // Every line is one whole record: timestamp, level, message. The names are in there,
  // escaped, not as lines of their own.
  const std::regex record(
      R"(^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3} (trace|debug|info|warn|error|critical) +\S.*$)");
  const std::string log = daemon.log();
  std::istringstream lines(log);
  int checked = 0;
  for (std::string line; std::getline(lines, line); ++checked) {
    EXPECT_TRUE(std::regex_match(line, record)) << "not a whole log record: " << line;
    EXPECT_EQ(line.find_first_of("\r\x1b\x07\x01\x7f"), std::string::npos)
        << "raw control character in: " << line;
  }
  EXPECT_GT(checked, 2 * kNormalHalf) << "debug logs a line per job";
  EXPECT_EQ(count_occurrences(log, "\n" + forged), 0);
  EXPECT_NE(log.find("job " + runs + " done"), std::string::npos) << log.substr(0, 3000);
  EXPECT_NE(log.find("job " + fails + " dead"), std::string::npos) << log.substr(0, 3000);
  EXPECT_NE(log.find("evil\\ntype\\r\\n2026-11-29"), std::string::npos)
      << "the type, escaped, in the job's record";
}

}  // namespace
}  // namespace pgjobd::testing
