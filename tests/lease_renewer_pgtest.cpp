// Lease renewal against PostgreSQL: which leases a heartbeat renews, and that a row another
// session holds is skipped rather than waited for.

#include "engine/lease_renewer.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <pqxx/pqxx>

#include "db/connection.hpp"
#include "db/pg_job_store.hpp"
#include "support/test_database.hpp"

namespace pgjobd {
namespace {

using testing::TestSchema;
using testing::wait_until;
using namespace std::chrono_literals;

constexpr const char* kRenewingWorker = "renewing-worker";

// A job this daemon claimed (running, attempt 1, ours) whose lease runs out soon.
std::int64_t insert_leased_job(TestSchema& schema, const std::string& lease) {
  return std::stoll(schema.query(
      "INSERT INTO {jobs} (type, status, attempts, locked_by, locked_until, started_at) "
      "VALUES ('t', 'running', 1, '" +
      std::string(kRenewingWorker) + "', now() + interval '" + lease +
      "', now()) RETURNING id::text"));
}

double seconds_of_lease_left(TestSchema& schema, std::int64_t id) {
  return std::stod(
      schema.query("SELECT extract(epoch FROM locked_until - now())::text FROM "
                   "{jobs} WHERE id = " +
                   std::to_string(id)));
}

std::string locked_until_of(TestSchema& schema, std::int64_t id) {
  return schema.query("SELECT locked_until::text FROM {jobs} WHERE id = " + std::to_string(id));
}

// A LeaseRenewer for `schema` (lease 3 s: a heartbeat every second) with an idle pool,
// whose completer is said to hold the completions of `awaiting`; counts how often it was
// asked.
struct RenewerWithAwaiting {
  RenewerWithAwaiting(const Config& config, std::vector<JobAttempt> awaiting)
      : pool(
            config.worker, [](const Job&, const JobStop&) { return std::nullopt; },
            [](Completion) {}, [](int, bool) {}),
        metrics({"default"}, {"t"}),
        renewer(config.lease.duration, kRenewingWorker,
                std::make_unique<PgJobStore>(config.database, "test"), pool, metrics, health,
                [this, awaiting] {
                  ++asked;
                  return awaiting;
                }) {
    pool.start();
    renewer.start();
  }

  WorkerPool pool;
  Metrics metrics;
  Health health;
  std::atomic<int> asked{0};
  LeaseRenewer renewer;  // last: its thread uses the members above
};

Config three_second_lease(const TestSchema& schema) {
  Config config = schema.config();
  config.lease.duration = 3s;
  return config;
}

// A finished job whose completion is still queued (the completer is held up by the
// database) keeps its lease: otherwise it could be rescued and run again.
TEST(LeaseRenewer, RenewsTheLeasesOfJobsAwaitingTheirCompletion) {
  TestSchema schema;
  const std::int64_t awaiting = insert_leased_job(schema, "2 seconds");
  const std::int64_t forgotten = insert_leased_job(schema, "2 seconds");
  RenewerWithAwaiting r(three_second_lease(schema), {{awaiting, 1}});
  const std::string forgotten_until = locked_until_of(schema, forgotten);
  // Renewed by the first heartbeat (after 1 s), before the first lease ran out (2 s).
  ASSERT_TRUE(wait_until([&] { return seconds_of_lease_left(schema, awaiting) > 2; }, 5s));
  r.renewer.stop();
  EXPECT_GT(r.asked.load(), 0);
  // The job nobody holds any more was left alone: it will expire and be rescued.
  EXPECT_EQ(locked_until_of(schema, forgotten), forgotten_until);
}

// Completions of an earlier attempt do not renew a lease the job no longer has.
TEST(LeaseRenewer, DoesNotRenewAnotherAttemptsLease) {
  TestSchema schema;
  const std::int64_t id = insert_leased_job(schema, "2 seconds");
  RenewerWithAwaiting r(three_second_lease(schema), {{id, 2}});  // not the running attempt
  const std::string until = locked_until_of(schema, id);
  // The second call comes after the first heartbeat's statement has run.
  ASSERT_TRUE(wait_until([&] { return r.asked.load() >= 2; }, 5s));
  r.renewer.stop();
  EXPECT_EQ(locked_until_of(schema, id), until);
}

// An application holds one running job's row with SELECT ... FOR UPDATE and another's with
// an uncommitted UPDATE: the heartbeat renews the third at once and reports those two as
// held (still ours), without waiting for either lock. (It used to wait, and every lease of
// the daemon ran out behind one row.)
TEST(LeaseRenewer, AHeartbeatSkipsRowsAnotherSessionHoldsAndRenewsTheRest) {
  TestSchema schema;
  const std::int64_t selected = insert_leased_job(schema, "20 seconds");
  const std::int64_t updated = insert_leased_job(schema, "20 seconds");
  const std::int64_t free_row = insert_leased_job(schema, "20 seconds");
  const std::string free_until = locked_until_of(schema, free_row);

  Config config = schema.config();
  ConnectionPtr application = open_connection(config.database, "application");
  pqxx::work held(*application);
  held.exec("SELECT id FROM " + schema.qualified("jobs") +
            " WHERE id = " + std::to_string(selected) + " FOR UPDATE");
  held.exec("UPDATE " + schema.qualified("jobs") +
            " SET priority = priority WHERE id = " + std::to_string(updated));

  // A bound on the call, so the old statement's wait shows as a failure, not a hang.
  config.database.call_timeout = 5s;
  PgJobStore store(config.database, "heartbeat-test");
  const auto started = std::chrono::steady_clock::now();
  const HeartbeatReport report =
      store.heartbeat({{selected, 1}, {updated, 1}, {free_row, 1}}, kRenewingWorker, 60s);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 4s);
  EXPECT_EQ(report.kept, (std::vector<JobAttempt>{{free_row, 1}}));
  std::vector<JobAttempt> held_jobs = report.held;
  std::sort(held_jobs.begin(), held_jobs.end());
  EXPECT_EQ(held_jobs, (std::vector<JobAttempt>{{selected, 1}, {updated, 1}}));
  EXPECT_NE(locked_until_of(schema, free_row), free_until);
  EXPECT_GT(seconds_of_lease_left(schema, free_row), 50);

  held.abort();
  // Once the application lets go, they are renewed like any other.
  const HeartbeatReport after =
      store.heartbeat({{selected, 1}, {updated, 1}, {free_row, 1}}, kRenewingWorker, 60s);
  EXPECT_EQ(after.kept.size(), 3u);
  EXPECT_TRUE(after.held.empty());
}

}  // namespace
}  // namespace pgjobd
