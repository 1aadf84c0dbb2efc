// ReconnectBackoff's schedule.

#include "store/reconnect_backoff.hpp"

#include <algorithm>
#include <random>

namespace pgjobd {

double ReconnectBackoff::base() const {
  return std::min(100.0 * (1 << std::min(failures_, 7)), 10000.0);
}

std::chrono::milliseconds ReconnectBackoff::next() {
  thread_local std::mt19937 generator{std::random_device{}()};
  const double wait = base();
  ++failures_;
  std::uniform_real_distribution<double> jitter(1 - kJitter, 1 + kJitter);
  return std::chrono::milliseconds(static_cast<long>(wait * jitter(generator)));
}

std::chrono::milliseconds ReconnectBackoff::shortest() const {
  return std::chrono::milliseconds(static_cast<long>(base() * (1 - kJitter)));
}

}  // namespace pgjobd
