// The rescue's backoff: a job whose lease expired runs again after the delay the engine's
// retry policy gives a failed attempt (src/engine/retry_policy.cpp), which the rescue
// computes per row in SQL (src/db/statements.cpp, retry_delay_ms).

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "db/pg_job_store.hpp"
#include "engine/retry_policy.hpp"
#include "support/test_database.hpp"

namespace pgjobd {
namespace {

using testing::TestSchema;

// Attempts across the whole range: doubling, the cap, and the exponent's clamp.
const std::vector<int> kRescuedAttempts = {1, 2, 3, 10, 25, 26, 40, 63, 64, 2000, 999999};

// Rescues one expired job at each of kRescuedAttempts with `retry`; returns each one's
// delay in ms (run_at - updated_at: both the rescue's now()), in kRescuedAttempts' order.
std::vector<std::string> rescued_delays(const RetryConfig& retry) {
  TestSchema schema;
  for (int attempts : kRescuedAttempts) {
    schema.exec(
        "INSERT INTO {jobs} (type, status, locked_by, locked_until, attempts, max_attempts) "
        "VALUES ('a', 'running', 'gone', now() - interval '1 second', " +
        std::to_string(attempts) + ", 1000000)");
  }
  PgJobStore store(schema.config().database, "test");
  const auto report = store.lead_and_rescue("rescuer", Millis(15000), retry, 100);
  EXPECT_EQ(report.failed, static_cast<int>(kRescuedAttempts.size()));
  return schema.column(
      "SELECT round(extract(epoch FROM run_at - updated_at) * 1000)::bigint FROM {jobs} "
      "ORDER BY id");
}

TEST(RescueBackoff, WithoutJitterTheDelayIsTheRetryPolicysToTheMillisecond) {
  const RetryConfig retry{Millis(7), Millis(10'000'000'000), 0.0};
  const auto delays = rescued_delays(retry);
  ASSERT_EQ(delays.size(), kRescuedAttempts.size());
  for (std::size_t i = 0; i < delays.size(); ++i) {
    SCOPED_TRACE("attempt " + std::to_string(kRescuedAttempts[i]));
    EXPECT_EQ(std::stoll(delays[i]), retry_delay(retry, kRescuedAttempts[i], 0.5).count());
  }
}

TEST(RescueBackoff, WithJitterTheDelayLiesWhereTheRetryPolicysDraws) {
  const RetryConfig retry{Millis(1000), Millis(600'000), 0.5};
  const auto delays = rescued_delays(retry);
  ASSERT_EQ(delays.size(), kRescuedAttempts.size());
  for (std::size_t i = 0; i < delays.size(); ++i) {
    SCOPED_TRACE("attempt " + std::to_string(kRescuedAttempts[i]));
    // The shortest and longest delays the policy draws (unit_random 0 and, at the limit, 1).
    EXPECT_GE(std::stoll(delays[i]), retry_delay(retry, kRescuedAttempts[i], 0.0).count());
    EXPECT_LE(std::stoll(delays[i]), retry_delay(retry, kRescuedAttempts[i], 1.0).count());
  }
}

}  // namespace
}  // namespace pgjobd
