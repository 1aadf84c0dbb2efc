// Exponential backoff with a cap and symmetric jitter.

#include "engine/retry_policy.hpp"

#include <algorithm>
#include <cmath>
#include <random>

namespace pgjobd {

Millis retry_delay(const RetryConfig& config, int attempt, double unit_random) {
  const int exponent = std::clamp(attempt - 1, 0, 62);
  // In double: base * 2^62 overflows an int64 of milliseconds long before the cap applies.
  const double uncapped = static_cast<double>(config.base.count()) * std::ldexp(1.0, exponent);
  const double capped = std::min(uncapped, static_cast<double>(config.max_delay.count()));
  const double factor = 1.0 + config.jitter * (2.0 * unit_random - 1.0);
  return Millis(static_cast<Millis::rep>(std::llround(std::max(0.0, capped * factor))));
}

Millis retry_delay(const RetryConfig& config, int attempt) {
  thread_local std::mt19937_64 generator{std::random_device{}()};
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  return retry_delay(config, attempt, unit(generator));
}

}  // namespace pgjobd
