// ReconnectBackoff's schedule.

#include "store/reconnect_backoff.hpp"

#include <algorithm>
#include <random>

namespace pgjobd {

std::chrono::milliseconds ReconnectBackoff::next() {
  thread_local std::mt19937 generator{std::random_device{}()};
  const int exponent = std::min(failures_, 7);
  ++failures_;
  const double base = std::min(100.0 * (1 << exponent), 10000.0);
  std::uniform_real_distribution<double> jitter(0.8, 1.2);
  return std::chrono::milliseconds(static_cast<long>(base * jitter(generator)));
}

}  // namespace pgjobd
