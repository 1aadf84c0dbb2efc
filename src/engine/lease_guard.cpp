// LeaseGuard: a once-a-second check of running jobs against their lease.

#include "engine/lease_guard.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace pgjobd {

LeaseGuard::LeaseGuard(WorkerPool& pool, std::function<Clock::time_point()> last_renewal,
                       Millis lease, Millis margin)
    : pool_(pool),
      last_renewal_(std::move(last_renewal)),
      effective_lease_(std::max(lease - margin, lease / 2)),
      thread_([this] { run(); }) {}

LeaseGuard::~LeaseGuard() { stop(); }

void LeaseGuard::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void LeaseGuard::run() {
  // Checking ten times per lease bounds how long a job outlives its lease.
  const auto period = std::clamp<Millis>(effective_lease_ / 10, Millis(50), Millis(1000));
  std::unique_lock lock(mutex_);
  while (!cv_.wait_for(lock, period, [&] { return stopping_; })) {
    lock.unlock();
    const auto stopped = pool_.stop_expired(last_renewal_(), effective_lease_);
    if (!stopped.empty()) {
      spdlog::error(
          "the lease of {} running job(s) ran out without a heartbeat reaching the database; "
          "stopping them (the rescuer returns them to the queue)",
          stopped.size());
    }
    lock.lock();
  }
}

}  // namespace pgjobd
