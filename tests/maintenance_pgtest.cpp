// The maintenance services against PostgreSQL: the statistics round.

#include "engine/maintenance.hpp"
#include "support/metrics_text.hpp"

#include <gtest/gtest.h>

#include <prometheus/collectable.h>
#include <prometheus/text_serializer.h>

#include <atomic>
#include <cmath>

#include "db/pg_database.hpp"
#include "support/daemon_process.hpp"
#include "support/test_database.hpp"

namespace pgjobd {
namespace {

using testing::TestSchema;
using testing::wait_until;
using namespace std::chrono_literals;

constexpr const char* kWorker = "test-worker";

// A Maintenance for `schema` with an idle pool.
struct IdleMaintenance {
  explicit IdleMaintenance(const Config& config)
      : pool(
            config.worker, [](const Job&, const JobStop&) { return std::nullopt; },
            [](Completion) {}, [](int, bool) {}),
        metrics({"default"}, {"t"}),
        database(config.database),
        maintenance(config, kWorker, database, pool, metrics, health, nullptr) {
    pool.start();
    maintenance.start();
  }

  WorkerPool pool;
  Metrics metrics;
  Health health;
  PgDatabase database;
  Maintenance maintenance;  // last: its thread uses the members above
};

// A job with run_at = '-infinity' (allowed before schema v3; the constraint is dropped here
// to write one) neither fails the statistics
// round (the database stays healthy) nor puts an infinite age on /metrics.
TEST(Maintenance, StatisticsSurviveAnInfiniteRunAt) {
  TestSchema schema;
  schema.exec("ALTER TABLE {jobs} DROP CONSTRAINT jobs_run_at_finite");
  schema.exec("INSERT INTO {jobs} (type, run_at) VALUES ('t', '-infinity'), ('t', now())");
  schema.exec("INSERT INTO {jobs} (type, queue, run_at) VALUES ('t', 'not-served', now())");
  Config config = schema.config();
  config.lease.duration = 3s;
  IdleMaintenance m(config);
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
