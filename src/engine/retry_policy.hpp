#pragma once
// When a failed job runs again: min(base * 2^(attempt-1), max_delay) ± jitter.
// The rescue of expired leases computes the same delay per row in SQL (src/db/statements.cpp,
// retry_delay_ms): change both; tests/rescue_backoff_pgtest.cpp fails while they disagree.

#include "pgjobd/config.hpp"

namespace pgjobd {

// `attempt` is the attempt that just failed (1 for the first run). `unit_random` is a
// number in [0, 1) that picks the jitter; jitter spreads retries of jobs that failed
// together (a downstream outage) so they do not return as one thundering herd.
Millis retry_delay(const RetryConfig& config, int attempt, double unit_random);

// The same with a thread-local random generator.
Millis retry_delay(const RetryConfig& config, int attempt);

}  // namespace pgjobd
