// LimitsSync: the limits written and read back at the heartbeat interval, at once on a
// request, and their use reported.

#include "engine/limits_sync.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "engine/lease_renewer.hpp"

namespace pgjobd {

LimitsSync::LimitsSync(Millis lease, std::shared_ptr<LimitStore> store, LimitRegistry& limits,
                       Metrics& metrics)
    : store_(std::move(store)),
      limits_(limits),
      metrics_(metrics),
      heartbeat_interval_(LeaseRenewer::interval_for(lease)) {}

void LimitsSync::prepare(MaintenanceCalls& calls) {
  calls.guarded("limits", [&] { sync(); });
  prepared_ = true;
}

void LimitsSync::request() {
  requested_ = true;
  wake_loop();
}

// When prepare() ran just before, the first sync is one interval away.
void LimitsSync::begin(Clock::time_point now) { next_sync_ = prepared_ ? now + interval() : now; }

LimitsSync::Clock::time_point LimitsSync::due() const {
  // Requested: due since the steady clock's epoch (long past; no overflow in the wait).
  return requested_ ? Clock::time_point{} : next_sync_;
}

void LimitsSync::run(Clock::time_point now, const std::stop_token& /*stop*/,
                     MaintenanceCalls& calls) {
  requested_ = false;
  calls.guarded("limits", [&] { sync(); });
  next_sync_ = now + interval();
}

Millis LimitsSync::interval() const {
  return limits_.write_pending() ? std::min<Millis>(heartbeat_interval_, std::chrono::seconds(1))
                                 : heartbeat_interval_;
}

void LimitsSync::sync() {
  limits_.sync(*store_);
  if (!limits_.active()) {
    metrics_.set_limit_running({});
    return;
  }
  std::vector<std::string> unkeyed;
  std::vector<std::pair<std::string, std::string>> throttles;
  for (const LimitDefinition& definition : limits_.definitions()) {
    if (definition.limit.concurrency > 0) throttles.emplace_back(definition.name, "concurrency");
    if (definition.limit.rate_per_second > 0) throttles.emplace_back(definition.name, "rate");
    if (definition.limit.key.empty() && definition.limit.concurrency > 0) {
      unkeyed.push_back(definition.name);
    }
  }
  metrics_.set_limits(throttles);
  std::vector<std::pair<std::string, double>> running;
  for (const LimitUsage& usage : store_->limit_usage()) {
    if (std::find(unkeyed.begin(), unkeyed.end(), usage.name) != unkeyed.end()) {
      running.emplace_back(usage.name, static_cast<double>(usage.running));
    }
  }
  metrics_.set_limit_running(running);
}

}  // namespace pgjobd
