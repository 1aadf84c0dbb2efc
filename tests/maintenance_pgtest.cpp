// Maintenance against PostgreSQL: which leases it renews.

#include "engine/maintenance.hpp"
#include "support/metrics_text.hpp"

#include <gtest/gtest.h>

#include <prometheus/collectable.h>
#include <prometheus/text_serializer.h>

#include <atomic>
#include <cmath>

#include "db/pg_job_store.hpp"
#include "support/daemon_process.hpp"
#include "support/test_database.hpp"

namespace pgjobd {
namespace {

using testing::TestSchema;
using testing::wait_until;
using namespace std::chrono_literals;

constexpr const char* kWorker = "test-worker";

// A job this daemon claimed (running, attempt 1, ours) whose lease runs out soon.
std::int64_t insert_running_job(TestSchema& schema, const std::string& lease) {
  return std::stoll(schema.query(
      "INSERT INTO {jobs} (type, status, attempts, locked_by, locked_until, started_at) "
      "VALUES ('t', 'running', 1, '" +
      std::string(kWorker) + "', now() + interval '" + lease + "', now()) RETURNING id::text"));
}

double lease_left_seconds(TestSchema& schema, std::int64_t id) {
  return std::stod(
      schema.query("SELECT extract(epoch FROM locked_until - now())::text FROM "
                   "{jobs} WHERE id = " +
                   std::to_string(id)));
}

std::string locked_until(TestSchema& schema, std::int64_t id) {
  return schema.query("SELECT locked_until::text FROM {jobs} WHERE id = " + std::to_string(id));
}

// A Maintenance for `schema` (lease 3 s: a heartbeat every second) with an idle pool,
// whose completer is said to hold the completions of `awaiting`; counts how often it
// was asked.
struct MaintenanceWithAwaiting {
  MaintenanceWithAwaiting(const Config& config, std::vector<JobAttempt> awaiting)
      : pool(
            config.worker, [](const Job&, const JobStop&) { return std::nullopt; },
            [](Completion) {}, [](int, bool) {}),
        metrics({"default"}, {"t"}),
        maintenance(config, kWorker, std::make_unique<PgJobStore>(config.database, "test"), pool,
                    metrics, health, [this, awaiting] {
                      ++asked;
                      return awaiting;
                    }) {
    pool.start();
    maintenance.start();
  }

  WorkerPool pool;
  Metrics metrics;
  Health health;
  std::atomic<int> asked{0};
  Maintenance maintenance;  // last: its thread uses the members above
};

Config lease_of_three_seconds(const TestSchema& schema) {
  Config config = schema.config();
  config.lease.duration = 3s;
  return config;
}

// A finished job whose completion is still queued (the completer is held up by the
// database) keeps its lease: otherwise it could be rescued and run again.
TEST(Maintenance, RenewsTheLeasesOfJobsAwaitingTheirCompletion) {
  TestSchema schema;
  const std::int64_t awaiting = insert_running_job(schema, "2 seconds");
  const std::int64_t forgotten = insert_running_job(schema, "2 seconds");
  MaintenanceWithAwaiting m(lease_of_three_seconds(schema), {{awaiting, 1}});
  const std::string forgotten_until = locked_until(schema, forgotten);
  // Renewed by the first heartbeat (after 1 s), before the first lease ran out (2 s).
  ASSERT_TRUE(wait_until([&] { return lease_left_seconds(schema, awaiting) > 2; }, 5s));
  m.maintenance.stop();
  EXPECT_GT(m.asked.load(), 0);
  // The job nobody holds any more was left alone: it will expire and be rescued.
  EXPECT_EQ(locked_until(schema, forgotten), forgotten_until);
}

// Completions of an earlier attempt do not renew a lease the job no longer has.
TEST(Maintenance, DoesNotRenewAnotherAttemptsLease) {
  TestSchema schema;
  const std::int64_t id = insert_running_job(schema, "2 seconds");
  MaintenanceWithAwaiting m(lease_of_three_seconds(schema), {{id, 2}});  // not the running attempt
  const std::string until = locked_until(schema, id);
  // The second call comes after the first heartbeat's statement has run.
  ASSERT_TRUE(wait_until([&] { return m.asked.load() >= 2; }, 5s));
  m.maintenance.stop();
  EXPECT_EQ(locked_until(schema, id), until);
}

// A job with run_at = '-infinity' (allowed before schema v3; the constraint is dropped here
// to write one) neither fails the statistics
// round (the database stays healthy) nor puts an infinite age on /metrics.
TEST(Maintenance, StatisticsSurviveAnInfiniteRunAt) {
  TestSchema schema;
  schema.exec("ALTER TABLE {jobs} DROP CONSTRAINT jobs_run_at_finite");
  schema.exec("INSERT INTO {jobs} (type, run_at) VALUES ('t', '-infinity'), ('t', now())");
  schema.exec("INSERT INTO {jobs} (type, queue, run_at) VALUES ('t', 'not-served', now())");
  MaintenanceWithAwaiting m(lease_of_three_seconds(schema), {});
  std::optional<double> age;
  ASSERT_TRUE(wait_until(
      [&] {
        const std::string text = testing::scrape(m.metrics);
        age = testing::metric_value(text, "pgjobd_oldest_due_job_age_seconds",
                                    {{"queue", "default"}});
        return age && *age > 0 &&
               testing::metric_value(text, "pgjobd_queue_depth",
                                     {{"queue", "default"}, {"status", "pending"}}) == 2.0;
      },
      20s));
  EXPECT_TRUE(std::isfinite(*age)) << *age;
  EXPECT_GE(*age, 100 * 365.0 * 86400);
  EXPECT_EQ(m.health.problems(), "");
  const std::string text = testing::scrape(m.metrics);
  EXPECT_EQ(text.find("not-served"), std::string::npos) << text;
}

}  // namespace
}  // namespace pgjobd
