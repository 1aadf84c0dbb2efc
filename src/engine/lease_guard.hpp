#pragma once
// Stops handlers whose lease has run out because heartbeats could not reach the database
// (an outage, a frozen daemon): by then the rescuer may hand the job to another daemon,
// and two owners must not keep running one job. Runs on a thread of its own because the
// heartbeat itself may be stuck on the unreachable database.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "engine/worker_pool.hpp"
#include "metrics/metrics.hpp"

namespace pgjobd {

class LeaseGuard {
 public:
  using Clock = std::chrono::steady_clock;
  // last_renewal: when the last successful heartbeat was sent. `margin` is taken off the
  // lease because our clock starts a little after the database's (claim round trip).
  LeaseGuard(WorkerPool& pool, std::function<Clock::time_point()> last_renewal, Millis lease,
             Millis margin);
  ~LeaseGuard();  // stops
  LeaseGuard(const LeaseGuard&) = delete;
  LeaseGuard& operator=(const LeaseGuard&) = delete;

  void stop();  // safe twice

 private:
  void run();

  WorkerPool& pool_;
  const std::function<Clock::time_point()> last_renewal_;
  const Millis effective_lease_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;  // last
};

}  // namespace pgjobd
