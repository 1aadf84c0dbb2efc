// Leadership: takes or renews the leadership and rescues expired leases at the rescue
// interval; as leader, deletes expired daemon rows now and then; resigns on a clean exit.

#include "engine/leadership.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace pgjobd {

namespace {
// Rescue often enough that a dead daemon's jobs return within about one lease plus a few
// seconds, yet cheaply enough for an idle daemon (one query per 5 s, leadership included).
std::chrono::milliseconds rescue_interval_for(Millis lease) {
  return std::clamp<Millis>(lease / 3, Millis(200), Millis(5000));
}
}  // namespace

Leadership::Leadership(const Config& config, std::string worker_id,
                       std::shared_ptr<LeadershipStore> store, const WorkerPool& pool,
                       Metrics& metrics, const LimitRegistry* limits)
    : worker_id_(std::move(worker_id)),
      retry_(config.retry),
      store_(std::move(store)),
      pool_(pool),
      metrics_(metrics),
      limits_(limits),
      rescue_interval_(rescue_interval_for(config.lease.duration)) {}

void Leadership::begin(Clock::time_point now) {
  next_rescue_ = now;
  next_expiry_ = now;
}

void Leadership::run(Clock::time_point now, const std::stop_token& /*stop*/,
                     MaintenanceCalls& calls) {
  const auto interval = next_rescue_interval();
  calls.guarded("rescue", [&] { lead_and_rescue(interval); });
  next_rescue_ = now + interval;
  // The expiry waits for a leadership pass: it is the leader's upkeep of rows nobody
  // shows, and never urgent.
  if (now >= next_expiry_ && leader()) {
    calls.guarded("daemon expiry", [&] { store_->expire_daemons(); });
    next_expiry_ = now + kDaemonExpiryInterval;
  }
}

void Leadership::finish(MaintenanceCalls& calls) {
  if (leader()) calls.guarded("resign", [&] { store_->resign(worker_id_); });
}

std::chrono::milliseconds Leadership::next_rescue_interval() {
  const std::uint64_t submitted = pool_.submitted();
  const std::uint64_t holds = limits_ != nullptr ? limits_->holds() : 0;
  // Due jobs held back by a limit count as work: another daemon may hold their places.
  const bool idle =
      pool_.busy() == 0 && submitted == submitted_at_last_pass_ && holds == holds_at_last_pass_;
  submitted_at_last_pass_ = submitted;
  holds_at_last_pass_ = holds;
  return idle ? std::max<Millis>(rescue_interval_, kIdleRescueInterval) : rescue_interval_;
}

void Leadership::lead_and_rescue(std::chrono::milliseconds interval) {
  // The leadership outlives three passes at the interval this daemon will keep until the
  // next one, so a leader that goes idle is not taken over while it is alive.
  const RescueReport report =
      store_->lead_and_rescue(worker_id_, interval * 3, retry_, kRescueBatch);
  if (report.leader != leader()) {
    spdlog::info(report.leader ? "this daemon is now the maintenance leader"
                               : "this daemon is no longer the maintenance leader");
    leader_.store(report.leader, std::memory_order_release);
  }
  const int total = report.failed + report.dead + report.cancelled;
  if (total == 0) return;
  metrics_.rescued(total);
  spdlog::warn(
      "rescued {} job(s) with an expired lease: {} back in the queue, {} dead, {} cancelled (a "
      "cancel was pending)",
      total, report.failed, report.dead, report.cancelled);
}

}  // namespace pgjobd
