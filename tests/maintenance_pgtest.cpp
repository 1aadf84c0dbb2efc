// Maintenance against PostgreSQL: which leases it renews.

#include "engine/maintenance.hpp"

#include <gtest/gtest.h>

#include <atomic>

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

// A finished job whose completion is still queued (the completer is held up by the
// database) keeps its lease: otherwise it could be rescued and run again.
TEST(Maintenance, RenewsTheLeasesOfJobsAwaitingTheirCompletion) {
  TestSchema schema;
  Config config = schema.config();
  config.lease.duration = 3s;  // a heartbeat every second
  const std::int64_t awaiting = insert_running_job(schema, "2 seconds");
  const std::int64_t forgotten = insert_running_job(schema, "2 seconds");
  WorkerPool pool(
      config.worker, [](const Job&, std::stop_token) { return std::nullopt; }, [](Completion) {},
      [](int) {});
  Metrics metrics({"default"}, {"t"});
  Health health;
  std::atomic<int> asked{0};
  Maintenance maintenance(config, kWorker, pool, metrics, health, [&] {
    ++asked;
    return std::vector<WorkerPool::RunningJob>{{awaiting, 1}};
  });
  const std::string forgotten_until = locked_until(schema, forgotten);
  // Renewed by the first heartbeat (after 1 s), before the first lease ran out (2 s).
  ASSERT_TRUE(wait_until([&] { return lease_left_seconds(schema, awaiting) > 2; }, 5s));
  maintenance.stop();
  EXPECT_GT(asked.load(), 0);
  // The job nobody holds any more was left alone: it will expire and be rescued.
  EXPECT_EQ(locked_until(schema, forgotten), forgotten_until);
}

// Completions of an earlier attempt do not renew a lease the job no longer has.
TEST(Maintenance, DoesNotRenewAnotherAttemptsLease) {
  TestSchema schema;
  Config config = schema.config();
  config.lease.duration = 3s;
  const std::int64_t id = insert_running_job(schema, "2 seconds");
  WorkerPool pool(
      config.worker, [](const Job&, std::stop_token) { return std::nullopt; }, [](Completion) {},
      [](int) {});
  Metrics metrics({"default"}, {"t"});
  Health health;
  std::atomic<int> asked{0};
  Maintenance maintenance(config, kWorker, pool, metrics, health, [&] {
    ++asked;
    return std::vector<WorkerPool::RunningJob>{{id, 2}};  // not the attempt that runs
  });
  const std::string until = locked_until(schema, id);
  // The second call comes after the first heartbeat's statement has run.
  ASSERT_TRUE(wait_until([&] { return asked.load() >= 2; }, 5s));
  maintenance.stop();
  EXPECT_EQ(locked_until(schema, id), until);
}

}  // namespace
}  // namespace pgjobd
