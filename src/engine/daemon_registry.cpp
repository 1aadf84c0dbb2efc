// DaemonRegistry: this daemon's row, kept fresh at the heartbeat interval and deleted on a
// clean exit.

#include "engine/daemon_registry.hpp"

#include <unistd.h>

#include "engine/lease_renewer.hpp"
#include "pgjobd/version.hpp"

namespace pgjobd {

namespace {
DaemonReport daemon_identity(const std::string& worker_id, const Config& config) {
  DaemonReport report;
  report.id = worker_id;
  char host[256] = "unknown";
  gethostname(host, sizeof host - 1);
  report.host = host;
  report.pid = getpid();
  report.version = kVersion;
  report.concurrency = config.worker.concurrency;
  // Rows not seen for three leases are gone: as long as a lease lets a dead daemon's jobs
  // wait, and two missed heartbeats more never hide a live daemon.
  report.ttl = config.lease.duration * 3;
  return report;
}
}  // namespace

DaemonRegistry::DaemonRegistry(const Config& config, const std::string& worker_id,
                               std::shared_ptr<DaemonRegistryStore> store, const WorkerPool& pool)
    : store_(std::move(store)),
      pool_(pool),
      lease_(config.lease.duration),
      interval_(LeaseRenewer::interval_for(config.lease.duration)),
      daemon_(daemon_identity(worker_id, config)) {}

// The dashboard shows this daemon from its start, not from its first heartbeat interval.
void DaemonRegistry::begin(Clock::time_point now) { next_report_ = now; }

void DaemonRegistry::run(Clock::time_point now, const std::stop_token& /*stop*/,
                         MaintenanceCalls& calls) {
  calls.guarded("daemon report", [&] { report(); });
  next_report_ = now + interval_;
}

void DaemonRegistry::finish(MaintenanceCalls& calls) {
  calls.guarded("daemon remove", [&] { store_->remove_daemon(daemon_.id); });
}

void DaemonRegistry::report() {
  // At each heartbeat interval while the busy count moves; otherwise once per lease, which
  // is enough to stay within the row's 3 × lease and keeps an idle daemon's cost at one
  // statement per lease (0.03/s at the default 30 s) rather than three.
  const int busy = pool_.working();
  const auto now = Clock::now();
  if (last_report_ && busy == daemon_.busy && now - *last_report_ < lease_) return;
  daemon_.busy = busy;
  store_->report_daemon(daemon_);
  last_report_ = now;
}

}  // namespace pgjobd
