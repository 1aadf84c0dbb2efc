#pragma once
// Stops handlers whose lease has run out because heartbeats could not renew it (an outage,
// a frozen daemon, or another session holding that job's row): by then the rescuer may
// hand the job to another daemon, and two owners must not keep running one job. Each job
// is judged by its own last renewal (WorkerPool::renewed). Runs on a thread of its own
// because the heartbeat itself may be stuck on the unreachable database.

#include <chrono>

#include "engine/worker_pool.hpp"
#include "metrics/metrics.hpp"
#include "runtime/service.hpp"

namespace pgjobd {

class LeaseGuard final : public Service {
 public:
  using Clock = std::chrono::steady_clock;
  // `margin` is taken off the lease because our clock starts a little after the database's
  // (claim round trip).
  LeaseGuard(WorkerPool& pool, Millis lease, Millis margin);
  ~LeaseGuard() override;  // stop()
  LeaseGuard(const LeaseGuard&) = delete;
  LeaseGuard& operator=(const LeaseGuard&) = delete;

  void start() override;
  void request_stop() override;
  void join() override;

  // How often it checks: ten times per lease, which bounds how long a job outlives it.
  Millis period() const;

 private:
  void run(const std::stop_token& stop);

  WorkerPool& pool_;
  const Millis effective_lease_;
  ServiceThread thread_;  // last
};

}  // namespace pgjobd
