#pragma once
// The heartbeat: renews the leases of this daemon's jobs, three times per lease, on a
// thread and a session of its own. Nothing else waits in front of it: retention, rescue,
// statistics, limits and the daemon registry run on the maintenance loops (Maintenance),
// whose slowest pass (a prune of millions of rows, a lock held by an application) once
// stopped renewals long enough for running jobs to be rescued and run twice. Its statement
// skips a row another session holds instead of waiting for it (PgJobStore::heartbeat): that
// job alone misses the renewal, and LeaseGuard stops it if its own lease runs out.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "engine/health.hpp"
#include "engine/worker_pool.hpp"
#include "metrics/metrics.hpp"
#include "runtime/service.hpp"
#include "store/heartbeat_store.hpp"

namespace pgjobd {

class LeaseRenewer final : public Service {
 public:
  // Jobs that left the pool but are not yet written as finished (the completer's queue):
  // renewed with the running ones, or the rescuer could run them again before the
  // completer writes that they finished.
  using AwaitingCompletion = std::function<std::vector<JobAttempt>()>;

  LeaseRenewer(Millis lease, std::string worker_id, std::unique_ptr<HeartbeatStore> store,
               WorkerPool& pool, Metrics& metrics, Health& health,
               AwaitingCompletion awaiting_completion = {});
  ~LeaseRenewer() override;  // stop()
  LeaseRenewer(const LeaseRenewer&) = delete;
  LeaseRenewer& operator=(const LeaseRenewer&) = delete;

  void start() override;
  void request_stop() override;
  void join() override;

  // Heartbeat now rather than at the next interval: the NOTIFY of pgjobd_cancel, so the
  // heartbeat's answer (which running jobs have a cancel request) stops them at once.
  void request_heartbeat();

  // A third of the lease (at least 100 ms): two heartbeats can be lost before it runs out.
  static Millis interval_for(Millis lease);

 private:
  void run(const std::stop_token& stop);
  void heartbeat();
  // Logs the jobs whose rows another session holds, each once while it stays held.
  void report_held(const std::vector<JobAttempt>& held);

  const Millis lease_;
  const Millis interval_;
  const std::string worker_id_;
  const std::unique_ptr<HeartbeatStore> store_;
  WorkerPool& pool_;
  Metrics& metrics_;
  Health& health_;
  const AwaitingCompletion awaiting_completion_;
  // Heartbeat thread only: the rows the last heartbeat found held, and those of them
  // already logged.
  std::set<JobAttempt> held_;
  std::set<JobAttempt> held_logged_;

  std::mutex mutex_;
  bool requested_ = false;  // request_heartbeat()
  std::condition_variable_any wake_;
  ServiceThread thread_;  // last: joined before the members it uses go away
};

}  // namespace pgjobd
