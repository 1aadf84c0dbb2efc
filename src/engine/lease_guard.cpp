// LeaseGuard: a periodic check of running jobs against their lease.

#include "engine/lease_guard.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>

namespace pgjobd {

LeaseGuard::LeaseGuard(WorkerPool& pool, Millis lease, Millis margin)
    : pool_(pool), effective_lease_(std::max(lease - margin, lease / 2)) {}

LeaseGuard::~LeaseGuard() { stop(); }

void LeaseGuard::start() {
  thread_.start([this](const std::stop_token& stop) { run(stop); });
}
void LeaseGuard::request_stop() { thread_.request_stop(); }
void LeaseGuard::join() { thread_.join(); }

Millis LeaseGuard::period() const {
  return std::clamp<Millis>(effective_lease_ / 10, Millis(50), Millis(1000));
}

void LeaseGuard::run(const std::stop_token& stop) {
  std::mutex mutex;
  std::condition_variable_any cv;  // nothing notifies it: the stop token ends its waits
  std::unique_lock lock(mutex);
  while (!cv.wait_for(lock, stop, period(), [] { return false; }) && !stop.stop_requested()) {
    const auto stopped = pool_.stop_expired(effective_lease_);
    if (!stopped.empty()) {
      spdlog::error(
          "the lease of {} running job(s) ran out without a heartbeat renewing it (the database "
          "unreachable, or their rows locked by another session); stopping them (the rescuer "
          "returns them to the queue)",
          stopped.size());
    }
  }
}

}  // namespace pgjobd
