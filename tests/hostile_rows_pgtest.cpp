// Rows an application can write must never stop the queue (schema v3 and the bounded
// statements): values no daemon could handle are refused by named constraints; rows that
// predate them are repaired or made dead by the migration; and even without the
// constraints, claim, completion and rescue keep working for every other row.

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "db/migrations.hpp"
#include "db/migrator.hpp"
#include "db/pg_job_store.hpp"
#include "support/build_paths.hpp"
#include "support/claims.hpp"
#include "support/test_database.hpp"

namespace pgjobd {
namespace {

using testing::TestSchema;

using testing::kLease;

// The error an INSERT or UPDATE fails with, "" when it succeeds.
std::string error_of(TestSchema& schema, const std::string& sql) {
  try {
    schema.exec(sql);
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

// Puts back the constraints of schema v2, which allowed the values v3 refuses: the state of
// a table whose rows were written before the upgrade.
void downgrade_constraints(TestSchema& schema) {
  schema.exec(
      "ALTER TABLE {jobs} DROP CONSTRAINT jobs_queue_length, DROP CONSTRAINT jobs_type_length, "
      "DROP CONSTRAINT jobs_run_at_finite, DROP CONSTRAINT jobs_attempts_range, "
      "DROP CONSTRAINT jobs_max_attempts_range, DROP CONSTRAINT jobs_unique_key_length, "
      "DROP CONSTRAINT jobs_errors_array, "
      "ADD CONSTRAINT jobs_queue_check CHECK (queue <> ''), "
      "ADD CONSTRAINT jobs_type_check CHECK (type <> ''), "
      "ADD CONSTRAINT jobs_max_attempts_check CHECK (max_attempts >= 1), "
      "ADD CONSTRAINT jobs_attempts_check CHECK (attempts >= 0)");
}

TEST(HostileRows, ValuesNoDaemonCouldHandleAreRefusedByNamedConstraints) {
  TestSchema schema;
  const std::pair<std::string, std::string> cases[] = {
      {"(type, run_at) VALUES ('a', '-infinity')", "jobs_run_at_finite"},
      {"(type, run_at) VALUES ('a', 'infinity')", "jobs_run_at_finite"},
      {"(type, attempts) VALUES ('a', 2147483647)", "jobs_attempts_range"},
      {"(type, attempts) VALUES ('a', -1)", "jobs_attempts_range"},
      {"(type, max_attempts) VALUES ('a', 2147483647)", "jobs_max_attempts_range"},
      {"(type, max_attempts) VALUES ('a', 0)", "jobs_max_attempts_range"},
      {"(type) VALUES ('')", "jobs_type_length"},
      {"(type) VALUES (repeat('t', 201))", "jobs_type_length"},
      {"(type, queue) VALUES ('a', '')", "jobs_queue_length"},
      {"(type, queue) VALUES ('a', repeat('q', 201))", "jobs_queue_length"},
      {"(type, unique_key) VALUES ('a', repeat('k', 1025))", "jobs_unique_key_length"},
      {"(type, errors) VALUES ('a', '{}')", "jobs_errors_array"},
  };
  for (const auto& [values, constraint] : cases) {
    const std::string error = error_of(schema, "INSERT INTO {jobs} " + values);
    EXPECT_NE(error.find(constraint), std::string::npos) << values << " → " << error;
  }
  // An UPDATE is held to the same bounds.
  schema.exec("INSERT INTO {jobs} (type) VALUES ('a')");
  EXPECT_NE(error_of(schema, "UPDATE {jobs} SET run_at = '-infinity'").find("jobs_run_at_finite"),
            std::string::npos);
  // The largest allowed values are accepted, and still claimable.
  schema.exec(
      "INSERT INTO {jobs} (type, queue, attempts, max_attempts, unique_key) VALUES "
      "(repeat('t', 200), repeat('q', 200), 1000000, 1000000, repeat('k', 1024))");
  EXPECT_EQ(schema.count(), 2);
}

TEST(HostileRows, ClaimRescueAndCompletionSurviveRowsFromBeforeTheConstraints) {
  TestSchema schema;
  downgrade_constraints(schema);
  schema.exec("INSERT INTO {jobs} (type, run_at) VALUES ('a', '-infinity')");
  schema.exec(
      "INSERT INTO {jobs} (type, attempts, max_attempts) VALUES ('a', 2147483647, 2147483647)");
  schema.insert_jobs("a", 100);
  PgJobStore store(schema.config().database, "test");
  ClaimRequest request{{{"default", 200}}, {"a"}, 200, "w1", kLease};
  const auto jobs = store.claim(request);
  ASSERT_EQ(jobs.size(), 102u);
  for (const Job& job : jobs) {
    EXPECT_GE(job.queue_wait_seconds, 0) << job.id;
    EXPECT_LE(job.attempt, 1000000) << job.id;
  }

  // A failed attempt of a job with more than 19 earlier errors keeps the last 20; a row's
  // errors that is not an array is read as empty instead of failing the batch.
  schema.exec(
      "UPDATE {jobs} SET errors = (SELECT jsonb_agg(n) FROM generate_series(1, 30) n) "
      "WHERE id = " +
      std::to_string(jobs[0].id));
  schema.exec("UPDATE {jobs} SET errors = '\"oops\"' WHERE id = " + std::to_string(jobs[1].id));
  std::vector<Completion> batch;
  batch.reserve(jobs.size());
  for (const Job& job : jobs) {
    batch.push_back({{job.id, job.attempt}, Outcome::kRetry, "boom", Millis(1000)});
  }
  EXPECT_EQ(store.complete(batch, "w1", false).written, 102);
  EXPECT_EQ(schema.query("SELECT jsonb_array_length(errors) FROM {jobs} WHERE id = " +
                         std::to_string(jobs[0].id)),
            "20");
  EXPECT_EQ(schema.query("SELECT errors->19->>'error' FROM {jobs} WHERE id = " +
                         std::to_string(jobs[0].id)),
            "boom");
  EXPECT_EQ(schema.query("SELECT errors->0 FROM {jobs} WHERE id = " + std::to_string(jobs[0].id)),
            "12");  // 1..11 dropped: 12..30, then "boom"
  EXPECT_EQ(schema.query("SELECT jsonb_array_length(errors) FROM {jobs} WHERE id = " +
                         std::to_string(jobs[1].id)),
            "1");

  // A rescue of a job with 2,000 attempts (2^1999 overflows a float8) still rescues it and
  // the others.
  schema.exec(
      "UPDATE {jobs} SET status = 'running', locked_by = 'gone', "
      "locked_until = now() - interval '1 minute', attempts = 2000, max_attempts = 5000 "
      "WHERE id IN (SELECT id FROM {jobs} ORDER BY id LIMIT 3)");
  const auto report = store.lead_and_rescue("w1", Millis(15000), schema.config().retry, 100);
  EXPECT_TRUE(report.leader);
  EXPECT_EQ(report.failed, 3);
  EXPECT_EQ(schema.count("status = 'failed' AND run_at > now()"), 102);
}

// A pending row with run_at '-infinity' once made every statistics pass fail ("cannot
// subtract infinite timestamps"), so no daemon published any queue's depth. Its age counts
// as 100 years; one at 'infinity' is simply not due.
TEST(HostileRows, QueueStatisticsSurviveRowsFromBeforeTheConstraints) {
  TestSchema schema;
  downgrade_constraints(schema);
  schema.exec("INSERT INTO {jobs} (type, run_at) VALUES ('a', '-infinity'), ('a', 'infinity')");
  schema.exec("INSERT INTO {jobs} (type, queue, run_at) VALUES ('a', 'later', 'infinity')");
  PgJobStore store(schema.config().database, "test");
  std::map<std::string, QueueStatsRow> rows;
  for (const auto& row : store.queue_stats({"default", "later"}))
    rows[row.queue + "/" + row.status] = row;
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows["default/pending"].count, 2);
  EXPECT_GT(rows["default/pending"].oldest_due_age_seconds, 50.0 * 365 * 24 * 3600);
  EXPECT_EQ(rows["later/pending"].count, 1);
  EXPECT_EQ(rows["later/pending"].oldest_due_age_seconds, 0);
}

// No constraint bounds locked_by, and the rescue quotes it in the job's error: a 1 MB one
// (a row an application wrote) still leaves an error of at most 8 KiB; one over 256 MB
// once made every rescue fail (too long for a jsonb string in errors).
TEST(HostileRows, RescueQuotesABoundedPartOfAHugeLockedBy) {
  TestSchema schema;
  schema.exec(
      "INSERT INTO {jobs} (type, status, locked_by, locked_until, attempts) VALUES "
      "('a', 'running', repeat('g', 1024 * 1024), '-infinity', 1), "
      "('a', 'running', 'gone', now() - interval '1 minute', 1)");
  PgJobStore store(schema.config().database, "test");
  const auto report = store.lead_and_rescue("w1", Millis(15000), schema.config().retry, 100);
  EXPECT_TRUE(report.leader);
  EXPECT_EQ(report.failed, 2);
  EXPECT_EQ(schema.count("last_error = 'rescued: lease expired while ' || repeat('g', 200) || "
                         "' ran attempt 1' AND errors->0->>'error' = last_error"),
            1);
  EXPECT_EQ(schema.count("last_error = 'rescued: lease expired while gone ran attempt 1'"), 1);
}

TEST(HostileRows, OversizedPayloadIsNotReadAndComesBackWithItsSize) {
  TestSchema schema;
  schema.exec(
      "INSERT INTO {jobs} (type, payload) VALUES ('a', jsonb_build_object('x', repeat('y', "
      "5000)))");
  schema.exec("INSERT INTO {jobs} (type, payload) VALUES ('a', '{\"small\": true}')");
  PgJobStore store(schema.config().database, "test");
  ClaimRequest request{{{"default", 10}}, {"a"}, 10, "w1", kLease};
  request.max_payload_bytes = 1024;
  auto jobs = store.claim(request);
  ASSERT_EQ(jobs.size(), 2u);
  std::sort(jobs.begin(), jobs.end(), [](const Job& a, const Job& b) { return a.id < b.id; });
  EXPECT_EQ(jobs[0].payload, "");
  EXPECT_EQ(jobs[0].oversized_payload_bytes, 5000 + std::string(R"({"x": ""})").size());
  EXPECT_EQ(jobs[1].payload, R"({"small": true})");
  EXPECT_EQ(jobs[1].oversized_payload_bytes, 0);
}

TEST(HostileRows, MigrationRepairsOrBuriesRowsThatBreakTheNewConstraints) {
  TestSchema schema;
  downgrade_constraints(schema);
  schema.exec(
      "INSERT INTO {jobs} (id, type, run_at, attempts, max_attempts, errors, status) "
      "OVERRIDING SYSTEM VALUE VALUES "
      "(1, 'a', '-infinity', 0, 5, '[]', 'pending'),"
      "(2, 'a', now(), 2147483647, 5, '[]', 'pending'),"
      "(3, 'a', now(), 0, 2147483647, '[]', 'pending'),"  // "retry forever": kept, lowered
      "(4, 'a', now(), 0, 5, '{\"not\": \"an array\"}', 'failed'),"
      "(5, repeat('t', 300), now(), 0, 5, '[]', 'pending'),"
      "(6, 'a', 'infinity', 1, 5, '[]', 'done'),"  // finished: repaired, stays done
      "(7, 'a', now(), 0, 5, '[]', 'pending')");   // valid: untouched
  const std::string before = schema.query("SELECT updated_at::text FROM {jobs} WHERE id = 7");
  // Schema v3 again, as `pgjobd migrate` applies it.
  const Migration& v3 = migrations()[2];
  ASSERT_EQ(v3.version, 3);
  schema.exec("SET search_path TO \"" + schema.name() + "\"; " + v3.up_sql + "; RESET search_path");
  const auto row = [&](int id) {
    return schema.query(
        "SELECT status || '|' || attempts || '|' || max_attempts || '|' || "
        "coalesce(last_error, '') FROM {jobs} WHERE id = " +
        std::to_string(id));
  };
  EXPECT_EQ(row(1), "dead|0|5|pgjobd schema v3 refused this job: run_at is -infinity");
  EXPECT_EQ(row(2),
            "dead|1000000|5|pgjobd schema v3 refused this job: attempts is 2147483647, outside "
            "0..1000000");
  EXPECT_EQ(row(3), "pending|0|1000000|");
  EXPECT_EQ(row(4), "failed|0|5|");
  EXPECT_EQ(schema.query("SELECT errors FROM {jobs} WHERE id = 4"), R"([{"not": "an array"}])");
  EXPECT_EQ(row(5),
            "dead|0|5|pgjobd schema v3 refused this job: type is longer than 200 characters");
  EXPECT_EQ(row(6), "done|1|5|");
  EXPECT_EQ(schema.query("SELECT isfinite(run_at) FROM {jobs} WHERE id = 6"), "t");
  EXPECT_EQ(row(7), "pending|0|5|");
  EXPECT_EQ(schema.query("SELECT updated_at::text FROM {jobs} WHERE id = 7"), before);
}

TEST(HostileRows, FunctionsPlantedInTheSchemaNeverStandInForBuiltIns) {
  TestSchema schema;
  // Someone with CREATE on the schema (or on a schema an application searches first)
  // plants look-alikes of what pgjobd's SQL calls.
  schema.exec("CREATE FUNCTION \"" + schema.name() +
              "\".pg_notify(text, text) RETURNS void LANGUAGE plpgsql AS "
              "$$BEGIN RAISE EXCEPTION 'planted pg_notify ran'; END$$");
  schema.exec("CREATE FUNCTION \"" + schema.name() +
              "\".now() RETURNS timestamptz LANGUAGE sql AS $$SELECT '2000-01-01'::timestamptz$$");
  // The trigger runs in the inserting session, here one that searches the schema before
  // pg_catalog.
  schema.exec("SET search_path TO \"" + schema.name() +
              "\", pg_catalog; INSERT INTO jobs (type) VALUES ('a'); RESET search_path");
  EXPECT_EQ(schema.query("SELECT run_at > '2001-01-01' FROM {jobs}"), "t");
  // A schema migrated from scratch with the look-alikes in place binds the built-ins too.
  // Torn down first: the functions, then every migration's down, newest first (found by
  // number, not by name: the later migrations' numbers change when branches merge).
  const std::string quoted = "\"" + schema.name() + "\"";
  const auto read = [](const std::filesystem::path& file) {
    std::ifstream in(file);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  std::vector<std::filesystem::path> downs;
  for (const auto& entry : std::filesystem::directory_iterator(testing::source_path("sql"))) {
    const std::string file = entry.path().filename().string();
    if (file.ends_with(".down.sql") && std::isdigit(static_cast<unsigned char>(file[0])) != 0) {
      downs.push_back(entry.path());
    }
  }
  ASSERT_GE(downs.size(), 14U);
  std::sort(downs.rbegin(), downs.rend());
  std::string down = read(testing::source_path("sql/functions.down.sql"));
  for (const std::filesystem::path& file : downs) down += read(file);
  schema.exec("SET search_path TO " + quoted + "; " + down + "; RESET search_path");
  // Nothing of pgjobd is left but the record of its migrations; the look-alikes stay.
  EXPECT_EQ(schema.query("SELECT string_agg(relname, ',' ORDER BY relname) FROM pg_class WHERE "
                         "relnamespace = '" +
                         quoted + "'::regnamespace AND relkind <> 'i'"),
            "pgjobd_migrations");
  EXPECT_EQ(schema.query("SELECT string_agg(proname, ',' ORDER BY proname) FROM pg_proc WHERE "
                         "pronamespace = '" +
                         quoted + "'::regnamespace"),
            "now,pg_notify");
  schema.exec("DELETE FROM " + quoted + ".pgjobd_migrations");
  auto conn = open_connection(schema.config().database, "test");
  migrate(*conn, schema.name());
  schema.exec("SET search_path TO \"" + schema.name() +
              "\", pg_catalog; INSERT INTO jobs (type) VALUES ('a'); RESET search_path");
  EXPECT_EQ(schema.query("SELECT run_at > '2001-01-01' AND created_at > '2001-01-01' FROM {jobs}"),
            "t");
  // The SQL interface's functions (SECURITY DEFINER) fix their own search_path: called from
  // a session that searches the schema first, they bind the built-ins, and the planted
  // pg_notify (which would raise) is never called.
  schema.exec("SET search_path TO \"" + schema.name() +
              "\", pg_catalog; SELECT pgjobd_enqueue('b'); SELECT pgjobd_pause_queue('q'); "
              "SELECT pgjobd_resume_queue('q'); RESET search_path");
  EXPECT_EQ(schema.query("SELECT run_at > '2001-01-01' FROM {jobs} WHERE type = 'b'"), "t");
  const std::string running = schema.query(
      "UPDATE {jobs} SET status = 'running', locked_by = 'w', locked_until = now() + interval "
      "'1 hour' WHERE type = 'b' RETURNING id");
  schema.exec("SET search_path TO \"" + schema.name() + "\", pg_catalog; SELECT pgjobd_cancel(" +
              running + "); RESET search_path");
  EXPECT_EQ(schema.query("SELECT finished_at IS NULL AND cancel_requested_at > '2001-01-01' FROM "
                         "{jobs} WHERE type = 'b'"),
            "t");
  schema.exec("SET search_path TO \"" + schema.name() +
              "\", pg_catalog; SELECT pgjobd_schedule_upsert('s', 'b', every => '1 minute'); "
              "SELECT pgjobd_schedule_pause('s'); SELECT pgjobd_schedule_resume('s'); "
              "RESET search_path");
  EXPECT_EQ(schema.query("SELECT last_tick > '2001-01-01' FROM " + quoted +
                         ".pgjobd_schedules WHERE name = 's'"),
            "t");
}

}  // namespace
}  // namespace pgjobd
